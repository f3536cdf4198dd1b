"""One generation request as the batch scheduler (engine.py) sees it: counts and times, not text."""

from __future__ import annotations

import math
from collections.abc import Callable


class Request:
    """One generation request as the scheduler sees it (counts, not text)."""

    __slots__ = (
        "rid",
        "input_tokens",
        "max_new_tokens",
        "stop_at",
        "kv_need",
        "ila",
        "alpha",
        "survival",
        "arrival",
        "ready_at",
        "admitted_at",
        "first_token_at",
        "finished_at",
        "generated",
        "prefilled",
        "verify_ct",
        "accepted_drafts",
        "hist",
        "finished",
        "finish_reason",
        "aborted",
        "notify",
        "internal",
        "user",
        "stream",
        "dp_rank",
    )

    def __init__(
        self,
        rid: str,
        input_tokens: int,
        max_new_tokens: int,
        *,
        alpha: float,
        stop_at: int | None = None,
        notify: Callable[[Request], None] | None = None,
        internal: bool = False,
        user: object = None,
        acceptance: tuple[float, ...] | None = None,
    ) -> None:
        self.rid = rid
        self.input_tokens = max(1, int(input_tokens))
        self.max_new_tokens = max(1, int(max_new_tokens))
        # stop_at: where the model emits EOS by itself (None with ignore_eos)
        self.stop_at = stop_at
        self.alpha = alpha
        # 1/log(alpha) for the inverse-CDF draw; 0 => always 1 token, huge negative => always k+1
        if alpha <= 0.0:
            self.ila = 0.0
        elif alpha >= 1.0:
            self.ila = -1e18
        else:
            self.ila = 1.0 / math.log(alpha)
        # Acceptance by draft position (a_1, a_2, ...): survival[j-1] = P(drafts 1..j all accepted)
        # = a_1 * ... * a_j; None when every position has `alpha` (the geometric draw above).
        self.survival: list[float] | None = None
        if acceptance is not None:
            surv, prod = [], 1.0
            for a in acceptance:
                prod *= a
                surv.append(prod)
            self.survival = surv
        self.kv_need = 0
        self.arrival = 0.0
        self.ready_at = 0.0
        self.admitted_at = -1.0
        self.first_token_at = -1.0
        self.finished_at = -1.0
        self.generated = 0
        self.prefilled = 0  # input tokens prefilled so far (a long input goes in chunks)
        self.verify_ct = 0
        self.accepted_drafts = 0
        # accepted tokens per verify step, by count - 1 (sized at prefill on a speculating server)
        self.hist: list[int] = []
        self.finished = False
        self.finish_reason = ""  # "length" | "stop" | "abort"
        self.aborted = False
        self.notify = notify
        self.internal = internal  # health checks: not counted in metrics
        self.user = user
        self.stream = False  # a streamed response (0.5.23 labels the token counters is_streaming)
        self.dp_rank = 0  # the DP replica serving it (dp.py)

    @property
    def limit(self) -> int:
        """Tokens this request will produce in total."""
        if self.stop_at is not None and self.stop_at < self.max_new_tokens:
            return self.stop_at
        return self.max_new_tokens
