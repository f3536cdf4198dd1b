"""The correctness gate's long outputs as the emulator serves them, simulated (for the drift rule's
test in tests/tuner/test_verify_rules.py and bench/drift_rule.py, which import it)."""

from __future__ import annotations

import random
from collections.abc import Sequence


def drawn_output(rng: random.Random, alphas: Sequence[float], tokens: int = 384) -> list[tuple[int, int]]:
    """One long output's (new tokens, new verify passes) increments, a pass at a time: each verify
    pass accepts a chain of drafts, position j with probability alphas[j] given the ones before,
    drawn afresh every pass (tuner/emulator/engine.py)."""
    steps: list[tuple[int, int]] = []
    done = 0
    while done < tokens:
        n = 1
        for a in alphas:
            if rng.random() >= a:
                break
            n += 1
        n = min(n, tokens - done)
        steps.append((n, 1))
        done += n
    return steps
