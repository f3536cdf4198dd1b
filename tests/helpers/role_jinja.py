"""One way for tests to render a role's Jinja expressions (a `vars/main.yml` rule, a task's
condition or message) as Ansible renders them, without a play: native types, and the few builtin
filters and tests the roles use, each written once here.

A play costs about a second of the controller's CPU; the rules these tests pin down are pure
expressions, so they are rendered directly. What a play adds (the variables' precedence, the
collection's plugin loading) is covered by the tests that run the roles.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jinja2
from jinja2.nativetypes import NativeEnvironment


def _bool(value: Any) -> bool:
    """Ansible's `bool` filter, for the values the roles pass it."""
    return value in (True, "true", "True", "yes", "on", "1", 1)


def _changed(result: Any) -> bool:
    return bool(isinstance(result, dict) and result.get("changed"))


def role_env(*, strict: bool = True, native: bool = True, **filters: Callable[..., Any]) -> jinja2.Environment:
    """A Jinja environment as Ansible's templating: `native` renders to Python types (Ansible's
    variables are native; a message is a string either way), `strict` fails on an undefined name
    (Ansible's default) where False lets `| default(...)`-free optional names render empty.
    `filters` adds or replaces filters by name (a collection's filter by its FQCN)."""
    cls = NativeEnvironment if native else jinja2.Environment
    env = cls(undefined=jinja2.StrictUndefined if strict else jinja2.Undefined)
    env.filters["bool"] = _bool
    env.filters["regex_replace"] = lambda value, pattern, repl="": re.sub(pattern, repl, str(value))
    env.filters["regex_escape"] = lambda value: re.escape(str(value))
    env.tests["match"] = lambda value, pattern: re.match(pattern, str(value)) is not None
    env.tests["search"] = lambda value, pattern: re.search(pattern, str(value)) is not None
    env.tests["changed"] = _changed
    env.filters.update(filters)
    return env


def render(
    expr: str, ctx: dict[str, Any], *, strict: bool = True, native: bool = True, **filters: Callable[..., Any]
) -> Any:
    """`expr` rendered in `ctx` (role_env's arguments)."""
    return role_env(strict=strict, native=native, **filters).from_string(expr).render(ctx)
