"""The CLI's contract: bad input exits 2 naming the flag, before any host is touched."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tuner_testlib import FIXTURES, ROOT

from tuner import cli
from tuner.spec.sweepspec import SweepSpec

INV = str(FIXTURES / "local_inventory.yml")


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--steps", "5-1"], "--steps"),
        (["--steps", "0-x"], "--steps"),
        (["--steps", ""], "--steps"),
        (["--concurrency", "0"], "--concurrency"),
        (["--concurrency", ""], "--concurrency"),
        (["--concurrency", "1,x"], "--concurrency"),
        (["--topk", "0"], "--topk"),
        (["--algorithm", "MEDUSA"], "--algorithm"),
        (["--repeats", "0"], "--repeats"),
        (["--input-len", "-5"], "--input-len"),
        (["--output-len", "many"], "--output-len"),
        (["--temperature", "hot"], "--temperature"),
        (["--requests-per-level", "0"], "--requests-per-level"),
        (["--endpoint", "grpc"], "--endpoint"),
        (["--target-concurrency", "8"], "--target-concurrency"),
        (["-e", "spec_steps=2"], "-e/--extra-vars"),
        # it turned every static depth into SGLang's adaptive mode, labelled as the depth
        (["-e", "spec_schedule=default"], "-e/--extra-vars"),
        (["-e", "spec_stepz=2"], "-e/--extra-vars"),  # the play reads no such variable
        # the key would land in sweep.json and the runner's files: it comes from SGLANG_API_KEY
        (["-e", "sglang_server_api_key=sk-live-1234"], "-e/--extra-vars"),
        (["-e", '{"sglang_server_api_key": "sk-live-1234"}'], "-e/--extra-vars"),
        # every secret the role has as a variable, from the one list (sglang_secrets.SECRET_FIELDS)
        (["-e", "sglang_server_admin_api_key=sk-admin-1234"], "-e/--extra-vars"),
        (["-e", '{"sglang_server_ssl_keyfile_password": "pw-1234"}'], "-e/--extra-vars"),
        (["--confirm", "-1"], "--confirm"),
        (["-e", "@/no/such/vars.yml"], "-e/--extra-vars"),
        (["--inventory", "/no/such/inventory.yml"], "--inventory"),
        (["--playbook", "/no/such/play.yml"], "--playbook"),
        (["--limit", "nothing-matches-this"], "--limit"),
        (["--deploy-timeout", "0"], "--deploy-timeout"),
        (["--top-p", "1.5"], "--top-p"),  # a bound with no lower one crashed formatting its message
        (["--steps", "1-100000000"], "--steps"),  # expanding it hung
        # the role would refuse it at every deploy, after sweep.json kept the key
        (["-e", '{"sglang_server_extra_flags": {"api-key": "sk-live-1234"}}'], "-e/--extra-vars"),
        (["-e", '{"sglang_server_extra_flags": {"api": "sk-live-1234"}}'], "-e/--extra-vars"),
        # a secret in the environment the role keeps in a root-only file on the host
        (["-e", '{"sglang_server_environment": {"HF_TOKEN": "hf_live_1234"}}'], "-e/--extra-vars"),
        # YAML's unquoted date is no JSON value: sweep.json could not be written, after the lock
        (["-e", '{"built": 2024-06-01}'], "-e/--extra-vars"),
        # the baseline is written after its deploy and capture: a path under a file is refused first
        (["--verify-baseline", "/proc/version/base.json"], "--verify-baseline"),
    ],
)
def test_bad_sweep_input_exits_2_naming_the_flag(args, flag, tmp_path, capsys, no_hosts):
    argv = ["sweep", "--out", str(tmp_path / "out"), "--inventory", INV, *args]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert flag in err, err
    assert not (tmp_path / "out").exists()  # nothing written either


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--topk", "17"], "--topk"),
        (["--topk", "4"], "--draft-tokens"),  # a tree needs its draft tokens
        (["--topk", "4", "--draft-tokens", "100"], "--draft-tokens"),
        (["--algorithm", "EAGLE3"], "--algorithm"),  # no draft model in the inventory
        (["--algorithm", "DFLASH", "--steps", "2-3"], "--steps"),
        (["-e", "sglang_server_spec_max_topk=0"], "-e/--extra-vars"),  # no flag sets the play's limit
    ],
)
def test_a_plan_with_nothing_to_run_names_the_flag_the_play_refused(args, flag, tmp_path, capsys, no_hosts):
    """The play's own rules (sglang_spec.spec_settings) leave no configuration: the error names the
    flag whose value they refused, not --steps for every one."""
    assert cli.main(["sweep", "--out", str(tmp_path / "out"), "--inventory", INV, *args]) == 2
    err = capsys.readouterr().err
    assert f"error: {flag}: no configuration SGLang can run" in err, err


def test_a_sweep_json_bench_would_overwrite_or_sweep_cannot_read_is_named(tmp_path, capsys, no_hosts):
    """A sweep stopped before its first record has a sweep.json and no records: bench must not
    replace it (the sweep could no longer be resumed); a broken one under sweep --out is named by
    that flag."""
    out = tmp_path / "stopped"
    out.mkdir()
    kept = '{"version": 2, "tool": "x", "params": {}}'
    (out / "sweep.json").write_text(kept)
    assert cli.main(["bench", "--url", "http://127.0.0.1:1", "--out", str(out), "--concurrency", "1"]) == 2
    assert "--out" in capsys.readouterr().err
    assert (out / "sweep.json").read_text() == kept
    (out / "sweep.json").write_text('{"version": 2, "params":')
    assert cli.main(["sweep", "--out", str(out), "--inventory", INV, "--resume"]) == 2
    assert "--out: " in capsys.readouterr().err


def test_verify_capture_refuses_a_baseline_path_it_could_not_write_before_sending(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    # nothing listens on the URL: the path is refused before any request (else a connection error)
    rc = cli.main(["verify", "--url", "http://127.0.0.1:1", "--baseline", str(blocker / "b.json"), "--capture"])
    assert rc == 2
    assert "--baseline" in capsys.readouterr().err


def test_a_corrupt_sweep_json_is_named_not_a_traceback(tmp_path, capsys):
    (tmp_path / "records.jsonl").write_text("")
    (tmp_path / "sweep.json").write_text("{not json")
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "sweep.json is not a sweep.json this tool wrote" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("concurrency", "abc"),  # crashed the report sorting levels: '>' between str and int
        ("concurrency", [1, None]),
        ("steps", [1, "x"]),
        ("topk", "1"),
        ("repeats", "2"),
        ("ignore_eos", 1),
        ("extra_vars", [1]),
    ],
)
def test_sweep_json_params_of_the_wrong_type_are_named_not_a_traceback(key, value, tmp_path, capsys, no_hosts):
    from tuner.spec.sweepspec import SweepSpec

    params = SweepSpec().to_json()
    params[key] = value
    (tmp_path / "records.jsonl").write_text("")
    (tmp_path / "sweep.json").write_text(json.dumps({"version": 1, "params": params}))
    for argv in (["report", str(tmp_path)], ["sweep", "--out", str(tmp_path), "--inventory", INV, "--resume"]):
        assert cli.main(argv) == 2
        err = capsys.readouterr().err
        assert "its params are not a sweep's" in err and f"{key} is" in err and "Traceback" not in err, err
    params[key] = SweepSpec().to_json()[key]  # the same file with the tool's own value reads
    (tmp_path / "sweep.json").write_text(json.dumps({"version": 1, "params": params}))
    assert cli.main(["report", str(tmp_path)]) == 1  # it reads: nothing measured, no recommendation
    assert "its params are not a sweep's" not in capsys.readouterr().err


def test_an_out_that_cannot_be_made_is_an_error_naming_it_not_a_traceback(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc = cli.main(["bench", "--url", "http://127.0.0.1:1", "--out", str(blocker / "out"), "--concurrency", "1"])
    err = capsys.readouterr().err
    assert rc in (1, 2) and str(blocker) in err and "Traceback" not in err, err


def test_out_is_a_file(tmp_path, capsys, no_hosts):
    f = tmp_path / "file"
    f.write_text("x")
    assert cli.main(["sweep", "--out", str(f), "--inventory", INV]) == 2
    assert "--out" in capsys.readouterr().err


def test_bench_bad_url_and_dirs(tmp_path, capsys):
    assert cli.main(["bench", "--url", "localhost:30000"]) == 2
    assert "--url" in capsys.readouterr().err
    # a port that is no port is bad input naming the flag (it reached the server-info probe and
    # exited 1 as if the server were down)
    for url in ("http://127.0.0.1:abc", "http://127.0.0.1:70000"):
        assert cli.main(["bench", "--url", url, "--concurrency", "1"]) == 2, url
        assert "--url" in capsys.readouterr().err
    # an empty --dataset (an unset "$DS") is an error, not the synthetic prompts
    assert cli.main(["bench", "--url", "http://127.0.0.1:1", "--dataset", "", "--concurrency", "1"]) == 2
    assert "--dataset" in capsys.readouterr().err
    assert cli.main(["plot", str(tmp_path)]) == 2
    assert "DIR" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path / "nope")]) == 2


def test_records_without_their_sweep_json_are_refused(tmp_path, capsys):
    """`report DIR` fell back to the default workload (256 / 256 tokens, C=1..64) for records
    measured with another, and described that one; `sweep --resume` already refuses the directory."""
    (tmp_path / "records.jsonl").write_text("")
    for cmd in ("report", "plot"):
        assert cli.main([cmd, str(tmp_path)]) == 2
        assert "holds no sweep.json" in capsys.readouterr().err


def test_missing_out_is_argparse_exit_2():
    p = subprocess.run([sys.executable, "-m", "tuner", "sweep"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2 and "--out" in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "tuner", "sweep", "--out", "/tmp/x", "--steps", "5-1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2 and "--steps" in p.stderr
    p = subprocess.run([sys.executable, "-m", "tuner"], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 2


@pytest.mark.parametrize(
    ("flags", "words", "verb"),
    [
        ([], "only what the model says could win a level", "may deploy"),
        (["--no-early-stop"], "every configuration in the model's order", "deploy"),
        (
            ["--temperature", "0,0.7"],
            "every configuration in the model's order but a depth whose KV pool",
            "may deploy",
        ),
    ],
)
def test_dry_run_says_what_the_default_search_will_deploy(tmp_path, capsys, no_hosts, flags, words, verb):
    """The model-guided search is the default; with --no-early-stop or several temperatures it
    skips nothing, and the dry run says so instead of promising skips."""
    rc = cli.main(["sweep", "--out", str(tmp_path / "o"), "--inventory", INV, "--steps", "1-5", "--dry-run", *flags])
    out = capsys.readouterr().out
    assert rc == 0 and f"search: model: k2-t1, k4-t1 first, then {words}" in out, out
    assert f"\n{verb} k1-t1: " in out
    assert "schedule: after the static depths, where the server's SGLang has per-batch-size adaptive" in out


@pytest.mark.parametrize(
    ("flags", "words", "verb"),
    [
        ([], "every configuration in order but the depths above one that could not start", "may deploy"),
        (["--no-early-stop", "--no-schedule"], "every configuration in order (--no-early-stop)", "deploy"),
    ],
)
def test_dry_run_says_what_the_grid_will_deploy(tmp_path, capsys, no_hosts, flags, words, verb):
    """The grid's early stop skips depths past a KV-capacity failure and past the peak: its dry
    run promised every one; and the schedule phase, on by default, was not named at all."""
    argv = ["sweep", "--out", str(tmp_path / "o"), "--inventory", INV, "--steps", "1-3", "--search", "grid"]
    rc = cli.main([*argv, "--dry-run", *flags])
    out = capsys.readouterr().out
    assert rc == 0 and f"search: grid: {words}" in out, out
    assert f"\n{verb} k1-t1: " in out and f"\n{verb} k3-t1: " in out
    assert ("schedule: off (--no-schedule)" in out) == ("--no-schedule" in flags), out


def test_dry_run_lists_the_plan_without_deploying(tmp_path, capsys, no_hosts):
    rc = cli.main(
        [
            "sweep",
            "--out",
            str(tmp_path / "o"),
            "--inventory",
            INV,
            "--steps",
            "0-2",
            "--topk",
            "1,2",
            "--draft-tokens",
            "3",
            "--limit",
            "local-a",
            "--search",
            "grid",
            "--dry-run",
            "-e",
            "sglang_server_emulator_startup_s=1",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "hosts: local-a" in out
    # draft 3 at steps 2 is the chain itself (steps + 1): k2-t1, planned once
    assert 'deploy k2-t1: {"sglang_server_emulator_startup_s": "1", "spec_steps": 2' in out
    assert "skip k1-t1-d3" in out and "deploy k0" in out and "deploy k1-t2-d3" in out
    assert "C=64 x 128..1024 requests" in out and "until +-2%" in out
    assert "confirm: after the static depths, at most 2 extra start(s)" in out  # on by default
    assert not (tmp_path / "o").exists()


def test_an_inventory_without_the_servers_group_is_refused_for_the_default_play(tmp_path, capsys, no_hosts):
    """playbooks/deploy.yml targets group sglang_servers: with none, every host was the sweep's and
    each deployment "succeeded" with nothing published. A play of the user's own gets every host."""
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    gpu1:\n      ansible_connection: local\n")
    argv = ["sweep", "--inventory", str(inv), "--steps", "1", "--dry-run"]
    assert cli.main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "--inventory" in err and "has no group sglang_servers" in err and "--playbook" in err
    # the project's play reached through a symlink is the project's play (it was taken for one of
    # the user's own, and the sweep got every host)
    from tuner.run.deploy import project_root

    link = tmp_path / "deploy-link.yml"
    link.symlink_to(project_root() / "playbooks" / "deploy.yml")
    assert cli.main([*argv, "--out", str(tmp_path / "o3"), "--playbook", str(link)]) == 2
    assert "has no group sglang_servers" in capsys.readouterr().err
    # ... and so is the root's deploy.yml, which imports it (README's `ansible-playbook deploy.yml`)
    assert cli.main([*argv, "--out", str(tmp_path / "o4"), "--playbook", str(project_root() / "deploy.yml")]) == 2
    assert "has no group sglang_servers" in capsys.readouterr().err
    own = tmp_path / "own.yml"
    own.write_text("- hosts: all\n  gather_facts: false\n  tasks: []\n")
    assert cli.main([*argv, "--out", str(tmp_path / "o2"), "--playbook", str(own)]) == 0
    assert "hosts: gpu1" in capsys.readouterr().out


