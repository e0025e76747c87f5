"""Immutable values built fast: frozen, slotted dataclasses whose ``__init__`` stores each
field through its slot.

A frozen dataclass's own ``__init__`` goes through ``object.__setattr__`` for every field,
which costs about twice as much as the store itself; the settler builds several such values
per feed message (a fact, a wager, a bet's result). ``quick`` gives the class an
``__init__`` with the same signature and defaults that writes the slots directly. The class
stays frozen: assigning a field afterwards still raises ``FrozenInstanceError``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

C = TypeVar("C", bound=type[Any])


def quick(cls: C) -> C:
    """``cls`` (a frozen dataclass with slots, no ``__post_init__``, no default factory)
    with a faster ``__init__``."""
    fields = dataclasses.fields(cls)
    params = cls.__dataclass_params__
    assert params.frozen and params.init and "__slots__" in cls.__dict__, cls
    assert not hasattr(cls, "__post_init__"), cls
    assert all(f.init and f.default_factory is dataclasses.MISSING for f in fields), cls
    scope: dict[str, Any] = {}
    signature = []
    for f in fields:
        scope[f"_set_{f.name}"] = cls.__dict__[f.name].__set__  # the slot's descriptor
        if f.default is dataclasses.MISSING:
            signature.append(f.name)
        else:
            scope[f"_default_{f.name}"] = f.default
            signature.append(f"{f.name}=_default_{f.name}")
    body = "".join(f"\n    _set_{f.name}(self, {f.name})" for f in fields) or "\n    pass"
    source = f"def __init__(self, {', '.join(signature)}):{body}"
    # The text is built from the field names alone, as dataclasses builds its own.
    exec(compile(source, f"<quick {cls.__qualname__}>", "exec"), scope)
    init = scope["__init__"]
    init.__module__ = __name__
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = cls.__init__.__annotations__
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init
    return cls
