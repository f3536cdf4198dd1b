"""Deterministic synthetic prompts of an exact length.

Why synthetic: the tuner compares configurations, so every configuration must see the same
prompts; a dataset download is neither possible on air-gapped hosts nor needed.

Why distinct per request: identical prompts would hit SGLang's radix (prefix) cache and make
prefill, hence TTFT, depend on request order rather than on the configuration.

Length: `input_len` whitespace-separated words, which is how the emulator counts prompt tokens;
for the native `/generate` endpoint the client can send `input_ids` instead, which a real SGLang
takes as exactly `input_len` tokens (docs/reference/sglang.md §3.3 lists the native request).
"""

from __future__ import annotations

import random

# Short common words: a real tokenizer maps most of them to a single token, which keeps the
# text prompts of the OpenAI endpoints close to `input_len` tokens on a real server too.
_WORDS = (
    "the of and to in is was for on are with as at be by this had not but from or have an they "
    "which one you were all we her she there been if more when will would who so no time can "
    "said each about how up out them then many some these two way could like other into has "
    "look more write go see number no way could people my than first water been call who oil "
    "its now find long down day did get come made may part over new sound take only little work "
    "know place year live me back give most very after thing our just name good sentence man "
    "think say great where help through much before line right too mean old any same tell boy "
    "follow came want show also around form three small set put end does another well large must "
    "big even such because turn here why ask went men read need land different home us move try "
    "kind hand picture again change off play spell air away animal house point page letter mother "
    "answer found study still learn should world high every near add food between own below "
    "country plant last school father keep tree never start city earth eye light thought head "
    "under story saw left few while along might close something seem next hard open example begin "
    "life always those both paper together got group often run important until children side feet "
    "car mile night walk white sea began grow took river four carry state once book hear stop "
    "without second late miss idea enough eat face watch far real almost let above girl sometimes "
    "mountain cut young talk soon list song being leave family"
).split()

# A token-id range that is ordinary vocabulary in every large tokenizer we target (Qwen's
# vocabulary is ~150k; ids below 256 are byte/special tokens in many tokenizers).
_ID_LOW, _ID_HIGH = 1000, 30000


def prompt_words(index: int, input_len: int, seed: int = 0) -> list[str]:
    """Request `index`'s prompt as `input_len` words; same arguments, same words."""
    rng = random.Random(f"sgt-prompt:{seed}:{index}")
    # A distinct leading tag breaks shared prefixes between requests from the first token on.
    words = [f"r{seed}x{index}"] if input_len > 0 else []
    words.extend(rng.choice(_WORDS) for _ in range(max(0, input_len - 1)))
    return words


def prompt_text(index: int, input_len: int, seed: int = 0) -> str:
    return " ".join(prompt_words(index, input_len, seed))


def prompt_ids(index: int, input_len: int, seed: int = 0) -> list[int]:
    """Request `index`'s prompt as `input_len` token ids (native `/generate` only)."""
    rng = random.Random(f"sgt-ids:{seed}:{index}")
    return [rng.randrange(_ID_LOW, _ID_HIGH) for _ in range(input_len)]