def test_a_bad_verify_baseline_leaves_nothing_behind(tmp_path, capsys, no_hosts):
    """Checked before sweep.json is written: the corrected retry must not be refused as a resume."""
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    out = tmp_path / "out"
    assert cli.main(["sweep", "--out", str(out), "--inventory", INV, "--verify-baseline", str(bad)]) == 2
    assert "--verify-baseline" in capsys.readouterr().err and not out.exists()
    assert cli.main(["sweep", "--out", str(out), "--inventory", INV, "--verify-baseline", str(bad), "--dry-run"]) == 2


def test_a_baseline_of_other_prompts_is_refused_before_anything(tmp_path, capsys, no_hosts):
    """A baseline captured for the shipped prompts, given to a sweep of another dataset: it was read,
    "reused", and every configuration failed "does not fit" after its deploy and levels."""
    from tuner.spec.workload import load_dataset
    from tuner.verify import baseline as baseline_mod
    from tuner.verify.prompts import prompt_set, settings

    ps = prompt_set(None, settings())
    got = {
        part: [{"id": p["id"], "text": "x", "output_ids": [1]} for p in rows]
        for part, rows in (("short", ps.short), ("long", ps.long))
    }
    doc = baseline_mod.make({"model": "m", "server_version": "0.5.9"}, ps, got, "test")
    kept = tmp_path / "base.json"
    baseline_mod.write(kept, doc)
    assert baseline_mod.read(kept)  # a whole baseline file ...
    mine = tmp_path / "mine.jsonl"
    mine.write_text("".join(json.dumps({"prompt": f"question {i}"}) + "\n" for i in range(40)))
    assert load_dataset(str(mine)).rows == 40
    out = tmp_path / "out"
    argv = ["sweep", "--out", str(out), "--inventory", INV, "--verify-baseline", str(kept), "--dataset", str(mine)]
    assert cli.main([*argv, "--dry-run"]) == 2  # ... of other prompts
    err = capsys.readouterr().err
    assert (
        "--verify-baseline" in err and "captured for other prompts than this sweep sends" in err and "prompt set" in err
    )
    assert not out.exists()
    assert cli.main(["sweep", "--out", str(out), "--inventory", INV, "--verify-baseline", str(kept), "--dry-run"]) == 0


