"""The gate's fixed prompt set: the first rows of the sweep's dataset (else the shipped one), in
file order, so every configuration and the baseline get the very same prompts; each prompt's id is
`<dataset name>:<line>`, which names it in the report's example."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglang_utils import sglang_verify as rules

from ..spec.workload import SHIPPED, Dataset, load_dataset


@dataclass(frozen=True)
class PromptSet:
    name: str
    short: tuple[dict[str, str], ...]  # [{"id", "text"}]: short greedy continuations (exact match)
    long: tuple[dict[str, str], ...]  # long outputs: loops and acceptance drift
    settings: dict[str, Any]

    @property
    def sha256(self) -> str:
        return str(rules.prompt_set_hash([*self.short, *self.long]))


def settings(
    short_prompts: int | None = None,
    short_tokens: int | None = None,
    long_prompts: int | None = None,
    long_tokens: int | None = None,
) -> dict[str, Any]:
    """The gate's request sizes (defaults: sglang_verify.DEFAULT_SETTINGS)."""
    out = dict(rules.DEFAULT_SETTINGS)
    for key, value in (
        ("short_prompts", short_prompts),
        ("short_tokens", short_tokens),
        ("long_prompts", long_prompts),
        ("long_tokens", long_tokens),
    ):
        if value is not None:
            out[key] = int(value)
    return out


def prompt_set(dataset: Dataset | None, conf: dict[str, Any]) -> PromptSet:
    """The first `short_prompts` rows for the short checks and the next `long_prompts` for the long
    run (wrapping around a small dataset). Each request has its own id: a row used again (a dataset
    smaller than the set) is `name:line#2`, ..., since the gate matches answers to the baseline by
    id, and one id for two requests checked only the last answer against both."""
    ds = dataset if dataset is not None and dataset.loaded else load_dataset(str(SHIPPED))
    rows = list(ds.prompts)
    name = ds.name
    uses: dict[int, int] = {}

    def ident(line: int) -> str:
        uses[line] = uses.get(line, 0) + 1
        return f"{name}:{line}" + (f"#{uses[line]}" if uses[line] > 1 else "")

    def pick(start: int, n: int) -> tuple[dict[str, str], ...]:
        return tuple(
            {"id": ident(rows[(start + i) % len(rows)].line), "text": rows[(start + i) % len(rows)].text}
            for i in range(n)
        )

    ns, nl = int(conf["short_prompts"]), int(conf["long_prompts"])
    return PromptSet(name=name, short=pick(0, ns), long=pick(ns, nl), settings=dict(conf))
