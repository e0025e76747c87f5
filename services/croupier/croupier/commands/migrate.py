"""``croupier migrate``: apply the ledger's schema migrations and set up the read models."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from croupier.commands.verify import ledger_url_argument
from croupier.ledger import open_ledger
from croupier.projection import open_store
from croupier.projection.registry import load_projections


def register(subparsers: Any) -> None:
    """Add the ``migrate`` sub-command."""
    parser = subparsers.add_parser("migrate", help="apply pending ledger migrations")
    ledger_url_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Apply migrations and list what was applied."""
    applied = asyncio.run(_migrate(args.ledger))
    print("\n".join(f"applied {name}" for name in applied) or "ledger schema is up to date")
    return 0


async def _migrate(url: str) -> list[str]:
    async with open_ledger(url) as ledger:
        applied = await ledger.migrate()
        created = await open_store(ledger).setup(load_projections())
        return applied + [f"read model {name}" for name in created]