def test_a_second_tuner_on_the_same_out_is_refused(tmp_path, capsys, no_hosts):
    """Two sweeps on one --out wrote their records among each other's (each labelled the other's
    server): the directory is held by the run that has it, with or without --resume."""
    from tuner.data.store import Store

    out = tmp_path / "out"
    first = Store(out)
    first.lock()
    for extra in ([], ["--resume"]):
        assert cli.main(["sweep", "--out", str(out), "--inventory", INV, "--steps", "1", *extra]) == 2
        err = capsys.readouterr().err
        assert f"{out} is in use by another tuner (pid {os.getpid()})" in err, err
    assert cli.main(["bench", "--url", "http://127.0.0.1:1", "--out", str(out), "--concurrency", "1"]) == 2
    assert not (out / "sweep.json").exists()
    del first  # the lock goes with its holder
    import gc

    gc.collect()
    assert Store(out).lock() is None


def test_report_without_a_recommendation_exits_1(tmp_path, capsys):
    """As `sweep` and `bench` do (docs/tuner.md: 1 when nothing was measured or none meets --slo)."""
    from tuner.data.records import DeployRecord
    from tuner.data.store import Store
    from tuner.spec.configs import SpecConfig
    from tuner.spec.sweepspec import SweepSpec

    st = Store(tmp_path)
    st.write_spec(SweepSpec(), "test")
    st.append(DeployRecord(config=SpecConfig(2), host="h", status="failed", reason="it did not start"))
    assert cli.main(["report", str(tmp_path)]) == 1
    assert "no recommendation" in capsys.readouterr().out


