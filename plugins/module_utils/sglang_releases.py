# Copyright: (c) 2026, sglang-tune contributors
# Apache-2.0 (see pyproject.toml)
"""Facts about SGLang releases that both the role's input checks and the emulator need.

One place for: which releases the emulator models, and from which release SGLang has adaptive
speculation (``--speculative-adaptive``) in which config form. The emulator's full per-release
table (tuner/emulator/versions.py) is built on these names; the role's filter checks
``sglang_server_sglang_version`` and ``spec_schedule`` against them before a host changes.
Standard library only, Python 3.8 syntax; installed with the emulator as ``sglang_utils.sglang_releases``.

Sources (sgl-project/sglang wheels on PyPI, ``python/sglang/...`` in the repo): the
``--speculative-adaptive`` flags first appear in 0.5.11's ``srt/server_args.py``; 0.5.11 and 0.5.12
read a flat JSON config (``srt/speculative/adaptive_spec_params.py`` ``load_adaptive_config``);
0.5.13 is the first release whose ``adaptive_spec_params.py`` keys the config by batch-size lower
bounds (PR #24055, ``_load_adaptive_config``), which 0.5.23 still reads.
"""

from __future__ import annotations

__all__ = [
    "EMULATED_RELEASES",
    "SPEC_ALGORITHMS_SINCE",
    "SPEC_ALGORITHMS",
    "spec_algorithms",
    "ADAPTIVE_SINCE",
    "ADAPTIVE_PER_BS_SINCE",
    "ADAPTIVE_ZERO_STEPS_SINCE",
    "adaptive_needs_overlap_off",
    "DETERMINISTIC_SINCE",
    "release_key",
    "adaptive_config_form",
]

EMULATED_RELEASES = ("0.5.9", "0.5.10", "0.5.11", "0.5.12", "0.5.23")
ADAPTIVE_SINCE = "0.5.11"
ADAPTIVE_PER_BS_SINCE = "0.5.13"
# A bucket that does not draft (candidate step 0) first loads in 0.5.14: 0.5.13's
# adaptive_spec_params.py refuses it ("candidate_steps must be a list of positive ints"), 0.5.14's
# accepts `s >= 0` and its default table gains 0-step buckets.
ADAPTIVE_ZERO_STEPS_SINCE = "0.5.14"
# --enable-deterministic-inference (batch-invariant kernels) first ships in 0.5.3 (sgl-project/sglang
# PR #10645, merged 2025-09-20, after 0.5.2 of 2025-09-11); every release the emulator models has it
# in its parser (tests/emulator/data/sglang_flags/*.txt).
DETERMINISTIC_SINCE = "0.5.3"

# SGLang's builtin --speculative-algorithm values and the release that added each: 0.5.9/0.5.10
# argparse choices EAGLE EAGLE3 NEXTN STANDALONE NGRAM (srt/server_args.py), 0.5.11 adds DFLASH,
# 0.5.16 DSPARK and 0.5.20 UNO (srt/speculative/spec_info.py `SpeculativeAlgorithm` of each wheel; the
# flag's help lists them from then on).
SPEC_ALGORITHMS_SINCE = (
    ("EAGLE", "0.5.9"),
    ("EAGLE3", "0.5.9"),
    ("NEXTN", "0.5.9"),
    ("STANDALONE", "0.5.9"),
    ("NGRAM", "0.5.9"),
    ("DFLASH", "0.5.11"),
    ("DSPARK", "0.5.16"),
    ("UNO", "0.5.20"),
)
SPEC_ALGORITHMS = tuple(entry[0] for entry in SPEC_ALGORITHMS_SINCE)


# A build of SGLang's main branch installed from source reports ``0.0.0.devN+g<sha>`` (its version
# comes from git tags it was built without: the /server_info of SGLang's own docs notebooks shows
# "0.0.0.dev1+gece8a1a78"): newer than every release, so ordered after them all.
SOURCE_BUILD_KEY = (9999,)


def release_key(text: object) -> tuple[int, ...]:
    """``0.5.12.post1`` -> (0, 5, 12): the release numbers, for ordering (empty for junk; a source
    build of main, ``0.0.0.devN+g<sha>``, is :data:`SOURCE_BUILD_KEY`)."""
    raw = str(text).strip()
    if raw.startswith("0.0.0") and ("dev" in raw or "+g" in raw):
        return SOURCE_BUILD_KEY
    out = []
    for part in raw.split("."):
        digits = ""
        for ch in part:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            break
        out.append(int(digits))
        if digits != part:
            break
    return tuple(out)


def spec_algorithms(version: object) -> tuple[str, ...]:
    """The builtin algorithms of one release (all of them for an unparseable version)."""
    key = release_key(version)
    if not key:
        return SPEC_ALGORITHMS
    return tuple(name for name, since in SPEC_ALGORITHMS_SINCE if key >= release_key(since))


def adaptive_needs_overlap_off(version: object) -> bool:
    """0.5.11 keeps --speculative-adaptive only with the overlap scheduler off: its
    adaptive_spec_params.py `adaptive_unsupported_reason` returns "the overlap scheduler (spec v2)
    is enabled (adaptive is only implemented for EAGLEWorker v1)" unless
    `server_args.disable_overlap_schedule`, and with SGLANG_ENABLE_SPEC_V2 on by default
    (environ.py) the overlap scheduler stays on for topk 1; 0.5.12 implements it for v2."""
    key = release_key(version)
    return bool(key) and release_key(ADAPTIVE_SINCE) <= key < release_key("0.5.12")


def adaptive_config_form(version: object) -> str | None:
    """None (no --speculative-adaptive), "flat" or "per-bs" for an SGLang release."""
    key = release_key(version)
    if not key or key < release_key(ADAPTIVE_SINCE):
        return None
    if key < release_key(ADAPTIVE_PER_BS_SINCE):
        return "flat"
    return "per-bs"
