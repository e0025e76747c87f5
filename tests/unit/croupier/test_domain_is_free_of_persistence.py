"""The domain (the Round aggregate and the facts it writes) imports no persistence: not the
ledger, not the bus, not a database driver. Read from every import, those inside functions
included."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CROUPIER = Path(__file__).resolve().parents[3] / "services" / "croupier" / "croupier"
DOMAIN = ("settlement/round.py", "settlement/facts.py")
PERSISTENCE = ("croupier.ledger", "croupier.bus", "croupier.projection", "asyncpg", "sqlite3")


def imports(source: str) -> list[str]:
    """Every module ``source`` imports, absolutely."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
    return found


@pytest.mark.parametrize("module", DOMAIN)
def test_the_domain_imports_no_persistence(module: str) -> None:
    leaning = [
        name
        for name in imports((CROUPIER / module).read_text(encoding="utf-8"))
        if name.startswith(PERSISTENCE)
    ]
    assert not leaning, f"croupier/{module} imports {leaning}"


def test_an_import_of_the_ledger_is_seen() -> None:
    source = "def f():\n    from croupier.ledger.chain import GENESIS_HASH\n"
    assert [n for n in imports(source) if n.startswith(PERSISTENCE)] == ["croupier.ledger.chain"]