def test_resume_refuses_machines_whose_inventory_changed(tmp_path, capsys, no_hosts):
    """The inventory's path was the sweep's identity, not what it holds: a resumed sweep measured
    another emulated machine under the same host and mixed it with the first one's levels."""
    from tuner.data.store import Store
    from tuner.run.deploy import project_root
    from tuner.run.inventory import read_inventory

    out = tmp_path / "out"
    argv = ["sweep", "--out", str(out), "--inventory", INV, "--steps", "1"]
    spec = SweepSpec.from_cli_args(cli.build_parser().parse_args(argv), project_root())
    now = cli.host_digests(read_inventory(Path(INV), None, project_root()))
    host = sorted(now)[0]
    Store(out).write_spec(spec, "test", {**now, host: "0" * 16})
    assert cli.main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert f"was swept on other machines: the inventory variables of {host} changed" in err, err


@pytest.mark.parametrize(
    ("host_vars", "refused"),
    [
        ({"ansible_host": "10.1.2.3", "sglang_server_host": "127.0.0.1"}, True),
        ({"ansible_host": "gpu1.example", "sglang_server_host": "localhost", "ansible_connection": "ssh"}, True),
        ({"ansible_host": "10.1.2.3", "sglang_server_host": "0.0.0.0"}, False),
        ({"ansible_connection": "local", "sglang_server_host": "127.0.0.1"}, False),
        ({"ansible_connection": "ansible.builtin.local", "sglang_server_host": "127.0.0.1"}, False),
        ({"ansible_host": "127.0.0.1", "sglang_server_host": "127.0.0.1"}, False),
        (
            {"ansible_host": "10.1.2.3", "sglang_server_host": "127.0.0.1", "sglang_server_client_url": "http://t:1"},
            False,
        ),
        ({"ansible_host": "10.1.2.3", "sglang_server_host": "::"}, True),
        ({"ansible_connection": "local", "ansible_host": "127.0.0.1", "sglang_server_host": "::"}, True),
        ({"ansible_host": "fd00::5", "sglang_server_host": "::"}, False),
        ({"ansible_host": "10.1.2.3", "sglang_server_host": "::", "sglang_server_client_host": "fd00::5"}, False),
    ],
    ids=[
        "loopback-over-ssh",
        "localhost-over-ssh",
        "all-interfaces",
        "local",
        "local-fqcn",
        "ssh-to-itself",
        "own-client-url",
        "ipv6-only-at-ipv4",
        "ipv6-only-at-ipv4-loopback",
        "ipv6-only-at-ipv6",
        "ipv6-only-own-client-host",
    ],
)
def test_a_server_bound_to_a_remote_hosts_loopback_is_refused(tmp_path, capsys, no_hosts, host_vars, refused):
    """A server on its host's loopback answers the gate (which runs on the host) but not the tuner's
    client on this machine: every configuration deployed and then failed its warm-up with "Cannot
    connect". So does one on `::` (IPv6 only) reached at an IPv4 address. Refused before any host
    changes, unless the controller is the host or a URL is given."""
    inv = tmp_path / "inv.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"hosts": {"gpu1": host_vars}}}}}))
    rc = cli.main(["sweep", "--inventory", str(inv), "--steps", "1", "--dry-run", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    if refused:
        assert rc == 2 and "--inventory" in err, err
        assert f"gpu1 binds its server to {host_vars['sglang_server_host']} (sglang_server_host)" in err, err
        assert "sglang_server_client_url" in err
    else:
        assert rc == 0, err


@pytest.mark.parametrize(
    ("host_vars", "extra", "refused"),
    [
        ({"ansible_host": "10.1.2.3"}, "sglang_server_host=127.0.0.1", True),
        ({"ansible_host": "10.1.2.3", "sglang_server_host": "127.0.0.1"}, "sglang_server_host=0.0.0.0", False),
        (
            {"ansible_host": "10.1.2.3", "sglang_server_host": "127.0.0.1"},
            "sglang_server_client_url=http://127.0.0.1:9000",
            False,
        ),
    ],
    ids=["bound-by-extra-var", "rebound-by-extra-var", "url-by-extra-var"],
)
def test_the_bind_check_reads_the_sweeps_extra_vars(tmp_path, capsys, no_hosts, host_vars, extra, refused):
    """`-e` wins over the inventory in the play, and so in the check."""
    inv = tmp_path / "inv.yml"
    inv.write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"hosts": {"gpu1": host_vars}}}}}))
    argv = ["sweep", "--inventory", str(inv), "--steps", "1", "--dry-run", "-e", extra, "--out", str(tmp_path / "o")]
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert (rc == 2 and "gpu1 binds its server to 127.0.0.1" in err) if refused else rc == 0, (rc, err)


