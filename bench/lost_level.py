#!/usr/bin/env python3
"""A lost level is measured again: a real sweep against a server that crashes, restarted by systemd.

On one emulator host (a podman container with systemd, the role's unit with its
`Restart=on-failure`), `python -m tuner sweep` with
`-e '{"sglang_server_emulator_faults": ["crash-after-ready=8"]}'`: every start of the server dies
8 s after it is ready (issue #11's reproduction). Before issue #11 every level after the crash was
recorded as all-failed and the sweep ended without a recommendation. Now a level during which the
server went away is recorded as lost, the tuner waits for /health (systemd restarts the unit) and
measures that level once more; a second loss fails the configuration with the reason. This script
runs the sweep and writes what happened, level by level, from records.jsonl. Where the crashes
fall depends on timing (a level longer than the server's 8 s of life is lost twice), so two runs
can end differently; what must hold is that no lost level is compared, each is measured again once,
and a second loss fails the configuration with its reason.

Run it under the shared lock (it makes a container): flock /tmp/sgt-systemd.lock .venv/bin/python
bench/lost_level.py [--index 203]. Keeps the sweep's records and recommendation in
bench/lost_level/run.json, then writes bench/lost_level.md from that file; `--render` rebuilds the
page from it alone.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import git_rev, kept  # noqa: E402
from sweep_overhead import ENV, ROOT, hosts_play, make_inventory  # noqa: E402  (one host recipe)

DATA = ROOT / "bench" / "lost_level"


def measure(args) -> dict:
    """One sweep against the crashing server: its records and recommendation, as the run wrote them."""
    host = f"emu-b{args.index}"
    with tempfile.TemporaryDirectory(prefix="sgt-lost-") as tmp:
        inv = Path(tmp) / "inventory.yml"
        make_inventory(inv, host, args.index)
        out = Path(tmp) / "sweep"
        hosts_play(inv, "present")
        t0 = time.perf_counter()
        try:
            faults = json.dumps({"sglang_server_emulator_faults": [f"crash-after-ready={args.crash_after}"]})
            rc = subprocess.run(
                [sys.executable, "-m", "tuner", "sweep", "--inventory", str(inv), "--steps", args.steps]
                + [
                    "--concurrency",
                    args.concurrency,
                    "--no-early-stop",
                    "--search",
                    "grid",
                    "-e",
                    faults,
                    "--out",
                    str(out),
                ]
                + ["--recover-timeout", "120", "--quiet"],
                cwd=ROOT,
                env=ENV,
            ).returncode
        finally:
            took = time.perf_counter() - t0
            hosts_play(inv, "absent")
        return {
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "git": git_rev(),
            "node": platform.node(),
            "took_s": took,
            "args": {k: getattr(args, k) for k in ("steps", "concurrency", "crash_after")},
            "rc": rc,
            "records": [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()],
            "recommendation": json.loads((out / "recommendation.json").read_text()),
        }


def render(data: dict) -> str:
    """The page, level by level, from the kept run only."""
    args, recs, rec = data["args"], data["records"], data["recommendation"]
    rows = []
    for r in recs:
        cid = (r.get("config") or {}).get("config_id")
        dep = int(r.get("deployment") or 1)
        on = f" (deployment {dep})" if dep > 1 else ""
        if r["type"] == "deploy":
            rows.append(f"| {cid} | deploy{on} | | | {r['status']} | {r.get('reason') or ''} |")
        elif r["type"] == "level":
            m = r["metrics"]
            what = "lost with the server" if r.get("server_lost") else m["status"]
            note = f"{m['requests_failed']} of {m['requests']} failed" if m["requests_failed"] else ""
            if r.get("attempt", 1) > 1:
                note = (note + "; " if note else "") + "measured again after the server came back"
            tps = "-" if m.get("output_tok_s") is None else f"{m['output_tok_s']:.0f} tok/s"
            rows.append(f"| {cid} | level C={r['concurrency']}{on} | {r.get('attempt', 1)} | {tps} | {what} | {note} |")
        elif r["type"] == "bench_failed":
            rows.append(f"| {cid} | benchmark failed ({r.get('kind')}) | | | | {r.get('reason')} |")
        elif r["type"] == "verify" and r.get("role", "config") == "config":
            verdict = "passed" if r["passed"] else "failed"
            rows.append(f"| {cid} | correctness gate{on} | | | {verdict} | {'; '.join(r.get('reasons') or [])} |")
    best = rec["recommended"]
    lines = [
        "# A lost level is measured again (real systemd, crash-after-ready)",
        "",
        f"Generated by `bench/lost_level.py` on {data['date']} (code {data['git']}; {data['node']}, shared machine; "
        f"{data['took_s'] / 60:.1f} min). One emulator host (podman + systemd, the "
        f"role's unit, `Restart=on-failure`, 10 s restart delay, 1 s emulated start-up); `python -m tuner sweep "
        f'--steps {args["steps"]} --concurrency {args["concurrency"]} -e \'{{"sglang_server_emulator_faults": '
        f'["crash-after-ready={args["crash_after"]}"]}}\'`: every start of the server dies {args["crash_after"]} s '
        f"after it is ready. Exit status {data['rc']}. Raw data: `bench/lost_level/run.json` (the sweep's records and "
        "recommendation); `.venv/bin/python bench/lost_level.py --render` rebuilds this page from it.",
        "",
        "| configuration | event | attempt | aggregate | outcome | notes |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        "Recommendation: "
        + (f"**spec_steps {best['spec_steps']}** ({best['reason']})" if best.get("config_id") else best["reason"]),
        "",
        "Notes of the report:",
        "",
        *[f"- {n}" for n in rec["notes"] if "server" in n or "failed" in n or "measured again" in n],
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", type=int, default=203, help="emulator host index (200-254: ad hoc)")
    ap.add_argument("--crash-after", default="8")
    ap.add_argument("--steps", default="2-3")
    ap.add_argument("--concurrency", default="1,4")
    ap.add_argument(
        "--render", action="store_true", help="sweep nothing: rebuild the page from bench/lost_level/run.json"
    )
    ap.add_argument("--out", default=str(ROOT / "bench" / "lost_level.md"))
    args = ap.parse_args()
    data = kept(DATA / "run.json", args.render, lambda: measure(args))
    if data is None:
        raise SystemExit(f"{DATA / 'run.json'}: no kept run (run the script without --render)")
    text = render(data)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
