"""The correctness gate's words (tuner/verify/): a block per configuration for `python -m tuner verify`
and for report.md's "Correctness gate" section, from the verdicts kept in `verify` records."""

from __future__ import annotations

from typing import Any

from sglang_utils.sglang_verify import ACCEPT_SE_Z

from ..data.records import judged_failure


def _f(v: Any, fmt: str) -> str:
    return "-" if v is None else format(float(v), fmt)


def block(label: str, v: dict[str, Any]) -> list[str]:
    """Markdown lines for one configuration's verdict."""
    s, lg, acc, dr = v.get("short") or {}, v.get("long") or {}, v.get("accept") or {}, v.get("drift") or {}
    out = [
        f"- **{label}**: " + ("passed" if v.get("passed") else "**failed**") + f" ({(v.get('rule') or {}).get('why')})"
    ]
    out.append(
        f"  - exact match: {s.get('exact')}/{s.get('prompts')} short continuations"
        + (
            f"; first divergence at token {s.get('first_divergence_min')} (median {_f(s.get('first_divergence_median'), 'g')})"
            if s.get("diverged")
            else ""
        )
        + f"; long outputs identical: {(lg.get('prompts') or 0) - (lg.get('diverged') or 0)}/{lg.get('prompts')}"
    )
    ex = s.get("example") or lg.get("example")
    if ex:
        out.append(
            f"  - first diverging example: prompt `{ex['prompt_id']}` at token {ex['position']}: "
            f"baseline `{ex['baseline']}` / this configuration `{ex['candidate']}`"
        )
    out.append(
        "  - degeneration: "
        + (
            ", ".join(
                f"`{d['prompt_id']}` loops ({d['period']} tokens from token {d['start']})"
                for d in v.get("degenerate") or []
            )
            or "no long output ends in a repeated cycle"
        )
    )
    out.append(
        f"  - acceptance length {_f(acc.get('gate'), '.2f')} ("
        + (
            f"sweep measured {_f(acc.get('measured'), '.2f')}"
            # the 95%-of-measured rule forgives a shortfall within ACCEPT_SE_Z of these
            + (
                f", the gate's prompt-to-prompt standard error {acc['prompt_se']:.2f} (a shortfall within "
                f"{ACCEPT_SE_Z:g} of them passes); "
                if acc.get("prompt_se")
                else "; "
            )
            if acc.get("judged", True)
            else "not judged on this deployment: on the measurement deployment; "
        )
        + (
            f"long prompts' first sends {_f(dr.get('first'), '.2f')}, sent again {_f(dr.get('last'), '.2f')}"
            if "first_sends" in dr
            # records written before the gate sent its long prompts twice: windows of the run
            else f"first window {_f(dr.get('first'), '.2f')}, last {_f(dr.get('last'), '.2f')}"
        )
        + f", noise {_f(dr.get('noise'), '.2f')})"
        + (
            "; drift not judged: "
            + (
                "one long output a send is too few to judge by"
                if dr.get("method")
                else "the server sent neither per-chunk verify counts nor acceptance histograms"
            )
            if dr.get("judged") is False and dr.get("drop") is not None
            else ""
        )
    )
    if acc.get("floor_judged") is False:
        out.append(f"  - not judged by the acceptance floor: {v.get('acceptance_vs_sweep') or 'it pins 0 steps there'}")
    load = f" (+{v['load_requests']} short prompts sent again as load)" if v.get("load_requests") else ""
    out.append(f"  - cost: {v.get('requests')} requests{load} in {_f(v.get('seconds'), '.1f')} s")
    for r in (v.get("reasons") or [])[1:] if not v.get("passed") else []:
        out.append(f"  - also: {r}")
    if not v.get("passed"):
        out.insert(1, f"  - why: {(v.get('reasons') or ['?'])[0]}")
    return out


