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
    "adaptive_flat_adds_launch_steps",
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


def stream_text_incremental(version: object) -> bool | None:
    """Whether a stream whose ids come incrementally (each chunk its new ids) carries its text so
    too: 0.5.9's `--stream-output` sends the new ids with the whole text so far, 0.5.10's
    `--incremental-streaming-output` the new text (tokenizer_manager.py `_handle_batch_output`:
    `state.text[state.last_text_offset:]`, from 0.5.11 `delta_text`). None for an unparseable
    version (the reader then judges by the text itself)."""
    key = release_key(version)
    return None if not key else key >= release_key("0.5.10")


def adaptive_needs_overlap_off(version: object) -> bool:
    """0.5.11 keeps --speculative-adaptive only with the overlap scheduler off: its
    adaptive_spec_params.py `adaptive_unsupported_reason` returns "the overlap scheduler (spec v2)
    is enabled (adaptive is only implemented for EAGLEWorker v1)" unless
    `server_args.disable_overlap_schedule`, and with SGLANG_ENABLE_SPEC_V2 on by default
    (environ.py) the overlap scheduler stays on for topk 1; 0.5.12 implements it for v2."""
    key = release_key(version)
    return bool(key) and release_key(ADAPTIVE_SINCE) <= key < release_key("0.5.12")


def adaptive_flat_adds_launch_steps(version: object) -> bool:
    """0.5.12's flat policy adds the launch depth (--speculative-num-steps) to the config's
    candidate_steps when it is not one of them (adaptive_spec_params.py AdaptiveSpeculativeParams:
    "Ensure the worker's initial speculative_num_steps is itself a candidate", logged as "Adding
    initial speculative_num_steps=N to candidate_steps=[...]"); 0.5.11's starts at the candidate
    nearest to it and keeps the config's list as it is."""
    key = release_key(version)
    return bool(key) and key >= release_key("0.5.12") and adaptive_config_form(version) == "flat"


def adaptive_config_form(version: object) -> str | None:
    """None (no --speculative-adaptive), "flat" or "per-bs" for an SGLang release."""
    key = release_key(version)
    if not key or key < release_key(ADAPTIVE_SINCE):
        return None
    if key < release_key(ADAPTIVE_PER_BS_SINCE):
        return "flat"
    return "per-bs"


# What a release's wheels need on the host, from their METADATA: `Requires-Python: >=3.10`, and
# `>=3.11` from 0.5.22; from 0.5.11 they pin CUDA 13 builds (`cuda-python>=13.0`, torch 2.11.0 and
# later, which PyPI ships built for CUDA 13.0: pytorch/pytorch#177975), so the driver must run CUDA
# 13 (the 580 series); 0.5.9 and 0.5.10 pin torch 2.9.1, PyPI's CUDA 12.8 build. Only the major
# version is held: within one, CUDA's minor-version compatibility runs a 12.8 build on any 12.x
# driver (525 on), as cuda_env's `cuda_env_check_driver: false` allows for the toolkit.
REQUIRES_PYTHON_SINCE = (("0.5.9", (3, 10)), ("0.5.22", (3, 11)))
# From 0.5.11 the releases ship only compiled wheels, cp310-cp313 (cp311-cp313 from 0.5.22), and no
# sdist (PyPI's files of each release), while their Requires-Python has no upper bound: pip on a newer
# Python finds no distribution at all. The first Python minor with no wheel, per release.
PYTHON_WHEELS_BELOW = (("0.5.11", (3, 14)),)
DRIVER_CUDA_SINCE = (("0.5.9", (12, 0)), ("0.5.11", (13, 0)))


def _since(table: tuple[tuple[str, tuple[int, int]], ...], version: object) -> tuple[int, int] | None:
    key = release_key(version)
    if not key or key == SOURCE_BUILD_KEY:
        return None
    found = None
    for since, value in table:
        if key >= release_key(since):
            found = value
    return found


def install_errors(version: object, python_version: object = None, driver_cuda: object = None) -> list[str]:
    """What keeps SGLang `version` from installing or running on a host whose Python is
    `python_version` ("3.10") and whose driver runs CUDA `driver_cuda` ("12.8", from nvidia-smi):
    pip finds no wheel for too old a Python (its message only says no matching distribution), and
    a CUDA 13 torch cannot use a GPU under an older driver (the server then fails its start). An
    unknown value (None, "", "N/A") is not checked; nor is a source build of main."""
    errors: list[str] = []
    need_py = _since(REQUIRES_PYTHON_SINCE, version)
    have_py = release_key(python_version) if python_version not in (None, "") else ()
    if need_py and len(have_py) >= 2 and have_py[:2] < need_py:
        errors.append(
            f"SGLang {str(version).strip()} needs Python {need_py[0]}.{need_py[1]} or later (its wheels' "
            f"Requires-Python) and sglang_server_python is {python_version}; allowed: a newer Python for "
            f"sglang_server_python (on Ubuntu 22.04: /usr/bin/python3.{need_py[1]} with "
            f"sglang_server_system_packages: [python3.{need_py[1]}-venv]), or an older sglang_server_sglang_version"
        )
    below = _since(PYTHON_WHEELS_BELOW, version)
    if below and len(have_py) >= 2 and have_py[:2] >= below:
        errors.append(
            f"SGLang {str(version).strip()} ships wheels for Python up to {below[0]}.{below[1] - 1} only (no sdist) "
            f"and sglang_server_python is {python_version}: pip would find no distribution; allowed: a Python "
            f"{below[0]}.{below[1] - 1} or older for sglang_server_python"
        )
    need_cuda = _since(DRIVER_CUDA_SINCE, version)
    have_cuda = release_key(driver_cuda) if driver_cuda not in (None, "") else ()
    if need_cuda and len(have_cuda) >= 2 and have_cuda[:1] < need_cuda[:1]:
        errors.append(
            f"SGLang {str(version).strip()} installs a PyTorch built for CUDA {need_cuda[0]}, and the NVIDIA driver "
            f"runs CUDA {driver_cuda} at most (nvidia-smi): no GPU would be usable; allowed: a driver that runs CUDA "
            f"{need_cuda[0]} (out of this role's scope), an older sglang_server_sglang_version"
            + (" (0.5.10 or earlier for a CUDA 12 driver)" if need_cuda >= (13, 0) else "")
            + f", or cuda_env_check_driver: false only with NVIDIA's forward-compatibility package (cuda-compat, "
            f"data-center GPUs): minor-version compatibility does not cross from CUDA {have_cuda[0]} to {need_cuda[0]}"
        )
    return errors
