"""``croupier migrate``: apply the ledger's schema migrations and set up the read models
(the owner's step).

The service never migrates: it checks the schema version at start-up and says to run this.
``--service-role NAME`` also makes the login role the service runs as: a member of
``croupier_app`` (INSERT and SELECT on the ledger's tables, nothing more), with the password
in ``CROUPIER_SERVICE_ROLE_PASSWORD`` if set. ``deploy/sql/service-role.sql`` does the same
by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Any

from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    bounded_int,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.errors import CommandError, reaching
from croupier.ledger.partitions import DEFAULT_PARTITIONS, MAX_PARTITIONS
from croupier.projection import open_store
from croupier.projection.registry import load_projections


def register(subparsers: Any) -> None:
    """Add the ``migrate`` sub-command."""
    parser = subparsers.add_parser(
        "migrate",
        description="Apply pending migrations and set up the read models; a SQLite ledger "
        "file is created if missing.",
    )
    add_ledger_argument(parser)
    parser.add_argument(
        "--service-role",
        metavar="NAME",
        help="also create (or grant) the service's login role, a member of croupier_app "
        "(password from CROUPIER_SERVICE_ROLE_PASSWORD)",
    )
    parser.add_argument(
        "--partitions",
        type=bounded_int(1, MAX_PARTITIONS),
        metavar="P",
        help=f"the ledger's partition count, fixed when it is first set (default "
        f"{DEFAULT_PARTITIONS}); once set, another count is refused",
    )
    add_json_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Apply migrations and list what was applied."""
    url = ledger_of(args)
    if args.service_role and not url.startswith(("postgresql://", "postgres://")):
        raise CommandError("--service-role needs a PostgreSQL ledger", "drop --service-role")
    applied, role = asyncio.run(_migrate(url, args.service_role, args.partitions))
    if args.json:
        print_json({"applied": applied, "service_role": role})
    else:
        print("\n".join(f"applied {name}" for name in applied) or "ledger schema is up to date")
        if role:
            print(f"service role {args.service_role} {role}: a member of croupier_app")
    return 0


async def _migrate(
    url: str, role: str | None, partitions: int | None
) -> tuple[list[str], str | None]:
    from croupier.ledger import PartitionsFixed

    async with ledger_at(url, create=True) as ledger:
        try:
            applied = await ledger.migrate(partitions)
        except PartitionsFixed as error:
            raise CommandError(str(error), "drop --partitions, or give the stored count") from None
        created = await open_store(ledger).setup(load_projections())
        applied += [f"read model {name}" for name in created]
    if not role:
        return applied, None
    from croupier.ledger.postgres import ensure_service_role

    password = os.environ.get("CROUPIER_SERVICE_ROLE_PASSWORD")
    try:
        with reaching(ledger=url):
            made = await ensure_service_role(url, role, password)
    except ValueError as error:
        raise CommandError(str(error), "choose another --service-role") from None
    return applied, "created" if made else "granted"
