"""Model-guided search: which configuration to deploy next, and when to stop (pure).

Every configuration costs a server start, so `sweep --search model` deploys only those that could
still change an answer. After each measurement it fits, from what the tuner itself measured
(never from the emulator's profile), three trends that speculative decoding is known to follow,
predicts every configuration not yet measured at every level with an interval, and deploys the
one with the best chance to win a level beyond the noise (or to top the recommendation). It stops
when no configuration left has a fair chance to. docs/tuner.md "Model-guided search" states the
model and its assumptions; in short:

- Acceptance per position. A verify step of a depth-k chain emits 1 + sum_{i<=k} P_i tokens on
  average, where P_i is the chance that the first i drafts are all accepted, P_i = a_1 ... a_i.
  The per-position acceptance a_j is fitted as logit(a_j) = u + v (j - 1), so a draft that gets
  worse further out (v < 0) is not assumed away; with one measured depth v has a prior centred on 0.
  Where the server sends per-request acceptance histograms (verify steps that accepted exactly n
  drafts), P_i up to the deepest measured chain is read from them and the trend only carries on
  beyond it; else the fit is to the measured tokens per verify step, from SGLang's `spec_verify_ct`
  (completion tokens / verify steps, the first token, which comes from prefill, taken out).
- Step time. A decode step of depth k with b running requests, each verifying n tokens, is a GPU
  forward: flat in b n while it is memory-bound, steeper past a knee, plus each request's KV read.
  Several forms of t = t0 + t_k k [+ s (k > 0)] [+ t_kk k^2] [+ m b] + c b n
  [+ c2 max(0, b n - knee)] [+ e (1 - exp(-b n / scale))] (a cost that saturates, as the
  experts a mixture-of-experts step reads do) are fitted by least squares on the measured tokens-per-step /
  per-request decode rate (decode tokens over their seconds, summed over the requests: the
  harmonic mean of their rates, as tokens per step is a ratio of sums; the baseline's decode
  steps included) and weighted by the Bayesian
  information criterion; a prediction is their mixture, whose interval holds the forms' spread.
- Capacity. The KV pool and the running-request limit that the server printed at start-up
  (the deploy records) are close to linear in k; a depth whose pool (or limit) is predicted empty
  is not deployed.

Per level, the aggregate throughput follows from those through a closed-loop account of the
benchmark (C clients, the server running min(C, limit) at a time, over the span the client
measures: up to the moment the loop stops sending), scaled by how the measured
configurations at that level compared with the same account (of the pooled acceptance, so a
level's prompts that draft better or worse are in its scale). Intervals combine the fits'
uncertainties relative to those measured configurations (what they share cancels), that
calibration's spread and the measurement noise. A measurement outside the interval predicted for it,
with the new deployment's own restart draw added (observe.py DEPLOY_REL_SD: nothing measured before
it shows that draw) and the deployment's levels held to it together (model.py `family_z`), is a
misfit: it is reported, later intervals are widened by the miss in units
of the interval, and the step-time forms are weighed afresh with it.

A configuration is deployed while it has a fair chance to win a level beyond the noise, to top the
workload recommendation beyond its own margin, or, when a per-batch-size schedule follows the
sweep, to change the chain that schedule would pin at a level a tree wins.

The package in the order the search works: observe.py (what was measured), fits.py (the trends in
acceptance, capacity and first-token time), step.py (the step time's forms), model.py (the closed-loop account, calibration, misfits), decide.py (the policy), text.py (the
progress log's words).
"""
