"""The projections ``croupier project`` follows: one module each, in this order.

Each module defines ``projection() -> Projection``. Add yours here; its name must be new.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from croupier.projection import Projection, ProjectionError

PROJECTIONS = (
    "croupier.projection.wagers",
    "croupier.projection.rounds",
    "croupier.projection.integrity",
)


def load_projections(names: Sequence[str] = ()) -> list[Projection]:
    """The registered projections, or only those named (in registry order)."""
    found = [importlib.import_module(module).projection() for module in PROJECTIONS]
    if not names:
        return found
    unknown = set(names) - {p.name for p in found}
    if unknown:
        known = ", ".join(p.name for p in found)
        raise ProjectionError(f"no projection named {sorted(unknown)}; known: {known}")
    return [p for p in found if p.name in names]
