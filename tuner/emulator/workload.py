"""How the request itself moves acceptance: sampling (temperature, top_p) and the prompt's content.

The profile's `alpha` table gives the per-position acceptance of the reference workload at each
temperature (the seed's: greedy, ignore_eos, the tuner's synthetic prompts). A request differs from
that reference in two ways the emulator models, each by a documented, deterministic rule
(docs/emulator.md "Acceptance"):

* **top_p.** Nucleus sampling drops the tail of the distribution; with a small top_p the sampled
  token is nearly the greedy one. The request's alpha moves from alpha(T) towards alpha(0) by the
  share of the nucleus that is cut: alpha = alpha(0) + (alpha(T) - alpha(0)) * top_p**top_p_exponent.
  top_p = 1 (no nucleus) leaves alpha(T); greedy (T = 0) ignores top_p.
* **Prompt content.** A draft head predicts the target's next token from the context; a context
  that repeats itself (natural language, code, templates) gives it more to go on than random tokens
  do. The prompt's self-repetition is measured as Herdan's C, log(distinct tokens) / log(tokens),
  which is about constant with length for natural text (0.92-0.94 for English prose) and 1.0 for
  tokens that never repeat; the score is s = 1 - C. The request's miss probability is the
  reference's times exp(-prompt_sensitivity * (s - prompt_score_ref)): a prompt that repeats itself
  more than the reference accepts more, a prompt that repeats less (random tokens when the
  reference is natural text) accepts less. Prompts shorter than prompt_min_tokens carry too little
  evidence and get the reference's alpha. Tokens are whitespace-separated words of the (rendered)
  prompt text, or the ids of `input_ids`.

Profile keys (defaults in profile.py): prompt_sensitivity, prompt_score_ref, prompt_min_tokens,
top_p_exponent, alpha_max. With `alpha_by_position` the same two rules act on each position's
acceptance, and `alpha_spread` adds one logit offset per prompt (request_acceptance).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from statistics import NormalDist
from typing import TYPE_CHECKING

from .model import effective_alpha
from .tokens import prompt_uniform

if TYPE_CHECKING:
    from .profile import Profile


def content_score(tokens: Sequence[Hashable]) -> float | None:
    """s = 1 - log(distinct) / log(n) for the prompt's tokens (None below two tokens)."""
    n = len(tokens)
    if n < 2:
        return None
    distinct = len(set(tokens))
    return 1.0 - math.log(distinct) / math.log(n)


def sampled_alpha(p: Profile, temperature: float, top_p: float = 1.0) -> float:
    """alpha(T) from the profile's table, moved towards alpha(0) by top_p < 1."""
    t = max(0.0, float(temperature))
    a_t = p.alpha_at(t)
    if t <= 0.0:
        return a_t
    q = min(1.0, max(0.0, float(top_p)))
    if q >= 1.0:
        return a_t
    a_0 = p.alpha_at(0.0)
    return a_0 + (a_t - a_0) * math.pow(q, p.top_p_exponent)


def content_factor(p: Profile, score: float | None, n_tokens: int) -> float:
    """The multiplier on the miss probability (1 - alpha) for a prompt with this score."""
    if score is None or n_tokens < p.prompt_min_tokens or p.prompt_sensitivity == 0.0:
        return 1.0
    # held inside exp's range: a steep sensitivity far from the reference saturates, not overflows
    return math.exp(max(-700.0, min(700.0, -p.prompt_sensitivity * (score - p.prompt_score_ref))))


def request_alpha(
    p: Profile,
    temperature: float,
    top_p: float = 1.0,
    prompt_tokens: Sequence[Hashable] | None = None,
) -> float:
    """The per-position acceptance of one request (before the topk rule of model.effective_alpha)."""
    alpha = sampled_alpha(p, temperature, top_p)
    if prompt_tokens is not None:
        factor = content_factor(p, content_score(prompt_tokens), len(prompt_tokens))
        alpha = 1.0 - (1.0 - alpha) * factor
    return min(max(alpha, 0.0), p.alpha_max)


def shift_logit(alpha: float, offset: float) -> float:
    """sigmoid(logit(alpha) + offset): acceptance moved on the logit scale (alpha_spread's
    per-request difficulty, the accept-drift fault), so it stays inside (0, 1) whatever the offset."""
    if offset == 0.0 or alpha <= 0.0 or alpha >= 1.0:
        return alpha
    z = math.log(alpha / (1.0 - alpha)) + offset
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


_SPREAD_SALT = 0x3C6EF372FE94F82B
_STD_NORMAL = NormalDist()


def spread_offset(p: Profile, prompt_h: int | None) -> float:
    """The request's difficulty d ~ Normal(0, alpha_spread) on the logit scale, fixed by its prompt:
    the same prompt always gets the same d (docs/emulator.md "Acceptance that differs from request to request")."""
    if not p.alpha_spread or prompt_h is None:
        return 0.0
    return p.alpha_spread * _STD_NORMAL.inv_cdf(prompt_uniform(prompt_h, _SPREAD_SALT))


def request_acceptance(
    p: Profile,
    temperature: float,
    top_p: float = 1.0,
    prompt_tokens: Sequence[Hashable] | None = None,
    *,
    topk: int = 1,
    positions: int = 1,
    prompt_h: int | None = None,
    offset: float = 0.0,
) -> float | tuple[float, ...]:
    """One request's acceptance, after the topk rule: one alpha for every position (a profile
    without `alpha_by_position`, as before), or a_1..a_positions.

    Each position's acceptance follows request_alpha's rules (temperature, top_p, prompt content,
    alpha_max); then the logit moves by the prompt's difficulty (spread_offset) plus `offset` (the
    accept-drift fault); last, a level is accepted when any of topk candidates is (effective_alpha).
    """
    d = offset + spread_offset(p, prompt_h)
    if p.alpha_by_position is None:
        a = request_alpha(p, temperature, top_p, prompt_tokens)
        if d:
            a = min(shift_logit(a, d), p.alpha_max)
        return effective_alpha(a, topk)
    t = max(0.0, float(temperature))
    alphas = p.alphas_at(t, positions)
    q = min(1.0, max(0.0, float(top_p)))
    if t > 0.0 and q < 1.0:
        greedy = p.alphas_at(0.0, positions)
        w = q**p.top_p_exponent
        alphas = [a0 + (a - a0) * w for a, a0 in zip(alphas, greedy, strict=True)]
    factor = 1.0
    if prompt_tokens is not None:
        factor = content_factor(p, content_score(prompt_tokens), len(prompt_tokens))
    out = []
    for a in alphas:
        a = min(max(1.0 - (1.0 - a) * factor, 0.0), p.alpha_max)
        if d:
            a = min(shift_logit(a, d), p.alpha_max)
        out.append(effective_alpha(a, topk))
    return tuple(out)
