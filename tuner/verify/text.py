"""The gate's words: a block per configuration for the terminal and for report.md."""

from __future__ import annotations

from typing import Any


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
        f"  - acceptance length {_f(acc.get('gate'), '.2f')} (sweep measured {_f(acc.get('measured'), '.2f')}; "
        f"first window {_f(dr.get('first'), '.2f')}, last {_f(dr.get('last'), '.2f')}, noise {_f(dr.get('noise'), '.2f')})"
    )
    out.append(f"  - cost: {v.get('requests')} requests in {_f(v.get('seconds'), '.1f')} s")
    for r in (v.get("reasons") or [])[1:] if not v.get("passed") else []:
        out.append(f"  - also: {r}")
    if not v.get("passed"):
        out.insert(1, f"  - why: {(v.get('reasons') or ['?'])[0]}")
    return out
