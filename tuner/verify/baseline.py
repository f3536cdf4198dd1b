"""The baseline file: greedy outputs of a true no-speculation deployment, with what they are of.

Written once per campaign (the no-speculation server is deployed once) and reused by every
configuration and every later sweep or role run on the same model, server version, prompt set and
settings; one of anything else is refused with a message naming what differs
(`sglang_verify.baseline_mismatch`), never silently compared.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from pathlib import Path
from typing import Any

from sglang_utils import sglang_verify as rules

from ..data.redact import Redactor, api_key_from_env
from .prompts import PromptSet


class BaselineError(ValueError):
    """A baseline file that cannot be used here; the message says why."""


def make(ident: dict[str, Any], ps: PromptSet, got: dict[str, Any], tool: str) -> dict[str, Any]:
    """The baseline document from a no-speculation server's identity and outputs."""
    if ident.get("speculative"):
        raise BaselineError(
            f"the baseline server runs speculative decoding ({ident['speculative']}); "
            "a baseline must come from a deployment without it"
        )
    strip = ("id", "text", "output_ids")
    texts = {p["id"]: p["text"] for p in (*ps.short, *ps.long)}
    return {
        "format": rules.BASELINE_FORMAT,
        "tool": tool,
        "created": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "server_version": ident.get("server_version"),
        "model": ident.get("model"),
        "served_model_name": ident.get("served_model_name"),
        "deterministic": bool(ident.get("deterministic")),
        "numerics": dict(ident.get("numerics") or {}),
        "attention_backends": dict(ident.get("attention_backends") or {}),
        "speculative": None,
        "prompt_set": ps.name,
        "prompt_set_sha256": ps.sha256,
        "settings": dict(ps.settings),
        # each row carries its prompt, so the role's check (sglang_verify module) needs no dataset
        "short": [{"prompt": texts[r["id"]], **{k: r.get(k) for k in strip}} for r in got["short"]],
        "long": [{"prompt": texts[r["id"]], **{k: r.get(k) for k in strip}} for r in got["long"]],
        "requests": got.get("requests"),
        "seconds": got.get("seconds"),
    }


def write(path: Path, doc: dict[str, Any]) -> None:
    """The baseline file, scrubbed of the API key as every file the tuner writes is."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    text = json.dumps(Redactor([api_key_from_env()]).scrub_obj(doc), indent=1, ensure_ascii=False)
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read(path: Path) -> dict[str, Any]:
    """The parsed baseline, or BaselineError naming the file and what is wrong with it."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BaselineError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: not a readable JSON baseline ({exc})") from None
    problems = rules.baseline_problems(doc)
    if problems:
        raise BaselineError(f"{path}: not a baseline file: " + "; ".join(problems[:4]))
    return dict(doc)


def check_prompts(doc: dict[str, Any], ps: PromptSet, where: str) -> None:
    """Refuse a baseline of another prompt set or settings: both are known before any server is up,
    so a sweep is refused at its start, not after every configuration was deployed and measured
    only to fail "does not fit" (the model, version and numerics are checked once a server is up)."""
    diffs = rules.baseline_mismatch(doc, doc.get("model"), doc.get("server_version"), ps.sha256, ps.settings)
    if diffs:
        raise BaselineError(f"{where} was captured for other prompts than this sweep sends: " + "; ".join(diffs))


def check(doc: dict[str, Any], ident: dict[str, Any], ps: PromptSet, where: str) -> None:
    """Refuse a baseline of another model, server version, prompt set, settings or numerics (tp
    size, dtype, quantization, KV cache dtype, tokenizer, model revision)."""
    diffs = rules.baseline_mismatch(
        doc, ident.get("model"), ident.get("server_version"), ps.sha256, ps.settings, ident.get("numerics")
    )
    if diffs:
        raise BaselineError(f"{where} does not fit this server: " + "; ".join(diffs))


def check_rule_inputs(doc: dict[str, Any], ident: dict[str, Any], where: str) -> None:
    """Refuse to keep, for a capture, a baseline that fits the server but was made under another
    parity rule's inputs: deterministic inference on one side only, or other attention kernels. Kept,
    every later check of a deterministic speculative server fell to the 60% rule while the capture
    said it "holds this server's outputs" (`rules.rule_for` reads both from the baseline)."""
    was, now = bool(doc.get("deterministic")), bool(ident.get("deterministic"))
    diffs = []
    if was != now:
        diffs.append(f"--enable-deterministic-inference {'on' if was else 'off'} there, {'on' if now else 'off'} here")
    kernels = rules.backend_difference(doc.get("attention_backends"), ident.get("attention_backends"))
    if kernels:
        diffs.append(f"other attention kernels, there / here: {kernels}")
    if diffs:
        raise BaselineError(
            f"{where} was captured from this model and release but not as this server runs ("
            + "; ".join(diffs)
            + "): remove it or name another file to capture anew"
        )
