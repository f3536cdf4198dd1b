"""Whether a value read back from a JSON file has the type its dataclass field declares.

sweep.json is the tool's own file, but a hand-edited or foreign one must fail where it is read,
naming the field ("steps is [1, 'x'], not tuple[int, ...]"), not later as a TypeError deep in the
report. The declared types are the fields' own annotations: one place for what each field holds.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping
from typing import Any


@functools.cache
def declared_types(cls: type) -> dict[str, Any]:
    """A dataclass's field annotations, resolved (the module uses postponed annotations)."""
    return typing.get_type_hints(cls)


def conforms(value: Any, hint: Any) -> bool:
    """``value`` is of type ``hint``: bool, int (not bool), float (an int too), str, None, unions,
    ``tuple[X, ...]``, ``Mapping[K, V]`` and classes; anything is ``Any``."""
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, a) for a in args)
    if origin is tuple:
        return isinstance(value, tuple) and all(conforms(v, args[0]) for v in value)
    if origin is Mapping:
        return isinstance(value, Mapping) and all(
            conforms(k, args[0]) and conforms(v, args[1]) for k, v in value.items()
        )
    return isinstance(value, hint)


def type_name(hint: Any) -> str:
    """``tuple[int, ...]``, ``float``: as a reader would write it."""
    if isinstance(hint, type):
        return hint.__name__
    return str(hint).replace("typing.", "").replace("collections.abc.", "")
