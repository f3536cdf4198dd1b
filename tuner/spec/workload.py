"""What each request sends: synthetic prompts of an exact length, or the prompts of a dataset.

A dataset is a local file (nothing is downloaded), in one of the two formats the field's clients
read:

- ShareGPT-style JSON: an array (or JSON lines) of `{"conversations": [{"from": "human", "value":
  ...}, {"from": "gpt", "value": ...}, ...]}`. As SGLang's `bench_serving` does for ShareGPT
  (`sgl-project/sglang python/sglang/bench_serving.py`, `sample_sharegpt_requests`), the prompt is
  the first human turn and the reference output is the reply that follows it; system turns before
  it are kept as the system message.
- OpenAI-chat JSON lines: `{"messages": [{"role": "system"|"user"|"assistant", "content": ...}]}`.
  The prompt is the conversation up to its last user turn; a final assistant message is the
  reference output. (`{"prompt": "...", "completion": "..."}` lines are read too.)

Lengths: the server's count of prompt tokens is what the results report (`prompt_tokens_mean`);
without the model's tokenizer the tuner estimates a reference output's tokens as its words and
punctuation marks, each Chinese, Japanese or Korean character counted on its own
(`estimate_tokens`). `--output-len N` fixes every output at N tokens instead, `--input-len N` cuts
(or repeats) each prompt's last user message to N words.

A row with nothing to ask (a conversation without a human turn with text, one that does not end
with a user message) is skipped and counted, as the field's clients skip them (`bench_serving`
keeps only conversations of two turns or more); a file where more than half of the rows are so is
refused, as is one without any prompt. Other errors name the file and the line, before anything is
deployed: an empty, truncated or non-UTF-8 file, a row that is not an object, a malformed turn or
`output_len`.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import prompts
from .flags import BadInput

DATASET_DIR = Path(__file__).resolve().parent / "datasets"
SHIPPED = DATASET_DIR / "sgt-mixed-v1.jsonl"  # the project's own (tuner/spec/datasets/README.md)

# Scripts written without spaces between words: one token a character (a BPE tokenizer spends about
# one to two characters a token on them), where `\w+` would count a whole clause as one word.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]")
_HUMAN = ("human", "user")
_ASSISTANT = ("gpt", "assistant", "chatgpt", "bard", "model")


def estimate_tokens(text: str) -> int:
    """Words, punctuation marks and CJK characters: a tokenizer-free estimate of a text's tokens."""
    return len(_TOKEN.findall(text))


