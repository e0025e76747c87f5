"""``croupier demo``: the main job, the live service and a studio playing tables together."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from croupier.cli.console import bounded_int
from croupier.errors import CommandError
from floor.commands import studio_options
from floor.steady import SteadyOutput
from studio.wallet import WalletFaults


def register(subparsers: Any) -> None:
    """Add the ``demo`` sub-command."""
    parser = subparsers.add_parser(
        "demo",
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
    parser.add_argument(
        "--wallet-log",
        type=Path,
        help="where the wallet writes its transaction log (.csv or .jsonl; "
        "default var/demo-wallet.csv, replaced each run)",
    )
    parser.add_argument(
        "--wallet-faults",
        type=_faults,
        default=None,
        metavar="NAME=COUNT,...",
        help="make the wallet misbehave: drop_credit, double_credit, change_amount, "
        "wrong_currency, unknown_credit, debit_rejected, drop_debit",
    )
    parser.add_argument(
        "--instances",
        type=bounded_int(1, MAX_INSTANCES),
        default=1,
        metavar="N",
        help="N above 1: N partitioned `croupier serve` processes share the partitions of "
        "one PostgreSQL ledger, fed through RabbitMQ (needs both; see docs/operations.md)",
    )
    parser.add_argument(
        "--kill-one",
        action="store_true",
        help="with --instances: kill the instance holding the most partitions halfway, to "
        "show the others taking them over",
    )
    parser.set_defaults(run=run)


def _faults(text: str) -> WalletFaults:
    try:
        return WalletFaults.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


#: Processes ``--instances`` may start on one machine.
MAX_INSTANCES = 16


def run(args: argparse.Namespace) -> int:
    """Run the demo."""
    if args.instances > 1 and args.embedded:
        raise CommandError(
            "--instances runs `croupier serve` processes on RabbitMQ and PostgreSQL; "
            "--embedded plays in-process",
            "choose one",
        )
    if args.kill_one and args.instances < 2:
        raise CommandError("--kill-one needs --instances 2 or more")
    with SteadyOutput() as say:
        say("croupier demo: starting the service, a studio and a wallet")
        from floor.demo import run_demo  # after the first line: loading takes a moment

        with studio_options("croupier demo"):
            return asyncio.run(
                run_demo(
                    args.rounds,
                    args.seed,
                    say,
                    embedded=args.embedded,
                    wallet_log=args.wallet_log,
                    wallet_faults=args.wallet_faults,
                    rest=say.rest,
                    instances=args.instances,
                    kill_one=args.kill_one,
                )
            )
