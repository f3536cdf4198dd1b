"""`python -m tuner.emulator [sglang.launch_server flags] [--emulator-* flags]`."""

from __future__ import annotations

import asyncio
import sys

from . import multinode
from .faults import FaultError, FaultSet, parse_faults
from .parse import parse_flags
from .profile import ProfileError, load_profile
from .resolve import EmulatorUnsupported, resolve
from .runner import Runner


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # argparse of the emulated release: usage + "error: ..." and exit 2, as SGLang; an SGLang
    # release the emulator does not model is refused here, naming the ones it does.
    ns = parse_flags(argv)
    prog = ns.emulator_facts.prog
    try:
        profile = load_profile(ns.emulator_profile)
        profile_faults = parse_faults(list(profile.faults))
    except (ProfileError, FaultError) as e:
        # as argparse reports a bad flag value (exit 2), so the role's start-up gate reads it as a
        # bad argument (plugins/module_utils/sglang_log.py find_fatal) with the key in the message
        print(f"{prog}: error: argument --emulator-profile: {e}", file=sys.stderr)
        return 2
    try:
        cfg = resolve(ns, profile)  # AssertionError / ValueError surface as SGLang's do
    except EmulatorUnsupported as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    # a TP group of another size or split over nodes changes capacity and step time (multinode.py)
    profile = multinode.adjust_profile(profile, cfg.values["tp_size"], cfg.values["nnodes"])
    faults = FaultSet.from_list(profile_faults + cfg.faults)
    startup_s = ns.emulator_startup_s if ns.emulator_startup_s is not None else profile.startup_s
    return asyncio.run(Runner(cfg, profile, faults, startup_s).run())


if __name__ == "__main__":
    sys.exit(main())
