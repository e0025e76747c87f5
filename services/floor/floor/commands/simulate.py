"""``croupier simulate``: the studio feed simulator (the same command as ``studio simulate``)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from typing import Any

from croupier.cli.console import add_json_argument, output_file
from croupier.cli.progress import Progress
from croupier.errors import CommandError, reaching
from floor.commands import studio_options
from studio.cli import add_simulate_arguments, run_simulate
from studio.config import StudioConfig
from studio.message import FeedMessage

_CLOSING = (".round.completed", ".round.voided")


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the ``simulate`` sub-command, with the studio's own options."""
    parser = subparsers.add_parser("simulate")
    add_simulate_arguments(parser)
    add_json_argument(parser)
    parser.set_defaults(run=run, prog="croupier simulate")


def run(args: argparse.Namespace) -> int:
    """Play the studio and emit its feed; print a summary."""
    if args.out is not None:
        try:
            output_file(str(args.out))
        except argparse.ArgumentTypeError as error:
            raise CommandError(f"--out: {error}", "name a file in a folder that exists") from None
    with (
        studio_options("croupier simulate"),
        reaching(broker=args.amqp or "", broker_setting="--amqp"),
    ):
        return run_simulate(args, _with_progress)


def _with_progress(config: StudioConfig, messages: Iterator[FeedMessage]) -> Iterator[FeedMessage]:
    with Progress("simulate", "rounds", config.rounds) as progress:
        for message in messages:
            yield message
            if message.routing_key.endswith(_CLOSING):
                progress.advance()
