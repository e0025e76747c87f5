"""``croupier demo``: the main job, the live service and a studio playing tables together."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

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
    parser.set_defaults(run=run)


def _faults(text: str) -> WalletFaults:
    try:
        return WalletFaults.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    """Run the demo."""
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
                )
            )
