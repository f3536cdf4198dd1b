"""How many input tokens each request prefills in one prefill batch: SGLang's PrefillAdder budgets.

SGLang's scheduler (managers/scheduler.py `_get_new_batch_prefill_raw`, 0.5.9-0.5.23) builds each
prefill batch with a fresh PrefillAdder (managers/schedule_policy.py) given two budgets:
`rem_input_tokens` starts at --max-prefill-tokens (ServerArgs default 16384) and `rem_chunk_tokens`
at --chunked-prefill-size (None when it is -1). A request that was cut in the batch before goes
first (`add_chunked_req`: the next min(what is left, rem_chunk_tokens) tokens), then waiting
requests in order (`add_one_req`): a request that fits rem_chunk_tokens joins whole, a longer one
is cut to rem_chunk_tokens and becomes the chunked request; each charges both budgets, and the
batch closes when either reaches 0 (`budget_state`). The page size is 1 here (tokens, not pages).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class PrefillBudget:
    """One prefill batch's budgets (PrefillAdder.__init__: rem_input_tokens, rem_chunk_tokens)."""

    rem_input: int  # --max-prefill-tokens less what the batch holds
    rem_chunk: int | None  # --chunked-prefill-size less what the batch holds; None: chunking off
    # whether add_one_req's input cap holds with chunking on (versions.prefill_input_cap_chunked)
    input_cap_chunked: bool = True

    @classmethod
    def start(cls, max_prefill_tokens: int, chunked_prefill_size: int, input_cap_chunked: bool) -> PrefillBudget:
        # 0.5.9 scheduler.py:765-766: `if self.chunked_prefill_size <= 0: self.chunked_prefill_size = None`
        chunk = chunked_prefill_size if chunked_prefill_size > 0 else None
        return cls(max_prefill_tokens, chunk, input_cap_chunked)

    def is_open(self) -> bool:
        """`budget_state` is CONTINUE: neither budget spent (0.5.9 schedule_policy.py:494-508)."""
        return self.rem_input > 0 and (self.rem_chunk is None or self.rem_chunk > 0)

    def _charge(self, tokens: int) -> int:
        # _update_prefill_budget: `self.rem_input_tokens -= extend_input_len` and, with chunking,
        # `self.rem_chunk_tokens -= extend_input_len` (0.5.9 schedule_policy.py:518-523)
        self.rem_input -= tokens
        if self.rem_chunk is not None:
            self.rem_chunk -= tokens
        return tokens

    def continue_chunked(self, left: int) -> int:
        """The next chunk of the request cut in the batch before (add_chunked_req, 0.5.9
        schedule_policy.py:591-616: `min(req.extend_input_len, _rem_tokens)`; it always goes in)."""
        return self._charge(left if self.rem_chunk is None else min(left, self.rem_chunk))

    def admit(self, input_tokens: int, batch_has_reqs: bool) -> int | None:
        """Tokens a waiting request prefills in this batch (its whole input or a first chunk), or None
        when it does not join and the batch closes (add_one_req returns OTHER)."""
        capped = self.rem_chunk is None or self.input_cap_chunked
        # 0.5.9 schedule_policy.py:747 `real_input_tokens >= self.rem_input_tokens and
        # len(self.can_run_list) != 0` -> OTHER (0.5.23 schedule_policy.py:1627-1633: chunking off only)
        if capped and batch_has_reqs and input_tokens >= self.rem_input:
            return None
        if self.rem_chunk is None or input_tokens <= self.rem_chunk:
            return self._charge(input_tokens)
        # chunked prefill: `trunc_len = self.rem_chunk_tokens // self.page_size * self.page_size`,
        # OTHER when it is 0 (0.5.9 schedule_policy.py:801-804)
        if self.rem_chunk <= 0:
            return None
        return self._charge(self.rem_chunk)
