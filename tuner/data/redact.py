"""The API key: where the tuner reads it, and how it keeps it out of everything it writes.

The key comes from the controller's environment (`SGLANG_API_KEY`, else `OPENAI_API_KEY`, which
SGLang's own bench_serving reads, docs/reference/sglang.md §4.1). The sglang_server role reads the same
variable on the controller (docs/architecture.md "Roles"), so it never travels as an extra var.
Every file the tuner writes and every line it prints passes through `Redactor.scrub`.
"""

from __future__ import annotations

import os
from typing import Any

from sglang_utils import sglang_secrets

API_KEY_ENV = "SGLANG_API_KEY"
API_KEY_FALLBACK_ENV = "OPENAI_API_KEY"
MASK = sglang_secrets.MASK  # one mask for the module, the launcher and the tuner


def api_key_from_env(environ: dict[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    for name in (API_KEY_ENV, API_KEY_FALLBACK_ENV):
        value = env.get(name)
        if value:
            return value
    return None


class Redactor:
    """Replaces every occurrence of the secrets in strings and nested JSON-like data."""

    def __init__(self, secrets: list[str | None] | None = None):
        # Very short "secrets" would shred ordinary text; an API key that short is no secret. Each
        # secret is masked in every spelling a server's answer or log line can carry it in (raw,
        # a Python repr's, JSON-escaped, URL-encoded: sglang_secrets.secret_forms, the launcher's
        # own list), the longest first so that a form holding another is masked whole.
        forms = {f for s in (secrets or []) if s and len(s) >= 4 for f in sglang_secrets.secret_forms(s)}
        self.secrets = sorted(forms, key=len, reverse=True)

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def scrub(self, text: str) -> str:
        for s in self.secrets:
            if s in text:
                text = text.replace(s, MASK)
        return text

    def scrub_bytes(self, data: bytes) -> bytes:
        for s in self.secrets:
            b = s.encode()
            if b in data:
                data = data.replace(b, MASK.encode())
        return data

    def scrub_obj(self, obj: Any) -> Any:
        if not self.secrets:
            return obj
        if isinstance(obj, str):
            return self.scrub(obj)
        if isinstance(obj, dict):
            return {self.scrub_obj(k): self.scrub_obj(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            return [self.scrub_obj(v) for v in obj]
        return obj
