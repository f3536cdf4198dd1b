"""The API key on a real host (issue 9), and bad input that must change nothing there.

One emulator host (podman, systemd 252 as PID 1, made by playbooks/emulator_hosts.yml, index 241
of the ad-hoc range). The deploy play runs through ansible-runner as the tuner runs it, with the
key in the controller's SGLANG_API_KEY (the role's default), and after every deploy:
- requests with `Authorization: Bearer <key>` succeed, without it (or with another key) get 401;
- as `nobody` inside the host, no /proc/*/cmdline or readable /proc/*/environ holds the key,
  while the server's own command line is readable;
- `systemctl show`, `systemctl status`, `systemctl cat` and the whole journal (every field,
  `_CMDLINE` included) hold no spelling of the key (raw, repr-escaped with either quote, JSON);
- no file on the host holds it but the root-only secrets file, its last-good copy and the unit's
  credential (0400, the service user), and keys deployed before are gone from every file;
- the play's stdout and every artifact ansible-runner wrote hold no spelling of it.
Keys: quotes + `$` + backslash, 4 KiB, then none (the server answers without a key). Bad keys and
traversal or garbage in every path-forming variable fail before the host changes (a snapshot of
its file tree, and the unit's InvocationID, before and after).
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request

import pytest
from roles_testlib import ROOT, VENV_BIN, EmulatorHost, deploy_play, run

# The file's measured duration in seconds (scripts/test.sh schedules the longest first: tests/conftest.py).
pytestmark = pytest.mark.cost(80)

EMU = EmulatorHost("roles-secrets-241", 241)
HOST, INDEX, URL, UNIT = EMU.name, EMU.index, EMU.url, EMU.unit
KEY_QUOTES = "k'e\"y-$HOME-\\n-%d-7f3a"
KEY_4K = ("Z9" * 2048)[:4091] + "-4KiB"  # 4096 characters: the longest key the role takes
ALLOWED = {
    "/etc/sglang/sglang-qwen.secrets.yaml": ("root", 0o600),
    "/etc/sglang/last-good/sglang-qwen/secrets": ("root", 0o600),
    f"/run/credentials/{UNIT}/server-secrets.yaml": ("sglang", 0o400),
}

sys.path.insert(0, str(ROOT / "plugins" / "module_utils"))
from sglang_secrets import secret_forms  # noqa: E402

podman, inventory = EMU.podman, EMU.inventory


def deploy(tmp_path, inv, name, key, tags=None, **extravars):
    """One ansible-runner run of the deploy play with SGLANG_API_KEY=key (unset for None):
    (rc, stdout + artifacts but ansible-runner's `command`, events) (roles_testlib EmulatorHost.deploy)."""
    extravars.setdefault("spec_steps", 3)
    env = {"SGLANG_API_KEY": key} if key is not None else None
    d = deploy_play(tmp_path, inv, name, tags=tags, env=env, artifacts=True, **extravars)
    return d.rc, d.out, d.events


def status(key: str | None, path: str = "/v1/models") -> int:
    req = urllib.request.Request(URL + path, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def generate(key: str | None) -> int:
    req = urllib.request.Request(
        URL + "/generate",
        data=json.dumps({"text": "hi", "sampling_params": {"max_new_tokens": 4}}).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code


def forms_of(keys):
    return sorted({form for key in keys for form in secret_forms(key) if len(form) >= 8})


PROC_SCAN = r"""
import glob, json, sys
forms = [f.encode() for f in sys.stdin.read().split("\n") if f]
hits, server = [], False
for path in glob.glob("/proc/[0-9]*/cmdline") + glob.glob("/proc/[0-9]*/environ"):
    try:
        data = open(path, "rb").read()
    except OSError:
        continue
    server = server or b"--config\0/run/credentials/" in data or b"-m\0tuner.emulator" in data
    hits += [path for f in forms if f in data]
print(json.dumps({"hits": sorted(set(hits)), "server_seen": server}))
"""

FILE_SCAN = r"""
import json, os, stat, sys
forms = [f.encode() for f in sys.stdin.read().split("\n") if f]
skip = {"/proc", "/sys", "/dev"}
found = {}
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
    for name in files:
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
            if not stat.S_ISREG(st.st_mode):
                continue
            with open(path, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if any(f in data for f in forms):
            import pwd
            found[path] = [pwd.getpwuid(st.st_uid).pw_name, stat.S_IMODE(st.st_mode)]
print(json.dumps(found))
"""


def assert_no_leak(current: str | None, previous: list[str], output: str) -> None:
    """Every place the issue names, for the current key (and, for files, the keys before it)."""
    keys = [current] if current else []
    forms = forms_of(keys)
    # The play's output and ansible-runner's artifacts.
    leaked = [f for f in forms_of(keys + previous) if f in output]
    assert leaked == [], f"the play's output holds {len(leaked)} spelling(s) of a key"
    # /proc as nobody.
    scan = json.loads(
        podman(
            "setpriv",
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "python3",
            "-c",
            PROC_SCAN,
            stdin="\n".join(forms_of(keys + previous)),
        ).stdout
    )
    assert scan["server_seen"], "nobody could not read the server's command line: the check saw nothing"
    assert scan["hits"] == [], scan
    # systemd's views and the whole journal.
    views = podman(
        "sh",
        "-c",
        f"systemctl show {UNIT}; systemctl status {UNIT} --no-pager -l -n 50; "
        f"systemctl cat {UNIT}; journalctl --no-pager -o json",
        check=False,
    ).stdout
    assert "server_args=ServerArgs(" in views
    assert [f for f in forms_of(keys + previous) if f in views] == [], "systemd or the journal holds a key"
    # Every file on the host.
    found = json.loads(podman("python3", "-c", FILE_SCAN, stdin="\n".join(forms)).stdout) if forms else {}
    if current:
        assert set(found) == set(ALLOWED), found
        for path, (owner, mode) in ALLOWED.items():
            assert found[path] == [owner, mode], (path, found[path])
    else:
        assert found == {}
    if previous:
        old = json.loads(podman("python3", "-c", FILE_SCAN, stdin="\n".join(forms_of(previous))).stdout)
        assert old == {}, f"a previous key is still on the host: {sorted(old)}"


SNAPSHOT = r"""
import json, os
skip = {"/proc", "/sys", "/dev", "/run/log", "/var/log/journal", "/tmp", "/var/tmp", "/root/.ansible"}
out = {}
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in skip]
    for name in dirs + files:
        path = os.path.join(root, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        out[path] = [st.st_mode, st.st_uid, st.st_size, 0 if os.path.isdir(path) else st.st_mtime_ns]
print(json.dumps(out))
"""


def snapshot() -> dict:
    tree = json.loads(podman("python3", "-c", SNAPSHOT).stdout)
    tree["InvocationID"] = podman("systemctl", "show", UNIT, "-p", "InvocationID", "--value").stdout.strip()
    return tree


@pytest.fixture(scope="module")
def host(need_podman, frozen_wheelhouse, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("secrets-host")
    inv = inventory(tmp / "inventory.yml", frozen_wheelhouse)
    with EMU.made(inv):
        yield tmp, inv


def dry_run(inv, *extra: str) -> str:
    """`ansible-playbook deploy.yml --check` as a user types it: must pass and change nothing."""
    # the host's first SSH login writes /run/motd.dynamic (pam_motd), whatever the play does
    login = ("/run", "/run/motd.dynamic")
    before = {k: v for k, v in snapshot().items() if k not in login}
    proc = run([str(VENV_BIN / "ansible-playbook"), "-i", str(inv), "deploy.yml", "--check", *extra], timeout=600)
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert {k: v for k, v in snapshot().items() if k not in login} == before
    return proc.stdout


@pytest.mark.systemd
@pytest.mark.slow
def test_the_key_works_and_is_nowhere_else(host):
    tmp, inv = host
    # --check on the fresh host (this file's first test): the wheelhouse's unarchive needed a
    # directory check mode had not made, and the gate waited for a server that was never started
    assert podman("test", "-e", f"/etc/systemd/system/{UNIT}", check=False).returncode == 1
    out = dry_run(inv)
    assert f"{HOST}: no server running (check mode); would write /etc/systemd/system/{UNIT}" in out, out[-4000:]
    rc, out, _ = deploy(tmp, inv, "quotes", KEY_QUOTES)
    assert rc == 0, out[-6000:]
    assert status(None) == 401 and status(KEY_QUOTES + "x") == 401
    assert status(KEY_QUOTES) == 200 and generate(KEY_QUOTES) == 200
    assert status(None, "/health") == 200
    assert_no_leak(KEY_QUOTES, [], out)
    # The journal shows the server_args line, with the key masked by the launcher.
    journal = podman("journalctl", "-u", UNIT, "--no-pager", "-o", "cat").stdout
    assert "api_key='<redacted>'" in journal

    # A new key through the tuner's slim path (configure + run): the old one is gone everywhere.
    rc, out, _ = deploy(tmp, inv, "4k", KEY_4K, tags="sglang_server_configure,sglang_server_run", spec_steps=2)
    assert rc == 0, out[-6000:]
    assert status(KEY_4K) == 200 and generate(KEY_4K) == 200 and status(KEY_QUOTES) == 401
    assert_no_leak(KEY_4K, [KEY_QUOTES], out)

    # No key: the server answers without one; no secrets file, no credential, no --config.
    rc, out, _ = deploy(tmp, inv, "nokey", None, tags="sglang_server_configure,sglang_server_run")
    assert rc == 0, out[-6000:]
    assert status(None) == 200 and generate(None) == 200
    unit = podman("systemctl", "cat", UNIT).stdout
    assert "LoadCredential=" not in unit and "--config" not in unit and "sglang_launcher.py --" in unit
    assert podman("test", "-e", "/etc/sglang/sglang-qwen.secrets.yaml", check=False).returncode == 1
    assert_no_leak(None, [KEY_QUOTES, KEY_4K], out)

    # --check with another depth on the running host: the running server's own settings, labelled so
    # (it printed the running server's capacity beside the new spec_steps), and what would be written
    out = dry_run(inv, "-e", "spec_steps=5")
    assert f"{HOST}: the running server (check mode): max_total_num_tokens=" in out, out[-4000:]
    assert "(spec_steps=3, emulator," in out and f"would write /etc/systemd/system/{UNIT}" in out, out[-4000:]


BAD_KEYS = {
    "newline": ("line-one\nline-two", "sglang_server_api_key must be one line"),
    "blank": ("has a-blank-in", "sglang_server_api_key must be printable ASCII without blanks"),
    "dash": ("-looks-like-a-flag", "sglang_server_api_key must not start with '-'"),
    "too-long": ("L" * 4097, "sglang_server_api_key must have 8 to 4096 characters"),
    "unicode": ("ключ-ключ-ключ", "sglang_server_api_key must be printable ASCII"),
}


@pytest.mark.systemd
@pytest.mark.slow
def test_bad_keys_fail_before_the_host_changes(host, frozen_wheelhouse):
    """One play over inventory aliases of the same real host, one bad key each (as a host
    variable, where Vault would put it); then the newline key from SGLANG_API_KEY, the default."""
    tmp, inv = host
    aliases = {
        f"badkey-{name}": {"emulator_host_index": INDEX, "ansible_host": HOST, "sglang_server_api_key": key}
        for name, (key, _needle) in BAD_KEYS.items()
    }
    bad_inv = inventory(tmp / "badkey-inventory.yml", frozen_wheelhouse, hosts=aliases)
    before = snapshot()
    rc, out, events = deploy(tmp, bad_inv, "bad-keys", None)
    assert rc != 0
    failed = {
        e["event_data"]["host"]: e["event_data"]["res"].get("msg", "")
        for e in events
        if e["event"] == "runner_on_failed"
    }
    assert sorted(failed) == sorted(aliases)
    for name, (key, needle) in BAD_KEYS.items():
        assert needle in failed[f"badkey-{name}"], failed[f"badkey-{name}"]
        assert key not in out, name
    rc, out, _ = deploy(tmp, inv, "bad-key-env", BAD_KEYS["newline"][0])
    assert rc != 0 and BAD_KEYS["newline"][1] in out and "changed=0" in out
    assert snapshot() == before


# Traversal and garbage for every path-forming, name and version variable (found from the role's
# argument spec by tests/roles/test_sglang_server_validation.py, which checks this list is complete).
PATHS = ["../../etc/passwd", "/etc/../etc/sglang", "relative/dir", "/opt//sglang", "/opt/sglang/"]
BAD_VARS: dict[str, list] = {
    "sglang_server_unit_name": ["../../etc/passwd", "../../etc/passwd.service", "a/b.service", "x..y.service", "x"],
    "sglang_server_user": ["../x", "root"],
    "sglang_server_group": ["../x", "root"],
    "sglang_server_user_groups": [["../x"], ["root"]],
    "sglang_server_install_dir": PATHS + ["/", "/usr"],
    "sglang_server_venv_dir": PATHS,
    "sglang_server_state_dir": PATHS + ["/var/lib", "/"],
    "sglang_server_config_dir": PATHS + ["/etc", "/var/lib/sglang/etc"],
    "sglang_server_cuda_env_file": PATHS,
    "sglang_server_python": PATHS + ["python3"],
    "sglang_server_read_write_paths": [["../x"], ["/a/../b"], ["/a b"]],
    "sglang_server_model_path": ["../../etc/passwd", "/m/../etc", "/m//x"],
    "sglang_server_spec_draft_model_path": ["draft", "/d/../x"],
    "sglang_server_wheelhouse_dir": ["wh", "/wh/../x"],
    "sglang_server_emulator_wheelhouse_dir": ["build/wheelhouse", "/tmp/../tmp/x"],
    "sglang_server_sglang_version": ["latest", "../0.5.9", "0.5.9; true"],
    "sglang_server_pip_packages": [["-e", "git+https://example.invalid/x"]],
    "sglang_server_served_model_name": ["two\nlines"],
    "sglang_server_device_allow": [["char-nvidia rw\nExecStartPre=/bin/true"]],
    "sglang_server_unit_extra": [{"CPUAffinity": "0\nExecStartPre=/bin/true"}],
    "sglang_server_limit_nofile": ["1\nExecStartPre=/bin/true"],
    "sglang_server_limit_memlock": ["x y"],
}


@pytest.mark.systemd
@pytest.mark.slow
def test_bad_paths_names_and_versions_change_nothing(host, frozen_wheelhouse):
    """One play over many inventory aliases of the same real host, one bad value each; then the
    issue's own command line (-e sglang_server_unit_name=../../etc/passwd)."""
    tmp, _inv = host
    aliases = {}
    for var, values in BAD_VARS.items():
        for i, value in enumerate(values):
            alias = f"bad-{var.removeprefix('sglang_server_').replace('_', '-')}-{i}"
            aliases[alias] = {"emulator_host_index": INDEX, "ansible_host": HOST, var: value, "_expect": var}
    inv = inventory(tmp / "bad-inventory.yml", frozen_wheelhouse, hosts=aliases)
    before = snapshot()
    rc, out, events = deploy(tmp, inv, "bad-vars", "good-key-0001")
    assert rc != 0
    failed = {
        e["event_data"]["host"]: e["event_data"]["res"].get("msg", "")
        for e in events
        if e["event"] == "runner_on_failed"
    }
    assert sorted(failed) == sorted(aliases)
    for alias, hv in aliases.items():
        assert hv["_expect"] in failed[alias], (alias, failed[alias])
    ok = [
        e
        for e in events
        if e["event"] == "runner_on_ok"
        and e["event_data"].get("task_action") not in ("ansible.builtin.assert", "assert")
    ]
    assert not [e for e in ok if e["event_data"]["res"].get("changed")]
    # The example, as a new user typed it.
    good_inv = inventory(tmp / "inventory.yml", frozen_wheelhouse)
    proc = run(
        [
            str(VENV_BIN / "ansible-playbook"),
            "-i",
            str(good_inv),
            "deploy.yml",
            "-e",
            "spec_steps=3",
            "-e",
            "sglang_server_unit_name=../../etc/passwd",
        ],
        timeout=300,
    )
    assert proc.returncode != 0 and "sglang_server_unit_name must be a systemd service name" in proc.stdout
    assert "changed=0" in proc.stdout and "unreachable=0" in proc.stdout
    after = snapshot()
    assert after == before
    assert "/etc/passwd.env" not in after and "/etc/etc" not in after
