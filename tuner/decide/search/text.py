"""The search in words: the progress log's lines for a prediction and a misfit."""

from __future__ import annotations

import math

from ...data.prediction import Prediction
from ...measure.stats import readable as n
from .model import Misfit

# -- in words --------------------------------------------------------------------------------------


def prediction_text(pred: Prediction | None) -> str:
    """The prediction behind a deployment, for the progress log: the level it is most likely to win."""
    if pred is None or not pred.levels:
        return ""
    lp = max(pred.levels, key=lambda x: (x.chance, -x.concurrency))
    b = lp.output_tok_s
    return f"; predicted at C={lp.concurrency}: {b.mean:,.0f} tok/s ({b.lo:,.0f}-{b.hi:,.0f})"


def misfit_text(m: Misfit) -> str:
    b = m.predicted
    nums = tuple(x for x in (m.measured, b.lo, b.hi, b.mean) if math.isfinite(x))
    return (
        f"{m.what} measured {n(m.measured, *nums)}, outside its predicted interval "
        f"{b.interval_text(lambda x: n(x, *nums))} (predicted {n(b.mean, *nums)}, {m.rel_error:+.1%})"
    )
