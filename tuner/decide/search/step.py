"""The search's step-time fit (pure): a decode step's seconds as a weighted mixture of candidate
forms in depth, running batch and verified tokens, from what the tuner measured;
tuner/decide/search/__init__.py states the model and docs/tuner.md "Model-guided search" the forms.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .observe import STEP_REL_FLOOR, FloatArray


@dataclass(frozen=True)
class StepRow:
    k: int
    b: float
    n: int
    queued: bool  # requests waited for a slot at this level
    t: float  # seconds per verify step, as the decode rate shows it


@dataclass(frozen=True)
class StepForm:
    """One candidate shape of the step time, its least-squares fit and its weight among the others.

    t = (t0 + t_k k [+ s (k > 0)] [+ t_kk k^2] [+ m b] + c b n [+ c2 max(0, b n - knee)]
    [+ e (1 - exp(-b n / scale))]) x (1 + q while requests queue). `spec` adds s, what any
    speculation adds (with the baseline's steps in the fit); `per_request` adds m b (each running
    request's own KV read: time is not a function of b n alone); `knee` (tokens verified per step,
    b n) adds a second slope past it (a decode forward is memory-bound, flat in b n, until the GEMMs
    turn compute-bound; on a mixture-of-experts target c2 may be negative: extra tokens stop
    touching new experts); `scale` adds the smooth form of that saturation: on a mixture of experts
    each token of a step routes to experts, and the experts a step must read grow as
    E (1 - (1 - r)^(b n)), steeply while few tokens share them, flat once all are read.
    """

    beta: FloatArray
    cov: FloatArray
    quadratic: bool
    per_request: bool
    knee: float | None
    queue_share: float
    chi2: float
    weight: float = 1.0
    spec: bool = False  # the baseline's decode steps are in the fit: s is what any speculation adds
    scale: float | None = None  # b n at which the saturating term has come 63% of its way

    def features(self, k: float, b: float, n: float) -> FloatArray:
        return step_features(k, b, n, self.terms)

    def t(self, k: int, b: float, n: int, queued: bool = False) -> tuple[float, float]:
        x = self.features(k, b, n)
        mean = float(x @ self.beta)
        sd = math.sqrt(max(float(x @ self.cov @ x), 0.0))
        f = 1.0 + self.queue_share if queued else 1.0
        return mean * f, sd * f

    @functools.cached_property
    def terms(self) -> list[Term]:
        return step_terms(self.quadratic, self.per_request, self.knee, self.spec, self.scale)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.terms]

    @property
    def form(self) -> str:
        return f"({' + '.join(t.text for t in self.terms)}) x (1 + q queued)"


@dataclass(frozen=True)
class Term:
    """One term of a step-time form: its coefficient's name (the log's and `coefficients`'), how
    the form's text writes it, and its value at depth k, running batch b and n verified tokens per
    request. `step_terms` is the one table of them: the fit's features, the names and the text all
    read it, so a new term is added in one place."""

    name: str
    text: str
    value: Callable[[float, float, float], float]


def step_terms(
    quadratic: bool,
    per_request: bool,
    knee: float | None,
    spec: bool = False,
    scale: float | None = None,
) -> list[Term]:
    """The terms of one form, in the order of its coefficients (StepForm's docstring states them)."""
    terms = [Term("t0", "t0", lambda k, b, n: 1.0), Term("t_k", "t_k k", lambda k, b, n: k)]
    if spec:
        terms.append(Term("s", "s [k > 0]", lambda k, b, n: 1.0 if k > 0 else 0.0))
    if quadratic:
        terms.append(Term("t_kk", "t_kk k^2", lambda k, b, n: k * k))
    if per_request:
        terms.append(Term("m", "m b", lambda k, b, n: b))
    terms.append(Term("c", "c b n", lambda k, b, n: b * n))
    if knee is not None:
        at = knee
        terms.append(Term("c2", f"c2 max(0, b n - {at:g})", lambda k, b, n: max(0.0, b * n - at)))
    if scale is not None:
        sc = scale
        terms.append(Term("e", f"e (1 - exp(-b n / {sc:g}))", lambda k, b, n: 1.0 - math.exp(-b * n / sc)))
    return terms


def step_features(k: float, b: float, n: float, terms: Sequence[Term]) -> FloatArray:
    """The terms' values at (k, b, n): one row of the fit's design matrix."""
    kf, bf, nf = float(k), float(b), float(n)
    return np.array([t.value(kf, bf, nf) for t in terms])


@dataclass(frozen=True)
class StepFit:
    """The step time as a weighted mixture of candidate forms (`StepForm`): the straight line in
    depth and verified tokens, the same with a per-request term, a line that turns at a knee of
    verified tokens per step (each knee between measured b n a candidate of its own) and a cost
    that saturates smoothly in them (each scale a candidate of its own). Each form's
    weight is its likelihood on the measured rows with a penalty per coefficient (the Bayesian
    information criterion), so the data pick the shape and, where forms that fit equally well part
    ways (far from the measured depths and batches), the prediction's interval holds them all.
    """

    forms: tuple[StepForm, ...]
    rows: int

    @property
    def main(self) -> StepForm:
        """The form with the most weight (what the log names)."""
        return max(self.forms, key=lambda f: f.weight)

    @property
    def quadratic(self) -> bool:
        return self.main.quadratic

    @property
    def queue_share(self) -> float:
        return self.main.queue_share

    @property
    def chi2(self) -> float:
        return self.main.chi2

    def t(self, k: int, b: float, n: int, queued: bool = False) -> tuple[float, float]:
        """Seconds per step and its standard deviation, over the forms: the spread of their means
        adds to each one's own."""
        parts = [(f.weight, *f.t(k, b, n, queued)) for f in self.forms]
        mean = sum(w * m for w, m, _ in parts)
        var = sum(w * (s * s + (m - mean) ** 2) for w, m, s in parts)
        return mean, max(math.sqrt(max(var, 0.0)), STEP_REL_FLOOR * abs(mean))

    def t_relative(self, k: int, b: float, n: int, queued: bool, refs: Sequence[tuple[int, float, int, bool]]) -> float:
        """Relative standard deviation of t(k, b, n) / t(refs): the step time against the geometric
        mean of the measured configurations `refs` ((k, b, n, queued) each). Errors every one of them
        shares cancel: each form's covariance along the difference of the log-time gradients, and
        the forms' spread of that ratio. At least STEP_REL_FLOOR: a measured step time is never
        known better."""
        if not refs:
            mean, sd = self.t(k, b, n, queued)
            return sd / max(mean, 1e-12)
        logs, var = [], 0.0
        for f in self.forms:
            t_k = max(f.t(k, b, n, queued)[0], 1e-12)
            g = f.features(k, b, n) / (t_k / (1.0 + f.queue_share if queued else 1.0))
            ratio = math.log(t_k)
            for rk, rb, rn, rq in refs:
                t_r = max(f.t(rk, rb, rn, rq)[0], 1e-12)
                g = g - f.features(rk, rb, rn) / (t_r / (1.0 + f.queue_share if rq else 1.0)) / len(refs)
                ratio -= math.log(t_r) / len(refs)
            var += f.weight * max(float(g @ f.cov @ g), 0.0)
            logs.append((f.weight, ratio))
        centre = sum(w * x for w, x in logs)
        var += sum(w * (x - centre) ** 2 for w, x in logs)
        return max(math.sqrt(var), STEP_REL_FLOOR)

    @property
    def form(self) -> str:
        return self.main.form

    def coefficients(self) -> dict[str, float]:
        """The main form's coefficients (seconds), its queue share q and its knee."""
        m = self.main
        out = {name: float(v) for name, v in zip(m.names, m.beta, strict=True)}
        out["q"] = m.queue_share
        if m.knee is not None:
            out["knee"] = m.knee
        if m.scale is not None:
            out["scale"] = m.scale
        return out


QUEUE_SHARES = tuple(i / 100 for i in range(0, 51))
MAX_KNEES = 12  # at most this many knee candidates (spread over the measured b n)


def _column_sizes(x: FloatArray) -> FloatArray:
    """Each coefficient's typical feature size over the rows (the median of its non-zero values, 1
    where it is zero everywhere): what the weak priors of `_solve_step` are scaled by. The same at
    every queue share, so worked out once per form."""
    out = np.ones(x.shape[1])
    for col in range(x.shape[1]):
        nonzero = np.abs(x[:, col])[np.abs(x[:, col]) > 0]
        if nonzero.size:
            out[col] = float(np.median(nonzero))
    return out


def _solve_step(
    rows: Sequence[StepRow], x: FloatArray, sizes: FloatArray, noise_rel: float, share: float
) -> tuple[FloatArray, FloatArray, float]:
    """Weighted least squares of the step time at one queue share: (beta, the augmented design
    matrix, chi^2); `step_cov` turns the matrix into beta's covariance, worked out only for the
    share that fits best. `x` is the form's design matrix over `rows` (`step_features`) and
    `sizes` its `_column_sizes`, the same at every share."""
    depths = sorted({r.k for r in rows if r.k > 0})
    t = np.array([r.t / (1.0 + share) if r.queued else r.t for r in rows])
    sigma = max(noise_rel, STEP_REL_FLOOR)
    w = 1.0 / (sigma * t)
    a = x * w[:, None]
    y = t * w
    p = x.shape[1]
    # a weak prior on every coefficient: zero, give or take ten times its typical size
    prior_rows = np.diag(sizes / (10.0 * float(np.median(t))))
    prior_y = np.zeros(p)
    if len(depths) == 1:
        k1 = depths[0]
        # the fixed cost at k1: the intercept of t against b n at that depth
        at = [i for i, r in enumerate(rows) if r.k == k1]
        bn = np.array([rows[i].b * rows[i].n for i in at])
        tk1 = t[at]
        fixed = float(np.polyfit(bn, tk1, 1)[1]) if len(set(bn.tolist())) > 1 else float(np.mean(tk1)) / 2
        fixed = max(fixed, 1e-6)
        m = fixed / (2 * k1)
        sd = fixed / (2 * math.sqrt(3) * k1)
        e = np.zeros(p)
        e[1] = 1.0 / sd
        prior_rows = np.vstack([prior_rows, e])
        prior_y = np.append(prior_y, m / sd)
    aa = np.vstack([a, prior_rows])
    yy = np.concatenate([y, prior_y])
    solution = np.linalg.lstsq(aa, yy, rcond=None)
    beta: FloatArray = np.asarray(solution[0], dtype=np.float64)
    resid = a @ beta - y
    return beta, aa, float(resid @ resid)


def step_cov(aa: FloatArray) -> FloatArray:
    """The covariance of a `_solve_step` fit from its augmented design matrix (before the chi^2
    scaling `_fit_form` applies)."""
    return np.asarray(np.linalg.pinv(aa.T @ aa), dtype=np.float64)


def _spread(values: list[float]) -> list[float]:
    """At most MAX_KNEES of `values`, spread evenly over them."""
    if len(values) <= MAX_KNEES:
        return values
    idx = np.linspace(0, len(values) - 1, MAX_KNEES).round().astype(int)
    return [values[i] for i in sorted(set(idx.tolist()))]


def knee_candidates(rows: Sequence[StepRow]) -> list[float]:
    """Where a second slope may start: midway between consecutive measured b n, with at least two
    distinct b n on each side (a slope needs two points); at most MAX_KNEES of them, spread evenly."""
    bns = sorted({round(r.b * r.n, 6) for r in rows})
    return _spread([(lo + hi) / 2 for lo, hi in zip(bns[1:-2], bns[2:-1], strict=True)])


def scale_candidates(rows: Sequence[StepRow]) -> list[float]:
    """Where a saturating cost may turn: the scale of the smooth form at each measured b n below
    the largest and the geometric midpoints between them (a saturation nobody measured on both
    sides of is a straight line or a constant, which the other forms hold); at most MAX_KNEES."""
    inner = [bn for bn in sorted({round(r.b * r.n, 6) for r in rows})[:-1] if bn > 0]
    mids = [math.sqrt(lo * hi) for lo, hi in zip(inner, inner[1:], strict=False)]
    return _spread(sorted({*inner, *mids}))


def _fit_form(
    rows: Sequence[StepRow],
    quadratic: bool,
    per_request: bool,
    knee: float | None,
    noise_rel: float,
    scale: float | None = None,
) -> StepForm:
    shares = QUEUE_SHARES if any(r.queued for r in rows) and any(not r.queued for r in rows) else (0.0,)
    spec = any(r.k == 0 for r in rows) and any(r.k > 0 for r in rows)
    terms = step_terms(quadratic, per_request, knee, spec, scale)
    x = np.array([step_features(r.k, r.b, r.n, terms) for r in rows])
    sizes = _column_sizes(x)
    best: tuple[float, float, FloatArray, FloatArray] | None = None
    for share in shares:
        beta, aa, chi2 = _solve_step(rows, x, sizes, noise_rel, share)
        if best is None or chi2 < best[0]:
            best = (chi2, share, beta, aa)
    assert best is not None
    chi2, share, beta, aa = best
    cov = step_cov(aa)
    dof = len(rows) - len(beta) - (1 if len(shares) > 1 else 0)
    if dof > 0:
        cov = cov * max(1.0, chi2 / dof)
    return StepForm(beta, cov, quadratic, per_request, knee, share, chi2, spec=spec, scale=scale)


def fit_step_time(rows: Sequence[StepRow], *, quadratic: bool = True, noise_rel: float) -> StepFit | None:
    """Least squares on relative residuals, with priors only where the data say nothing, for every
    candidate form; the forms weighted by the Bayesian information criterion.

    With one measured depth, t0 and t_k are not separable: the prior puts t_k uniformly between 0
    and the whole fixed cost over k (both costs are non-negative). Every coefficient also has a very
    weak prior (ten times its typical size), so a direction the data never explored keeps a wide
    interval instead of a confident zero. `quadratic` adds, once three or more speculative depths
    are measured, each form with a fixed cost that bends with depth (t_kk k^2) as a candidate too.
    """
    if not rows:
        return None
    if quadratic and len({r.k for r in rows if r.k > 0}) < 3:
        quadratic = False
    specs: list[tuple[bool, bool, float | None, float | None, float]] = []
    for quad in (False, True) if quadratic else (False,):
        specs.append((quad, False, None, None, 1.0))
        if len({r.b for r in rows}) > 1 and len({r.k for r in rows}) > 1:
            specs.append((quad, True, None, None, 1.0))
            knees = knee_candidates(rows)
            specs += [(quad, True, knee, None, 1.0 / len(knees)) for knee in knees]  # the hinge family: one prior unit
            scales = scale_candidates(rows)
            specs += [(quad, True, None, sc, 1.0 / len(scales)) for sc in scales]  # the saturating family: one unit
    forms = [(_fit_form(rows, quad, per, knee, noise_rel, scale), prior) for quad, per, knee, scale, prior in specs]
    n = len(rows)
    scores = [f.chi2 + len(f.beta) * math.log(max(n, 2)) - 2 * math.log(prior) for f, prior in forms]
    low = min(scores)
    raw = [math.exp(-(s - low) / 2) for s in scores]
    total = sum(raw)
    weighted = tuple(dataclasses.replace(f, weight=w / total) for (f, _), w in zip(forms, raw, strict=True))
    kept = tuple(f for f in weighted if f.weight > 1e-4)
    norm = sum(f.weight for f in kept)
    return StepFit(forms=tuple(dataclasses.replace(f, weight=f.weight / norm) for f in kept), rows=n)
