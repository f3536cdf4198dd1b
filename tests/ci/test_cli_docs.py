"""Every flag of every `python -m tuner` command is documented in docs/tuner.md: the project keeps
docs for every command and flag, and `--version` and `bench --quiet` had slipped out of them."""

from __future__ import annotations

import argparse
from pathlib import Path

from tuner.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _flags(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, str]:
    """flag -> the command it belongs to, over the parser and its subcommands."""
    out: dict[str, str] = {}
    for action in parser._actions:  # noqa: SLF001 (argparse keeps no public list of its actions)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                out.update(_flags(sub, f"{prefix} {name}".strip()))
        for opt in action.option_strings:
            if opt.startswith("--") and opt != "--help":
                out.setdefault(opt, prefix or "(top level)")
    return out


def test_every_flag_of_every_command_is_in_the_tuner_docs():
    docs = (ROOT / "docs" / "tuner.md").read_text(encoding="utf-8")
    flags = _flags(build_parser())
    assert len(flags) > 40  # the walk found the subcommands' flags, not only the top level's
    missing = sorted(f"{cmd}: {flag}" for flag, cmd in flags.items() if f"`{flag}" not in docs)
    assert not missing, f"flags docs/tuner.md does not document: {missing}"
