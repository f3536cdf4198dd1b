"""Prompt token counts and deterministic output text.

A "token" is a whitespace-separated word, both ways: prompts are counted by words and every output
token is one word, so a client that counts words sees exactly `completion_tokens`. At temperature
0 the word at each position is a hash of (prompt, position): the text depends on the prompt only,
never on the speculation depth or on how tokens were grouped into chunks, as for a correct server
with greedy decoding. Above temperature 0 the hash is seeded per request (the request's `seed`, or
a random one), so sampled outputs differ between requests.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import Any

_MASK64 = (1 << 64) - 1

_WORDS = (
    "the of and to in is that for it as with was on be by at this are from or have an they which one you "
    "were her all she there would their we him been has when who will more no if out so said what up its "
    "about into than them can only other new some could time these two may then do first any my now such "
    "like our over man me even most made after also did many before must through back years where much your "
    "way well down should because each just those people how too little state good very make world still "
    "own see men work long get here between both life being under never day same another know while last "
    "might us great old year off come since against go came right used take three states himself few house "
    "use during without again place american around however home small found thought went say part once "
    "general high upon school every does got united left number course war until always away something fact "
    "though water less public put think almost hand enough far took head yet government system better set told "
    "nothing night end why called eyes find going look asked later knew point next program city business give "
    "group toward young days let room president side social given present several order national possible rather "
    "second face per among form important often things looked early white case john become large big need four "
    "within felt children along saw best church ever least power development light thing seemed family interest "
    "want members mind country area others done turned although open god service certain kind problem began "
    "different door thus help sense means whole matter perhaps itself york times law human line above name "
    "example action company hands local show whether five history gave today either act feet across taken past "
    "quite anything seen having death experience body word half really field am car words already themselves "
    "information tell college shall money period held keep sure probably free seems real behind cannot miss "
    "political air question making office brought whose special heard major problems ago became federal moment "
    "study available known result street economic boy position reason change south board individual job areas"
).split()
VOCAB_SIZE = 256
_VOCAB = _WORDS[:VOCAB_SIZE]
_SPACED = tuple(" " + w for w in _VOCAB)
assert len(_VOCAB) == VOCAB_SIZE


def count_words(text: str) -> int:
    return len(text.split())


def prompt_hash(data: str | bytes) -> int:
    """64-bit digest of a rendered prompt (or token ids), the seed of all greedy output."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little")


def ids_hash(ids: Iterable[int]) -> int:
    return prompt_hash(",".join(str(int(i)) for i in ids))


def text_prompt(text: str) -> tuple[int, int, list[Any]]:
    """A text prompt as the engine takes it: (token count, hash, tokens), a token per word. One rule
    for /generate and the OpenAI endpoints, so the same prompt gets the same greedy output on both."""
    words: list[Any] = text.split()
    return len(words), prompt_hash(text), words


def ids_prompt(ids: list[Any]) -> tuple[int, int, list[Any]]:
    """A token-id prompt as the engine takes it: (token count, hash, the ids)."""
    return len(ids), ids_hash(ids), ids


def _mix(x: int) -> int:
    """splitmix64 finaliser: a cheap, well-spread hash of one 64-bit integer."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def token_id(h: int, position: int) -> int:
    """The id of the output token at `position` (0-based) for prompt hash h."""
    return _mix(h ^ ((position * 0xD6E8FEB86659FD93) & _MASK64)) & (VOCAB_SIZE - 1)


# Length of the cycle the spec-repeat fault falls into (a short loop of words, as a degenerate
# speculative decoder produces: docs/emulator.md "Faults").
REPEAT_CYCLE = 4
_DIVERGE_SALT = 0x6A09E667F3BCC908


def wrong_token_id(h: int, position: int, diverge_at: int | None, repeat_at: int | None) -> int:
    """The token a faulty speculative server emits at `position` (faults spec-diverge, spec-repeat).

    Before both fault positions it is the correct token. From `diverge_at` on, every token differs
    from the correct one (the correct id plus a hash-chosen 1..VOCAB_SIZE-1, modulo the vocabulary), so
    a comparison with the no-speculation output finds its first difference exactly there. From
    `repeat_at` on, the output cycles through REPEAT_CYCLE words (each the correct word of the
    cycle's first positions, shifted by one id), whatever the divergence.
    """
    if repeat_at is not None and position >= repeat_at:
        j = repeat_at + (position - repeat_at) % REPEAT_CYCLE
        return (token_id(h, j) + 1) & (VOCAB_SIZE - 1)
    right = token_id(h, position)
    if diverge_at is not None and position >= diverge_at:
        shift = 1 + token_id(h ^ _DIVERGE_SALT, position) % (VOCAB_SIZE - 1)
        return (right + shift) & (VOCAB_SIZE - 1)
    return right


# (diverge_at, repeat_at) of a server with a correctness fault, None for a correct one
TextFault = tuple[int | None, int | None]


def text_range(h: int, start: int, end: int, fault: TextFault | None = None) -> str:
    """Text of output tokens [start, end): words separated by single spaces, none before the first."""
    if end <= start:
        return ""
    if fault is None:
        piece = "".join([_SPACED[token_id(h, i)] for i in range(start, end)])
    else:
        d, r = fault
        piece = "".join([_SPACED[wrong_token_id(h, i, d, r)] for i in range(start, end)])
    return piece[1:] if start == 0 else piece


def ids_range(h: int, start: int, end: int, fault: TextFault | None = None) -> list[int]:
    if fault is not None:
        d, r = fault
        return [wrong_token_id(h, i, d, r) for i in range(start, end)]
    return [token_id(h, i) for i in range(start, end)]


def prompt_uniform(h: int, salt: int) -> float:
    """A uniform number in (0, 1) fixed by the prompt hash h (and a salt per use)."""
    return ((_mix(h ^ salt) >> 11) + 0.5) / float(1 << 53)


def eos_position(h: int, lo: int, hi: int) -> int:
    """Where the model would stop by itself: log-uniform in [lo, hi], fixed by the hash.

    Without ignore_eos a request ends after this many tokens (or at max_tokens, whichever is first),
    so short answers happen, and the same prompt always stops at the same place at temperature 0.
    """
    u = (_mix(h ^ 0x5DEECE66D) >> 11) / float(1 << 53)
    if hi <= lo:
        return lo
    return int(round(math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))))


def output_seed(prompt_h: int, temperature: float, seed: int | None, fallback: int) -> int:
    """The hash that drives this request's words: the prompt's at temperature 0, else prompt+seed."""
    if temperature <= 0.0:
        return prompt_h
    s = seed if seed is not None else fallback
    return _mix(prompt_h ^ ((int(s) * 0x2545F4914F6CDD1D) & _MASK64))


def render_chat(messages: Any) -> tuple[str, int]:
    """A chat prompt as a ChatML-like string and its token count.

    Content words count one token each; every message adds 4 template tokens
    (`<|im_start|>`, role, newline, `<|im_end|>`) and the assistant header adds 3.
    """
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    parts: list[str] = []
    n = 3
    for m in messages:
        if not isinstance(m, dict):
            raise ValueError("each message must be an object")
        role = str(m.get("role", "user"))
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        elif content is None:
            content = ""
        content = str(content)
        parts.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
        n += 4 + count_words(content)
    parts.append("<|im_start|>assistant\n")
    return "".join(parts), n