def judged_by(state: Any, cid: str) -> str:
    """Which rule a configuration was judged by, in words (report and recommendation.json)."""
    ex = state.verify_exact.get(cid)
    th = state.verify.get(cid)
    if ex is not None and not ex.verdict.get("unchecked"):
        return "exact (100% on a redeploy with --enable-deterministic-inference)" + (
            "; acceptance on its measurement deployment" if th is not None else "; measured before a resume"
        )
    if th is None:
        return "not checked"
    if not th.passed and not judged_failure(th):
        # the outputs were never compared (no baseline, a server that did not answer): no rule judged it
        return str(th.reasons[0])
    rule = (th.verdict.get("rule") or {}).get("mode")
    if rule == "deterministic":
        return "exact (its measurement deployment ran with --enable-deterministic-inference)"
    return "threshold (60% exact on its measurement deployment)" + (
        f"; exact round: {(ex.reasons or ['?'])[0]}" if ex is not None else ""
    )


# why the exact round left a pick unchecked that no host's role runs (tuner/verify/phase.py `exact_round`)
REFUSED_EVERYWHERE = "the role of every host refuses it"


def exact_round_text(
    made: int,
    deploys: int,
    secs: float,
    stopped: str | None,
    left: list[str],
    refused: list[str],
    trees: list[str],
    uno: list[str],
    bound: int,
) -> str:
    """The exact round's line once done: what it redeployed and cost, and each pick it did not hold
    to exact parity with why (`left`: stopped early or past the `bound`; `refused`: no host runs it;
    draft trees and UNO, never exact)."""
    text = f"{made} configuration(s) redeployed, {deploys} deploy(s) in all, {secs:.1f} s"
    if stopped:
        text += f"; stopped: {stopped}"
    elif left:
        text += f"; the bound of {bound} was reached"
    if left:
        text += f"; {', '.join(left)} keep their per-deployment (threshold) verdict only"
    if refused:
        text += f"; {', '.join(refused)} ({REFUSED_EVERYWHERE}) keep their threshold verdict only"
    if trees:
        text += f"; {', '.join(trees)} (draft trees, never exact) keep their threshold verdict"
    if uno:
        text += f"; {', '.join(uno)} (UNO, which SGLang does not run deterministic) keep their threshold verdict"
    return text


def exact_json(state: Any) -> dict[str, Any]:
    """recommendation.json's `verify.exact_round`: what the round did and cost (all its runs)."""
    rnd = state.verify_exact_round
    return {
        "ran": bool(rnd is not None and rnd.verdict.get("applies")),
        "why": None if rnd is None else rnd.verdict.get("why"),
        "deploys": int(state.verify_exact_cost["deploys"]),
        "seconds": round(float(state.verify_exact_cost["seconds"]), 3),
        "configs": {
            cid: {"passed": v.passed, "reason": (v.reasons or [None])[0], "unchecked": bool(v.verdict.get("unchecked"))}
            for cid, v in state.verify_exact.items()
        },
        "left_unchecked": [] if rnd is None else list(rnd.verdict.get("unchecked") or []),
        "stopped": None if rnd is None else rnd.verdict.get("stopped"),
    }


def _exact_lines(state: Any) -> list[str]:
    rnd = state.verify_exact_round
    lines = ["", "### Exact round (deterministic inference)", ""]
    if rnd is None and not state.verify_exact:
        return lines + ["The exact round did not run (the sweep ended before it)."]
    if rnd is not None and not rnd.verdict.get("applies") and not state.verify_exact:
        return lines + [f"Not run: {rnd.verdict.get('why')}."]
    cost = state.verify_exact_cost
    base = state.verify_exact_baseline
    if base is not None and base.passed:
        lines.append(
            f"Deterministic baseline: `k0` deployed with --enable-deterministic-inference on {base.host} "
            f"({base.requests} requests in {_f(base.seconds, '.1f')} s after a {_f(base.deploy_s, '.1f')} s deploy): "
            f"{base.verdict.get('baseline')}."
        )
    elif base is not None:
        lines.append(f"Deterministic baseline: {(base.reasons or ['?'])[0]}.")
    else:
        lines.append("Deterministic baseline: reused from an earlier run (no deploy).")
    lines.append(
        f"Cost: {int(cost['deploys'])} extra deployment(s), {float(cost['seconds']):.1f} s (deploys and the gate's requests)."
    )
    lines.append("")
    for cid, v in state.verify_exact.items():
        verdict = {**v.verdict, "passed": v.passed, "reasons": v.reasons, "requests": v.requests, "seconds": v.seconds}
        if v.verdict.get("short"):
            bl = block(f"{cid} redeployed with --enable-deterministic-inference on {v.host}", verdict)
            bl = [ln + f" (+ a {_f(v.deploy_s, '.1f')} s deploy)" if ln.startswith("  - cost:") else ln for ln in bl]
        else:
            bl = [f"- **{cid}**: {(v.reasons or ['?'])[0]}"]
        lines += bl
    refused = list(rnd.verdict.get("refused") or []) if rnd is not None else []
    left = [cid for cid in (rnd.verdict.get("unchecked") or []) if cid not in refused] if rnd is not None else []
    if rnd is not None and left:
        lines += [
            "",
            f"Not redeployed ({'stopped: ' + rnd.verdict['stopped'] if rnd.verdict.get('stopped') else 'the bound was reached'}): "
            f"{', '.join(left)} keep their threshold verdict only.",
        ]
    if refused:
        lines += ["", f"Not redeployed: {', '.join(refused)} ({REFUSED_EVERYWHERE}) keep their threshold verdict only."]
    return lines