def test_the_bind_check_reads_the_host_vars_beside_the_playbook(tmp_path, capsys, no_hosts):
    """A client URL (an SSH tunnel's) in host_vars/ beside --playbook is the play's: the check read
    the inventory alone and refused the sweep."""
    inv = tmp_path / "inv.yml"
    host = {"ansible_host": "10.1.2.3", "sglang_server_host": "127.0.0.1"}
    inv.write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"hosts": {"gpu1": host}}}}}))
    (tmp_path / "pb" / "host_vars").mkdir(parents=True)
    (tmp_path / "pb" / "host_vars" / "gpu1.yml").write_text("sglang_server_client_url: http://127.0.0.1:40123\n")
    (tmp_path / "pb" / "my.yml").write_text("- hosts: sglang_servers\n  gather_facts: false\n  tasks: []\n")
    argv = ["sweep", "--inventory", str(inv), "--playbook", str(tmp_path / "pb" / "my.yml"), "--steps", "1"]
    rc = cli.main([*argv, "--dry-run", "--out", str(tmp_path / "o")])
    assert rc == 0, capsys.readouterr().err


def test_a_sweep_stored_with_a_relative_profile_resumes_from_its_directory(tmp_path, capsys, no_hosts, monkeypatch):
    """sweep.json written before the tuner made controller paths absolute holds the path as given:
    the same command from the same directory is the same sweep."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "prof.yaml").write_text("{}\n")
    argv = ["sweep", "--inventory", INV, "--steps", "1", "--out", "o", "-e", "sglang_server_emulator_profile=prof.yaml"]
    from tuner.data.store import Store
    from tuner.spec.sweepspec import SweepSpec

    spec = SweepSpec.from_cli_args(cli.build_parser().parse_args(argv), ROOT)
    params = spec.to_json()
    params["extra_vars"] = {**params["extra_vars"], "sglang_server_emulator_profile": "prof.yaml"}  # as stored then
    (tmp_path / "o").mkdir()
    Store(tmp_path / "o").write_sweep({"tool": "t", "params": params})
    assert cli.main([*argv, "--resume", "--dry-run"]) == 0, capsys.readouterr().err


def test_the_dry_run_names_no_schedule_for_an_algorithm_sglang_cannot_adapt(tmp_path, capsys, no_hosts):
    argv = ["sweep", "--out", str(tmp_path / "o2"), "--inventory", INV, "--steps", "1-2", "--algorithm", "NGRAM"]
    assert cli.main([*argv, "--dry-run"]) == 0
    assert "schedule: off (SGLang runs adaptive speculation only with EAGLE, EAGLE3, NEXTN)" in capsys.readouterr().out


def test_the_plan_reads_the_draft_model_path_and_limits_the_inventory_gives(tmp_path, capsys, no_hosts):
    """An EAGLE3 sweep whose draft model path is set in the inventory (where a draft model usually
    lives) is planned, as the play accepts it; the inventory's spec limits hold the plan too, -e
    overriding them; a path only one host has is no path for the plan (the other host's play refuses)."""
    inv = tmp_path / "inv.yml"

    def write(a_vars: str, b_vars: str = "") -> None:
        inv.write_text(
            "all:\n  children:\n    sglang_servers:\n      hosts:\n"
            f"        h-a: {{{a_vars}}}\n        h-b: {{{b_vars or a_vars}}}\n"
            "      vars:\n        ansible_connection: local\n"
        )

    def dry(*flags: str) -> tuple[int, str]:
        rc = cli.main(["sweep", "--out", str(tmp_path / "o"), "--inventory", str(inv), "--dry-run", *flags])
        got = capsys.readouterr()
        return rc, got.out + got.err

    write("sglang_server_spec_draft_model_path: /models/eagle3-draft, sglang_server_spec_max_steps: 2")
    rc, out = dry("--steps", "1-3", "--algorithm", "EAGLE3", "--search", "grid")
    assert rc == 0, out
    assert "deploy k1-t1-eagle3" in out and "deploy k2-t1-eagle3" in out and "skip k3-t1-eagle3" in out, out
    rc, out = dry("--steps", "1-3", "--algorithm", "EAGLE3", "--search", "grid", "-e", "sglang_server_spec_max_steps=3")
    assert rc == 0 and "deploy k3-t1-eagle3" in out, out
    write("sglang_server_spec_draft_model_path: /models/eagle3-draft", "sglang_server_port: 30000")
    rc, out = dry("--steps", "1-2", "--algorithm", "EAGLE3")
    assert rc == 2 and "needs a draft model" in out, out


@pytest.mark.parametrize(
    ("a", "b", "want"),
    [
        # a's the play's to render; b's the role's default
        ({"sglang_server_spec_max_steps": "{{ 8 if big else 4 }}"}, {}, {"sglang_server_spec_max_steps": 16}),
        ({"sglang_server_spec_max_steps": "{{ 8 if big else 4 }}"}, {"sglang_server_spec_max_steps": "{{ x }}"}, {}),
        (
            {"sglang_server_spec_max_steps": "8"},
            {"sglang_server_spec_max_steps": "3"},
            {"sglang_server_spec_max_steps": 3},
        ),
        (
            {"sglang_server_spec_max_steps": 3},
            {"sglang_server_spec_max_steps": "{{ lim }}"},
            {"sglang_server_spec_max_steps": 3},
        ),
        ({"sglang_server_spec_max_steps": 20}, {}, {"sglang_server_spec_max_steps": 16}),  # b: the role's default
        ({"sglang_server_spec_max_topk": "x"}, {}, {"sglang_server_spec_max_topk": "x"}),  # refused in the play's words
        ({"sglang_server_spec_draft_model_path": "/d"}, {}, {}),  # b has none: its play refuses EAGLE3
        (
            {"sglang_server_spec_draft_model_path": "/d"},
            {"sglang_server_spec_draft_model_path": "{{ d }}"},
            {"sglang_server_spec_draft_model_path": "/d"},
        ),
    ],
)
def test_the_plan_holds_what_every_hosts_play_accepts(a, b, want):
    """The limit every host's play holds a configuration to: the least of theirs (a host without
    one has the role's default), a templated value left to the play; a draft path only where every
    host has one."""
    from tuner.run.inventory import Inventory
    from tuner.spec.configs import PLAN_LIMITS, PLAN_PATHS

    inv = Inventory(hosts=["a", "b"], hostvars={"a": a, "b": b}, groups={}, has_group=True)
    assert inv.plan_vars(PLAN_LIMITS, PLAN_PATHS) == want


def test_every_node_of_a_multi_node_slot_holds_the_plan_to_its_limit():
    """The play checks each node of a multi-node group against its own spec limits: a worker with
    a lower one refused every deeper configuration at its preflight, where the plan had read the
    head's alone."""
    from tuner.run.inventory import Inventory
    from tuner.spec.configs import PLAN_LIMITS, PLAN_PATHS

    hostvars = {
        "n1": {"sglang_server_multinode_group": "tp_pair", "sglang_server_spec_draft_model_path": "/d"},
        "n2": {"sglang_server_multinode_group": "tp_pair", "sglang_server_spec_max_steps": 2},
    }
    inv = Inventory(hosts=["n1", "n2"], hostvars=hostvars, groups={"tp_pair": ["n1", "n2"]}, has_group=True)
    assert inv.slots() == {"tp_pair": ["n1", "n2"]}
    # the worker's limit, and no draft path (the worker has none)
    assert inv.plan_vars(PLAN_LIMITS, PLAN_PATHS) == {"sglang_server_spec_max_steps": 2}


def test_a_resume_of_a_sweep_that_stored_a_symlinks_target_takes_the_link(tmp_path, capsys, no_hosts):
    """Before the inventory and playbook were kept as given, sweep.json held a symlink's target: a
    --resume by the same link was refused as a different sweep."""
    from tuner.data.store import Store
    from tuner.run.deploy import project_root
    from tuner.run.inventory import read_inventory

    link = tmp_path / "inv.yml"
    link.symlink_to(Path(INV).resolve())
    out = tmp_path / "out"
    argv = ["sweep", "--out", str(out), "--inventory", str(link), "--steps", "1"]
    spec = SweepSpec.from_cli_args(cli.build_parser().parse_args(argv), project_root())
    assert spec.inventory == str(link)
    old = dataclasses.replace(spec, inventory=str(Path(INV).resolve()))
    Store(out).write_spec(old, "test", cli.host_digests(read_inventory(link, None, project_root())))
    assert cli.main([*argv, "--resume", "--dry-run"]) == 0, capsys.readouterr().err
