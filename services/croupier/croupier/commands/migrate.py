"""``croupier migrate``: apply the ledger's schema migrations and set up the read models."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from croupier.console import (
    add_json_argument,
    add_ledger_argument,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.projection import open_store
from croupier.projection.registry import load_projections


def register(subparsers: Any) -> None:
    """Add the ``migrate`` sub-command."""
    parser = subparsers.add_parser(
        "migrate",
        help="apply pending ledger migrations and set up the read models",
        description="Apply pending migrations and set up the read models; a SQLite ledger "
        "file is created if missing.",
    )
    add_ledger_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Apply migrations and list what was applied."""
    applied = asyncio.run(_migrate(ledger_of(args)))
    if args.json:
        print_json({"applied": applied})
    else:
        print("\n".join(f"applied {name}" for name in applied) or "ledger schema is up to date")
    return 0


async def _migrate(url: str) -> list[str]:
    async with ledger_at(url, create=True) as ledger:
        applied = await ledger.migrate()
        created = await open_store(ledger).setup(load_projections())
        return applied + [f"read model {name}" for name in created]
