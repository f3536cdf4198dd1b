"""A test run's cleanup removes what that run made (and runs nested in it) and leaves the user's
emulator hosts alone.

`make demo` leaves hosts emu1 and emu2 (indexes 1 and 2, the demo range 1-49) running and tells the user to keep
using them; `make test` then runs its trap, `scripts/cleanup_hosts.sh --run <its run id>`. Here: a
host in the demo range made as `make hosts` makes it (no SGLANG_TUNE_RUN: run "user"), a host and
an emulator process made under a run id of this test's own, then that run's cleanup. Only the
run's container, namespace, veth and process go; the demo-range host keeps all three. `--all`
(what `make clean` offers besides hosts-absent) is not run here: it would remove other runs' hosts.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import uuid

import pytest
import yaml
from emulator_proc import emulator_cmd, free_port
from roles_testlib import ROOT, VENV_BIN, ansible_env, remove_container

KEEP, KEEP_INDEX = "demo-keep-49", 49  # the demo range: what `make demo` makes
GONE, GONE_INDEX = "run-gone-249", 249  # the ad-hoc range, made under the run being cleaned up


def _inventory(path, hosts):
    inv = yaml.safe_load((ROOT / "inventory" / "emulator.yml").read_text())
    inv["all"]["children"]["emulator_hosts"]["hosts"] = {h: {"emulator_host_index": i} for h, i in hosts.items()}
    path.write_text(yaml.safe_dump(inv))
    return path


def _hosts(inv, state, run):
    env = ansible_env()
    env.pop("SGLANG_TUNE_RUN", None)
    if run:
        env["SGLANG_TUNE_RUN"] = run
    cmd = [str(VENV_BIN / "ansible-playbook"), "-i", str(inv), "playbooks/emulator_hosts.yml"]
    cmd += ["-e", f"emulator_hosts_state={state}"]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _exists(name, index):
    container = subprocess.run(["podman", "container", "exists", name]).returncode == 0
    netns = f"sgt-{name}" in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    veth = subprocess.run(["ip", "link", "show", f"sgtv{index}"], capture_output=True).returncode == 0
    return {"container": container, "netns": netns, "veth": veth}


@pytest.mark.systemd
@pytest.mark.cost(20)  # seconds, measured: the systemd stage starts its longest files first (tests/conftest.py)
def test_run_cleanup_keeps_the_demo_range_host(need_podman, tmp_path) -> None:
    keep_inv = _inventory(tmp_path / "keep.yml", {KEEP: KEEP_INDEX})
    gone_inv = _inventory(tmp_path / "gone.yml", {GONE: GONE_INDEX})
    # A run of this test's own, nested in the suite's (SGLANG_TUNE_RUN.cleanup-check-*): an
    # interrupted test's host and emulator go with the suite's trap (`--run` takes nested runs);
    # the host it makes is under a run nested in that one again.
    outer = os.environ.get("SGLANG_TUNE_RUN", "")
    run = f"cleanup-check-{uuid.uuid4().hex[:8]}"
    run = f"{outer}.{run}" if outer and len(outer) + len(run) <= 58 else run
    for name, index, inv, made_by in ((KEEP, KEEP_INDEX, keep_inv, None), (GONE, GONE_INDEX, gone_inv, run)):
        if _exists(name, index)["container"]:
            # this test's own host names: a killed run of it left them (the demo-range one is labelled
            # as the user's and outlives every trap)
            _hosts(inv, "absent", run=made_by)
            remove_container(name)
        if any(_exists(name, index).values()):
            pytest.fail(f"index {index} is in use on this machine by another host; this test will not touch it")
    # the host labelled as the user's carries no run id: listed for the suite's trap (scripts/test.sh
    # SGLANG_TUNE_USER_HOSTS), which removes it should this test be killed before its own clean-up
    listed = os.environ.get("SGLANG_TUNE_USER_HOSTS")
    if listed:
        with open(listed, "a") as f:
            f.write(f"{KEEP} {KEEP_INDEX}\n")
    emulator = None
    gone = None
    try:
        made = _hosts(keep_inv, "present", run=None)
        assert made.returncode == 0, made.stdout[-3000:]
        made = _hosts(gone_inv, "present", run=f"{run}.gone")
        assert made.returncode == 0, made.stdout[-3000:]
        labels = subprocess.run(
            ["podman", "inspect", KEEP, "--format", "{{json .Config.Labels}}"], capture_output=True, text=True
        )
        assert json.loads(labels.stdout)["io.sglang-tune.run"] == "user"
        emulator = subprocess.Popen(
            emulator_cmd("--emulator-startup-s", "60", port=free_port(), model="/m", served=None),
            cwd=ROOT,
            env={**os.environ, "SGLANG_TUNE_RUN": run},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

        # as if a run were killed between making the namespace and labelling it: it goes with its container
        subprocess.run(["ip", "-n", f"sgt-{GONE}", "link", "set", "dev", "lo", "alias", ""], check=True)

        cleaned = subprocess.run(
            [str(ROOT / "scripts" / "cleanup_hosts.sh"), "--run", run], capture_output=True, text=True, timeout=120
        )
        assert cleaned.returncode == 0, cleaned.stderr
        assert f"removed container {GONE}" in cleaned.stdout and f"removed netns sgt-{GONE}" in cleaned.stdout
        assert f"removed emulator process {emulator.pid}" in cleaned.stdout
        assert KEEP not in cleaned.stdout and f"sgtv{KEEP_INDEX}" not in cleaned.stdout
        assert _exists(GONE, GONE_INDEX) == {"container": False, "netns": False, "veth": False}
        assert _exists(KEEP, KEEP_INDEX) == {"container": True, "netns": True, "veth": True}
        assert emulator.wait(timeout=30) is not None
        state = subprocess.run(
            ["podman", "exec", KEEP, "systemctl", "is-system-running"], capture_output=True, text=True
        )
        assert state.stdout.strip() in ("running", "degraded")
    finally:
        # each step on its own: one that raises (a play past its timeout) leaves the others to run
        with contextlib.ExitStack() as stack:
            stack.callback(remove_container, KEEP)
            stack.callback(remove_container, GONE)

            def keep_absent() -> None:
                nonlocal gone
                gone = _hosts(keep_inv, "absent", run=None)

            stack.callback(keep_absent)
            stack.callback(_hosts, gone_inv, "absent", run=f"{run}.gone")
            if emulator is not None and emulator.poll() is None:
                stack.callback(emulator.kill)
    assert gone is not None and gone.returncode == 0, gone.stdout[-3000:] if gone else "no absent play"
    assert _exists(KEEP, KEEP_INDEX) == {"container": False, "netns": False, "veth": False}


def test_run_cleanup_stops_the_runs_ansible_first_and_never_its_own_callers(tmp_path) -> None:
    """ansible-runner starts ansible-playbook in a session of its own: a test stopped with its
    process group left its play running, which started an emulator after the trap's clean-up had
    looked (2026-12-06). `--run` stops the run's (and nested runs') Ansible processes first, but
    never a process it runs under, nor another run's."""
    fake = tmp_path / "ansible-playbook"  # a play's command line, as the scan sees it
    fake.write_text("#!/bin/bash\nwhile true; do sleep 0.2; done\n")
    fake.chmod(0o755)
    # the runs nested in the suite's (when there is one), so the suite's trap stops these loops too
    # should this test die before its `finally`; the "other" run is not nested in the one cleaned
    outer = os.environ.get("SGLANG_TUNE_RUN", "")
    leaf = f"cleanup-ansible-{uuid.uuid4().hex[:8]}"
    run = f"{outer}.{leaf}" if outer else leaf
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_TUNE_RUN"}
    nested = subprocess.Popen([str(fake)], env={**env, "SGLANG_TUNE_RUN": f"{run}.deploy"}, start_new_session=True)
    other_run = f"{outer}.x{leaf}" if outer else f"x{leaf}"
    other = subprocess.Popen([str(fake)], env={**env, "SGLANG_TUNE_RUN": other_run}, start_new_session=True)
    # the clean-up run from a caller of the same run (as scripts/test.sh's trap is)
    caller = tmp_path / "caller" / "ansible-playbook"
    caller.parent.mkdir()
    caller.write_text(f'#!/bin/bash\n"{ROOT}/scripts/cleanup_hosts.sh" --run "$1"\necho "caller alive"\n')
    caller.chmod(0o755)
    try:
        out = subprocess.run(
            [str(caller), run], env={**env, "SGLANG_TUNE_RUN": run}, capture_output=True, text=True, timeout=60
        )
        assert f"removed ansible process {nested.pid}" in out.stdout and "caller alive" in out.stdout, out
        assert nested.wait(timeout=10) is not None
        assert other.poll() is None and str(other.pid) not in out.stdout
    finally:
        for p in (nested, other):
            if p.poll() is None:
                p.kill()


