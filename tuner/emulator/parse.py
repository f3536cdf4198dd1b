"""Reading a `launch_server` command line as the emulated release does: which release, `--config`, argparse.

Parsing mirrors SGLang's: bad or unknown flags print usage + `error: ...` and exit 2 (the parser
of flags.py), and `--config FILE.yaml` is merged first, with SGLang's own ValueErrors.
"""

from __future__ import annotations

import argparse
import json
import math
import os
from typing import Any

from . import faults as faults_mod
from . import versions
from .flags import DEFAULT_VERSION, add_emulator_flags, build_parser
from .profile import ProfileError, load_profile
from .versions import SGLangVersion

# ---- which release ------------------------------------------------------------------------------


def _preparse(argv: list[str]) -> argparse.Namespace:
    pre = argparse.ArgumentParser(add_help=False)
    add_emulator_flags(pre)
    pre.add_argument("--config", type=str, default=None)
    ns, _ = pre.parse_known_args(argv)
    return ns


def _config_value(path: str | None, *keys: str) -> Any:
    if not path:
        return None
    try:
        import yaml

        with open(path) as fh:
            data = yaml.safe_load(fh)
    except Exception:  # noqa: BLE001 - the real merge reports a bad file with SGLang's words
        return None
    if isinstance(data, dict):
        for key in keys:
            if key in data:
                return data[key]
    return None


def choose_version(argv: list[str]) -> SGLangVersion:
    """The release to emulate: --emulator-sglang-version (command line, then --config file), else
    the profile's sglang_version, else 0.5.9. Raises UnsupportedVersion naming the modelled ones."""
    pre = _preparse(argv)
    wanted = pre.emulator_sglang_version
    if wanted is None:
        wanted = _config_value(pre.config, "emulator-sglang-version", "emulator_sglang_version")
    if wanted is not None:
        return versions.get(str(wanted))
    profile_path = pre.emulator_profile or _config_value(pre.config, "emulator-profile", "emulator_profile")
    try:
        profile = load_profile(profile_path)
    except ProfileError:
        return versions.get(DEFAULT_VERSION)  # main() reports the profile's own error
    try:
        return versions.get(profile.sglang_version)
    except versions.UnsupportedVersion as e:
        # the profile named it, not a flag: say so, as for any other bad key of a profile
        err = versions.UnsupportedVersion(f"emulator profile {profile.name}: sglang_version: {e}")
        err.flag = "--emulator-profile"
        raise err from None


# ---- --config FILE.yaml -------------------------------------------------------------------------


def merge_config_file(
    parser: argparse.ArgumentParser, argv: list[str], facts: SGLangVersion | None = None
) -> list[str]:
    """`--config FILE.yaml`: the file's keys become flags placed before the command line's, so the
    command line wins, as SGLang's ConfigArgumentMerger does (sglang/srt/server_args_config_parser.py
    in 0.5.9-0.5.12, sglang/srt/utils/server_args_config_parser.py in 0.5.23; prepare_server_args
    calls it when "--config" is in argv). A key `api-key: ...` in such a file keeps the secret out
    of the process's command line, which every local user can read in /proc/PID/cmdline.

    0.5.23 (`facts.config_v2`) also accepts a key spelled as any long option of the flag (e.g.
    `tensor-parallel-size` for `--tp-size`) and passes a mapping value as JSON text; older releases
    accept only the key that matches the flag's dest and pass a mapping as its str().
    SGLang's errors are plain ValueErrors (a traceback, exit status 1), reproduced word for word.
    """
    facts = facts or versions.get(DEFAULT_VERSION)
    where = [i for i, arg in enumerate(argv) if arg == "--config"]
    if not where:
        return argv
    if len(where) > 1:
        raise ValueError("Multiple config files specified! Only one allowed.")
    i = where[0]
    if i == len(argv) - 1:
        raise ValueError("No config file specified after --config flag!")
    path = argv[i + 1]
    suffix = os.path.splitext(path)[1]
    if suffix.lower() not in (".yaml", ".yml"):
        raise ValueError(f"Config file must be YAML format, got: {suffix}")
    if not os.path.exists(path):
        raise ValueError(f"Config file not found: {path}")
    import yaml  # the bare install carries PyYAML, as SGLang's does

    with open(path) as fh:
        data = yaml.safe_load(fh)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ValueError("Config file must contain a dictionary at root level")

    def keys_of(action: argparse.Action) -> set[str]:
        if not facts.config_v2:
            return {action.dest}
        return {action.dest} | {o[2:].replace("-", "_") for o in action.option_strings if o.startswith("--")}

    actions = [a for a in parser._actions if a.option_strings]
    store_true = {k for a in actions if isinstance(a, argparse._StoreTrueAction) for k in keys_of(a)}
    if facts.config_v2:
        supported = [
            a for a in actions if isinstance(a, (argparse._StoreTrueAction, argparse._StoreAction)) or a.nargs is None
        ]
    else:
        supported = [a for a in actions if isinstance(a, (argparse._StoreTrueAction, argparse._StoreAction))]
    supported_keys = {k for a in supported for k in keys_of(a)}
    unsupported: dict[str, argparse.Action] = {}
    for a in actions:
        if a in supported or "--help" in a.option_strings or "--config" in a.option_strings:
            continue
        for k in keys_of(a):
            if not facts.config_v2 or k not in supported_keys:
                unsupported[k] = a
    out: list[str] = []
    for key, value in data.items():
        norm = str(key).replace("-", "_")
        if norm in unsupported:
            raise ValueError(f"Unsupported config option '{norm}' with action '{unsupported[norm].__class__.__name__}'")
        if isinstance(value, bool):
            if norm in store_true:
                if value:
                    out.append(f"--{key}")
            else:
                out += [f"--{key}", str(value).lower()]
        elif isinstance(value, list):
            if value:
                out.append(f"--{key}")
                out += [str(item) for item in value]
        elif isinstance(value, dict) and facts.config_v2:
            out += [f"--{key}", json.dumps(value)]
        else:
            out += [f"--{key}", str(value)]
    return out + argv[:i] + argv[i + 2 :]


def parse_flags(argv: list[str], version: str | SGLangVersion | None = None) -> argparse.Namespace:
    """Parse like the emulated release: bad or unknown flags print usage + `error: ...` and exit 2;
    `--config` is merged first (its ValueErrors surface as SGLang's do). The release's row rides
    on the result as `ns.emulator_facts`; the merged argv as `ns.emulator_argv` (0.5.23 serves it
    as launch_command)."""
    argv = list(argv)
    if version is None:
        try:
            facts = choose_version(argv)
        except versions.UnsupportedVersion as e:
            build_parser(DEFAULT_VERSION).error(f"argument {e.flag}: {e}")
    else:
        facts = version if isinstance(version, SGLangVersion) else versions.get(version)
    parser = build_parser(facts)
    argv = merge_config_file(parser, argv, facts)
    ns = parser.parse_args(argv)
    # nan passed `< 0` and served at once; inf never finished starting (the profile's startup_s refuses both)
    if ns.emulator_startup_s is not None and not (math.isfinite(ns.emulator_startup_s) and ns.emulator_startup_s >= 0):
        parser.error(f"argument --emulator-startup-s: must be a finite number >= 0, got {ns.emulator_startup_s:g}")
    try:
        ns.emulator_fault_list = faults_mod.parse_faults(ns.emulator_fault)
    except faults_mod.FaultError as e:
        parser.error(f"argument --emulator-fault: {e}")
    ns.emulator_facts = facts
    ns.emulator_argv = argv
    return ns