@dataclass(frozen=True)
class Prompt:
    """One dataset row: a chat (messages ending with a user turn) and its reference output."""

    messages: tuple[tuple[str, str], ...]  # (role, content)
    output_len: int | None  # reference output, estimated tokens
    line: int

    @property
    def text(self) -> str:
        """The prompt as plain text (native /generate, /v1/completions): a lone user message as it
        is, a conversation as `Role: content` paragraphs ending with `Assistant:`."""
        if len(self.messages) == 1 and self.messages[0][0] == "user":
            return self.messages[0][1]
        parts = [f"{role.capitalize()}: {content}" for role, content in self.messages]
        return "\n\n".join(parts + ["Assistant:"])

    def chat(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]

    def with_input_words(self, n: int) -> Prompt:
        """The last user message cut to, or repeated up to, n words."""
        roles = [r for r, _ in self.messages]
        last = len(roles) - 1 - roles[::-1].index("user")
        words = self.messages[last][1].split()
        if not words:
            return self
        out = (words * (n // len(words) + 1))[:n]
        msgs = list(self.messages)
        msgs[last] = ("user", " ".join(out))
        return Prompt(tuple(msgs), self.output_len, self.line)


@dataclass(frozen=True)
class Dataset:
    """A dataset file as read: its identity (name, hash) and its rows."""

    path: str
    name: str
    sha256: str
    format: str  # sharegpt | openai-chat | prompt
    rows: int  # the rows with a prompt, the ones requests are drawn from
    prompts: tuple[Prompt, ...] = field(default=(), compare=False, repr=False)
    skipped: int = 0  # rows without a prompt (load_dataset)
    first_skipped: str = field(default="", compare=False)  # the first of them and why, for the log

    def to_json(self) -> dict[str, Any]:
        out = {"name": self.name, "sha256": self.sha256, "format": self.format, "rows": self.rows, "path": self.path}
        return out | ({"skipped_rows": self.skipped} if self.skipped else {})

    def identity(self) -> dict[str, Any]:
        """What makes two datasets the same for `--resume`: the content, not where it lies."""
        return {"sha256": self.sha256, "rows": self.rows}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Dataset:
        return cls(
            path=str(d.get("path") or ""),
            name=str(d.get("name") or ""),
            sha256=str(d.get("sha256") or ""),
            format=str(d.get("format") or ""),
            rows=int(d.get("rows") or 0),
            skipped=int(d.get("skipped_rows") or 0),
        )

    @property
    def loaded(self) -> bool:
        return bool(self.prompts)


def _where(path: Path, line: int | None) -> str:
    return f"{path}:{line}" if line else str(path)


class _NoPrompt(BadInput):
    """A well-formed row with nothing to ask: skipped and counted rather than refusing the file."""


def _content(value: Any) -> str:
    """Message content as text (OpenAI's list-of-parts form joins its text parts)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return " ".join(
            str(p.get("text", "")) for p in value if isinstance(p, dict) and p.get("type", "text") == "text"
        )
    return ""


def _from_sharegpt(conv: Any, where: str) -> Prompt:
    if not isinstance(conv, list):
        raise BadInput("--dataset", f"{where}: `conversations` must be a list of turns")
    system: list[tuple[str, str]] = []
    for i, turn in enumerate(conv):
        if not isinstance(turn, dict):
            raise BadInput("--dataset", f"{where}: turn {i + 1} is not an object")
        who = str(turn.get("from") or turn.get("role") or "").lower()
        text = _content(turn.get("value", turn.get("content")))
        if who == "system" and text.strip():
            system.append(("system", text))
        elif who in _HUMAN and text.strip():
            reply = next(
                (
                    _content(t.get("value", t.get("content")))
                    for t in conv[i + 1 :]
                    if isinstance(t, dict) and str(t.get("from") or t.get("role") or "").lower() in _ASSISTANT
                ),
                None,
            )
            out = estimate_tokens(reply) if reply and reply.strip() else None
            return Prompt(tuple(system + [("user", text)]), out, 0)
    raise _NoPrompt("--dataset", f"{where}: no prompt (no human turn with text)")


def _from_openai(messages: Any, where: str) -> Prompt:
    if not isinstance(messages, list) or not messages:
        raise BadInput("--dataset", f"{where}: `messages` must be a non-empty list")
    msgs: list[tuple[str, str]] = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise BadInput("--dataset", f"{where}: message {i + 1} is not an object")
        msgs.append((str(m.get("role") or "user").lower(), _content(m.get("content"))))
    reference = None
    if msgs[-1][0] == "assistant":
        reference = msgs.pop()[1]
    if not msgs or msgs[-1][0] != "user" or not msgs[-1][1].strip():
        raise _NoPrompt("--dataset", f"{where}: no prompt (the conversation must end with a user message with text)")
    out = estimate_tokens(reference) if reference and reference.strip() else None
    return Prompt(tuple(msgs), out, 0)


def _row(obj: Any, where: str) -> tuple[Prompt, str]:
    if not isinstance(obj, dict):
        raise BadInput("--dataset", f"{where}: a row must be a JSON object, not {type(obj).__name__}")
    if "conversations" in obj:
        return _from_sharegpt(obj["conversations"], where), "sharegpt"
    if "messages" in obj:
        return _from_openai(obj["messages"], where), "openai-chat"
    prompt = obj.get("prompt")
    if "output_len" in obj:
        out = obj["output_len"]
        if isinstance(out, bool) or not isinstance(out, int) or out < 1:
            raise BadInput(
                "--dataset", f"{where}: output_len must be a whole number of tokens, at least 1, not {out!r}"
            )
    if isinstance(prompt, str) and prompt.strip():
        ref = obj.get("completion") or obj.get("response")
        n = obj.get("output_len") or (estimate_tokens(ref) if isinstance(ref, str) else None)
        return Prompt((("user", prompt),), n or None, 0), "prompt"
    if "prompt" in obj:
        raise _NoPrompt("--dataset", f"{where}: no prompt (`prompt` is empty or not text)")
    raise BadInput("--dataset", f"{where}: no prompt (expected `conversations`, `messages` or `prompt`)")


def _json_error(path: Path, exc: json.JSONDecodeError, text: str) -> BadInput:
    """An array element that does not parse: truncated when the array is never closed."""
    if exc.pos >= len(text.rstrip()) or not text.rstrip().endswith("]"):
        msg = f"truncated JSON ({exc.msg})"
    else:
        msg = f"not valid JSON: {exc.msg} (column {exc.colno})"
    return BadInput("--dataset", f"{_where(path, exc.lineno)}: {msg}")


def _array_rows(path: Path, text: str) -> list[tuple[Any, int]]:
    """The elements of a top-level JSON array with the line each starts on."""
    dec = json.JSONDecoder()
    i = text.index("[") + 1
    out: list[tuple[Any, int]] = []
    n = len(text)
    line, counted = 1, 0  # the line at offset `counted`: counted on from the last element, not from the start
    while True:
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            raise BadInput("--dataset", f"{_where(path, text.count(chr(10), 0, n) + 1)}: truncated JSON (no closing ])")
        if text[i] == "]":
            rest = text[i + 1 :]
            if rest.strip():  # two arrays one after the other, or text after it: json.load refuses it too
                j = i + 1 + (len(rest) - len(rest.lstrip()))
                raise BadInput(
                    "--dataset", f"{_where(path, text.count(chr(10), 0, j) + 1)}: text after the array's closing ]"
                )
            return out
        line += text.count("\n", counted, i)
        counted = i
        try:
            obj, end = dec.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise _json_error(path, exc, text) from None
        out.append((obj, line))
        i = end
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i < n and text[i] == ",":
            i += 1
        elif i < n and text[i] != "]":
            raise BadInput("--dataset", f"{_where(path, text.count(chr(10), 0, i) + 1)}: expected , or ] in the array")


def dataset_flag(v: Any) -> Dataset | None:
    """--dataset PATH; given empty (`--dataset "$DS"` with DS unset) it is an error, not the
    synthetic prompts (they were benchmarked instead, and the run exited 0)."""
    if v is None:
        return None
    if not str(v).strip():
        raise BadInput("--dataset", "an empty path (leave the flag out for synthetic prompts)")
    return load_dataset(str(v))


def load_dataset(path_text: str) -> Dataset:
    """Read and check a dataset file; BadInput naming the file (and line) when it cannot be used."""
    path = Path(path_text)
    if not path.is_file():
        raise BadInput("--dataset", f"{path_text}: no such file")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise BadInput("--dataset", f"{path_text}: cannot read it ({exc.strerror or exc})") from None
    if not raw.strip():
        raise BadInput("--dataset", f"{path_text}: empty file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise BadInput("--dataset", f"{_where(path, line)}: not UTF-8 text (byte 0x{raw[exc.start]:02x})") from None
    text = text.removeprefix("\ufeff")
    stripped = text.lstrip()
    rows: list[tuple[Any, int]]
    if stripped.startswith("["):
        rows = _array_rows(path, text)
    else:
        rows = []
        # lines end at \n only: str.splitlines() also breaks at U+2028, U+2029 and U+0085, which JSON
        # strings may hold unescaped (json.dumps(..., ensure_ascii=False) writes them so)
        lines = text.split("\n")
        for lineno, row_text in enumerate(lines, start=1):
            if not row_text.strip():
                continue
            try:
                rows.append((json.loads(row_text), lineno))
            except json.JSONDecodeError as exc:
                last = lineno == len(lines)
                msg = "truncated JSON" if last else "not valid JSON"
                raise BadInput("--dataset", f"{_where(path, lineno)}: {msg} ({exc.msg}, column {exc.colno})") from None
    if not rows:
        raise BadInput("--dataset", f"{path_text}: no rows")
    parsed: list[Prompt] = []
    formats: set[str] = set()
    skipped: list[str] = []
    for obj, row_line in rows:
        try:
            p, fmt = _row(obj, _where(path, row_line))
        except _NoPrompt as exc:
            skipped.append(exc.message)
            continue
        parsed.append(Prompt(p.messages, p.output_len, row_line))
        formats.add(fmt)
    if len(skipped) * 2 > len(rows):
        raise BadInput(
            "--dataset",
            f"{skipped[0]}; {len(skipped)} of the {len(rows)} rows have no prompt"
            + (" (none has one)" if not parsed else " (more than half: is it the right file?)"),
        )
    return Dataset(
        path=str(path.resolve()),
        name=path.name,
        sha256=hashlib.sha256(raw).hexdigest(),
        format="+".join(sorted(formats)),
        rows=len(parsed),
        prompts=tuple(parsed),
        skipped=len(skipped),
        first_skipped=skipped[0] if skipped else "",
    )


@dataclass(frozen=True)
class Request:
    """What one request sends: a chat, a text, or token ids, and how many tokens to ask for."""

    max_tokens: int
    text: str | None = None
    messages: list[dict[str, str]] | None = None
    input_ids: list[int] | None = None


class PromptSource:
    """Request i's prompt, the same for every configuration of a sweep (it depends on the seed,
    the dataset and i only), distinct per request within a deployment."""

    def __init__(
        self,
        *,
        input_len: int | None,
        output_len: int | None,
        seed: int = 0,
        dataset: Dataset | None = None,
        sample: int | None = None,
        input_ids: bool = True,
    ):
        self.input_len = input_len
        self.output_len = output_len
        self.seed = seed
        self.dataset = dataset
        self.input_ids = input_ids
        self.rows: list[Prompt] = []
        if dataset is not None:
            if not dataset.loaded:
                raise ValueError(f"dataset {dataset.name} was not loaded")
            order = list(dataset.prompts)
            random.Random(f"sgt-dataset:{seed}").shuffle(order)
            self.rows = order[: sample or len(order)]
            if input_len is not None:
                self.rows = [p.with_input_words(input_len) for p in self.rows]

    def row(self, index: int) -> Prompt | None:
        return self.rows[index % len(self.rows)] if self.rows else None

    def max_tokens(self, index: int) -> int:
        if self.output_len is not None:
            return self.output_len
        p = self.row(index)
        return max(1, p.output_len) if p is not None and p.output_len else 256

    def request(self, index: int, endpoint: str, max_tokens: int | None = None) -> Request:
        n = self.max_tokens(index) if max_tokens is None else max_tokens
        p = self.row(index)
        if p is not None:
            return Request(n, text=p.text, messages=p.chat())
        length = self.input_len or 256
        if endpoint == "generate" and self.input_ids:
            return Request(n, input_ids=prompts.prompt_ids(index, length, self.seed))
        text = prompts.prompt_text(index, length, self.seed)
        return Request(n, text=text, messages=[{"role": "user", "content": text}])


def check_sample(n: int | None, dataset: Dataset | None) -> None:
    if n is None:
        return
    if dataset is None:
        raise BadInput("--dataset-sample", "needs --dataset")
    if n > dataset.rows:
        raise BadInput("--dataset-sample", f"{n} is more than the {dataset.rows} rows of {dataset.name}")


def describe(dataset: Dataset | None, sample: int | None) -> str:
    if dataset is None:
        return "synthetic prompts (deterministic random words / token ids)"
    rows = f"{sample} of {dataset.rows} rows" if sample else f"{dataset.rows} rows"
    if dataset.skipped:
        rows += f"; {dataset.skipped} without a prompt skipped"
        rows += f", the first {dataset.first_skipped}" if dataset.first_skipped else ""
    return f"{dataset.name} ({dataset.format}, {rows}, sha256 {dataset.sha256[:12]})"


def reference_lengths(ds: Dataset) -> Sequence[int]:
    return [p.output_len for p in ds.prompts if p.output_len]