def test_a_removal_that_fails_is_named_and_fails_the_clean_up(tmp_path) -> None:
    """The trap ran the clean-up with `|| true` and the script always exited 0: a run that left a
    container behind passed. A removal that fails (here a podman stand-in whose `rm` fails and whose
    container stays) is named on stderr and exits 1; one listed by --also goes whatever its label."""
    run = f"cleanup-fail-{uuid.uuid4().hex[:8]}"
    name = f"sgt-stuck-{uuid.uuid4().hex[:6]}"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "podman.log"
    (bin_dir / "podman").write_text(
        "#!/bin/bash\n"
        f'echo "$*" >> "{log}"\n'
        'case "$1 $2" in\n'
        f'  "ps -a") echo "id1 {name} {run}" ;;\n'
        '  "container exists") exit 0 ;;\n'
        '  "rm -f") exit 1 ;;\n'
        "esac\n"
    )
    (bin_dir / "podman").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    env.pop("SGLANG_TUNE_RUN", None)
    out = subprocess.run(
        [str(ROOT / "scripts" / "cleanup_hosts.sh"), "--run", run], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 1 and f"could not remove container {name}" in out.stderr, out
    listed = tmp_path / "user-hosts"
    listed.write_text("demo-like-1 4093\n")
    out = subprocess.run(
        [str(ROOT / "scripts" / "cleanup_hosts.sh"), "--run", run, "--also", str(listed), "--dry-run"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "would remove container demo-like-1" in out.stdout, out
    assert "rm -f -t 2 demo-like-1" not in log.read_text()  # a dry run removes nothing
