"""Noise of a known size, for testing statistics against it (docs/emulator.md "Noise").

Two multiplicative factors on the duration of every batch (prefill and decode), both log-normal
with mean 1 and a coefficient of variation the profile sets (both 0 = off, the default):

* restart-to-restart (`noise_restart_cv`): drawn once when the server starts, so every
  measurement of one deployment shares it and a redeploy draws a new one;
* run-to-run (`noise_run_cv`): drawn again at the start of each busy period (the first batch
  after the scheduler was idle for at least `noise_idle_gap_s`), and every `noise_window_s`
  seconds within a busy period when that is > 0. A closed-loop benchmark idles between its
  levels, so each level (and each repeat) runs under its own draw.

The draws come from `noise_seed` (profile key, or `--emulator-noise-seed`): the same seed gives the
same sequence of factors, so a test can set the noise and know its size. Without a seed the
factors are drawn from the operating system's entropy, so two starts differ as two real starts do.
"""

from __future__ import annotations

import math
import os
import random


def lognormal_mean_one(rng: random.Random, cv: float) -> float:
    """A draw with mean 1 and coefficient of variation `cv` (0 -> exactly 1)."""
    if cv <= 0.0:
        return 1.0
    sigma2 = math.log1p(cv * cv)
    return math.exp(rng.gauss(-sigma2 / 2.0, math.sqrt(sigma2)))


class Noise:
    """The factor a batch's duration is multiplied by; `factor(now)` is called once per batch."""

    def __init__(
        self,
        run_cv: float = 0.0,
        restart_cv: float = 0.0,
        seed: int | None = None,
        window_s: float = 0.0,
        idle_gap_s: float = 0.5,
    ) -> None:
        self.run_cv = max(0.0, run_cv)
        self.restart_cv = max(0.0, restart_cv)
        self.window_s = max(0.0, window_s)
        self.idle_gap_s = max(0.0, idle_gap_s)
        self.seed = seed
        base = seed if seed is not None else int.from_bytes(os.urandom(8), "little")
        self._restart_rng = random.Random(f"restart:{base}")
        self._run_rng = random.Random(f"run:{base}")
        self.restart_factor = lognormal_mean_one(self._restart_rng, self.restart_cv)
        self.run_factor = 1.0
        self.draws = 0  # run-to-run draws so far (busy periods and windows)
        self._window_start: float | None = None
        self._last_end: float | None = None

    @property
    def enabled(self) -> bool:
        return self.run_cv > 0.0 or self.restart_cv > 0.0

    def factor(self, start: float) -> float:
        """The multiplier for a batch starting at `start` (the scheduler's clock)."""
        if not self.enabled:
            return 1.0
        if self.run_cv > 0.0:
            busy = self._last_end is not None and start - self._last_end < self.idle_gap_s
            window_over = (
                self.window_s > 0.0 and self._window_start is not None and start - self._window_start >= self.window_s
            )
            if not busy or window_over or self._window_start is None:
                self.run_factor = lognormal_mean_one(self._run_rng, self.run_cv)
                self._window_start = start
                self.draws += 1
        return self.restart_factor * self.run_factor

    def ended(self, end: float) -> None:
        """A batch ended at `end`: the next one within noise_idle_gap_s continues the busy period."""
        self._last_end = end

    def describe(self) -> dict[str, object]:
        return {
            "run_cv": self.run_cv,
            "restart_cv": self.restart_cv,
            "seed": self.seed,
            "window_s": self.window_s,
            "restart_factor": round(self.restart_factor, 6),
            "run_factor": round(self.run_factor, 6),
            "run_draws": self.draws,
        }