def report_section(state: Any, verify_on: bool, is_sweep: bool) -> list[str]:
    """report.md's "Correctness gate": the baseline, then a block per configuration checked, with the
    gate's cost against the configuration's measurement time (bench/verify_cost.py's rule)."""
    if not is_sweep:
        return []
    lines = ["", "## Correctness gate", ""]
    if not verify_on and not state.verify:
        return lines + [
            "The outputs were not checked (--no-verify): nothing here says the configurations are lossless."
        ]
    if not state.verify and state.verify_baseline is None:
        lines.append(
            "No configuration was checked on its measurement deployment (none finished its levels with it on)."
        )
        if state.verify_exact_round is None and not state.verify_exact:
            return lines
        return lines + _exact_lines(state) + [""]
    base = state.verify_baseline
    if base is not None and base.passed:
        lines.append(
            f"Baseline: the no-speculation configuration, deployed once on {base.host} ({base.requests} requests in "
            f"{_f(base.seconds, '.1f')} s after a {_f(base.deploy_s, '.1f')} s deploy): {base.verdict.get('baseline')}."
        )
    elif base is not None:
        lines.append(f"Baseline: {(base.reasons or ['?'])[0]}.")
    else:
        lines.append("Baseline: reused from an earlier campaign (no no-speculation deploy).")
    lines.append("")
    for cid, v in state.verify.items():
        # the rule's terms (docs/tuner.md "Verify"): the gate's seconds over every deployment it
        # judged, against the configuration's measurement over every deployment
        bench, gate_s, runs = state.bench_s_all.get(cid), state.verify_seconds.get(cid), state.verify_runs.get(cid, 1)
        share = (
            f"; {100 * gate_s / bench:.1f}% of its {bench:.1f} s of measurement"
            + (f" (gated on each of its {runs} deployments: {gate_s:.1f} s in all)" if runs > 1 else "")
            if gate_s and bench
            else ""
        )
        verdict = {**v.verdict, "passed": v.passed, "reasons": v.reasons, "requests": v.requests, "seconds": v.seconds}
        block_lines = (
            block(f"{cid} on {v.host}", verdict)
            if v.verdict.get("short")
            else [f"- **{cid}**: " + ("passed" if v.passed else f"**failed**: {(v.reasons or ['?'])[0]}")]
        )
        if share:
            block_lines = [ln + share if ln.startswith("  - cost:") else ln for ln in block_lines]
        block_lines.insert(1, f"  - judged by: {judged_by(state, cid)}")
        lines += block_lines
    unchecked = [
        cid
        for cid in state.order
        if cid not in state.verify
        and cid not in state.verify_exact
        and state.configs[cid].spec_steps > 0
        and state.has_levels(cid)
    ]
    if unchecked:
        lines += ["", f"Not checked (measured without the gate, e.g. before a --resume): {', '.join(unchecked)}."]
    return lines + _exact_lines(state) + [""]
