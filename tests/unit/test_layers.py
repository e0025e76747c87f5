"""The packages' layers, read from every import of every module (docs/architecture.md).

holdem -> contract -> croupier and holdem -> contract -> studio; floor composes croupier and
the studio. A package imports only itself and the packages it is allowed to see: the rules
core imports none of the others, croupier and the studio never import each other, and only
the floor imports both. Imports inside functions count as much as those at the top.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SERVICES = Path(__file__).resolve().parents[2] / "services"

#: What each package may import besides itself (and the standard library and third parties).
ALLOWED: dict[str, frozenset[str]] = {
    "holdem": frozenset(),
    "contract": frozenset({"holdem"}),
    "croupier": frozenset({"holdem", "contract"}),
    "studio": frozenset({"holdem", "contract"}),
    "floor": frozenset({"holdem", "contract", "croupier", "studio"}),
}
#: Ours, so never imported but as the layers allow; the benchmarks sit above everything.
FIRST_PARTY = frozenset(ALLOWED) | {"bench"}


def imported(source: str) -> Iterator[tuple[int, str]]:
    """(line, module) of every absolute import in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def crossings(package: str, source: str) -> list[tuple[int, str]]:
    """(line, module) of each import in ``source`` (a module of ``package``) crossing a layer."""
    allowed = ALLOWED[package] | {package}
    return [
        (line, module)
        for line, module in imported(source)
        if module.split(".")[0] in FIRST_PARTY and module.split(".")[0] not in allowed
    ]


def modules(package: str) -> list[Path]:
    """Every module of ``package``."""
    return sorted((SERVICES / package / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_each_package_imports_only_the_layers_below_it(package: str) -> None:
    found = modules(package)
    assert found, f"no modules under {SERVICES / package / package}"
    offending = [
        f"{path.relative_to(SERVICES.parent)}:{line} imports {module}"
        for path in found
        for line, module in crossings(package, path.read_text(encoding="utf-8"))
    ]
    allowed = ", ".join(sorted(ALLOWED[package])) or "none of the others"
    assert not offending, f"{package} may import {allowed}; " + "; ".join(offending)


def test_every_package_has_its_layer() -> None:
    packages = {path.name for path in SERVICES.iterdir() if (path / path.name).is_dir()}
    assert packages == set(ALLOWED)


@pytest.mark.parametrize(
    ("package", "source", "crossing"),
    [
        ("croupier", "from studio.config import StudioConfig", "studio.config"),
        ("studio", "def f():\n    import croupier.settlement.round\n", "croupier.settlement.round"),
        ("holdem", "from contract.feed import EventType", "contract.feed"),
        ("contract", "import croupier", "croupier"),
        ("croupier", "from floor.demo import run_demo", "floor.demo"),
        ("studio", "from bench import ledger", "bench"),
    ],
)
def test_a_crossing_is_named(package: str, source: str, crossing: str) -> None:
    assert [module for _, module in crossings(package, source)] == [crossing]


def test_the_layers_below_are_not_crossings() -> None:
    source = "import json\nfrom holdem import Game\nfrom contract.feed import EventType\n"
    assert crossings("studio", source) == []
    assert crossings("floor", source + "import croupier.cli\nimport studio\n") == []
