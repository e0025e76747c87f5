"""``croupier demo``: the main job, the live service and a studio playing tables together."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from croupier.demo import run_demo


def register(subparsers: Any) -> None:
    """Add the ``demo`` sub-command."""
    parser = subparsers.add_parser(
        "demo",
        help="run the service with a simulated studio and print a summary",
        description=(
            "Uses RabbitMQ and PostgreSQL when they answer (CROUPIER_AMQP_URL, "
            "CROUPIER_DATABASE_URL, or the local defaults); otherwise the in-process bus "
            "and the embedded SQLite ledger."
        ),
    )
    parser.add_argument("--rounds", type=int, default=200, help="rounds to play (default 200)")
    parser.add_argument("--seed", type=int, default=None, help="studio seed (default: random)")
    parser.add_argument(
        "--embedded",
        action="store_true",
        help="use the in-process bus and SQLite even if a broker answers",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo."""
    return asyncio.run(run_demo(args.rounds, args.seed, print, embedded=args.embedded))
