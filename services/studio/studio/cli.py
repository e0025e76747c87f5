"""The ``studio`` command line (``studio simulate``), also mounted as ``croupier simulate``.

:func:`add_simulate_arguments` defines the options once; both commands use it with
:func:`run_simulate`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from holdem import paytable_ids
from studio.config import ConfigError, Faults, GameFaults, StudioConfig, parse_table_specs
from studio.feed import FeedTally, simulate, write_jsonl
from studio.message import FeedMessage
from studio.strategy import STRATEGIES

SIMULATE_HELP = "play simulated studio tables and emit their feed (JSONL file or RabbitMQ)"


def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    """Add every ``simulate`` option to ``parser``."""
    parser.add_argument("--rounds", type=int, required=True, help="rounds in all, over the tables")
    parser.add_argument(
        "--seed", type=int, help="the same seed gives the same feed (default: random)"
    )
    parser.add_argument(
        "--tables",
        nargs="+",
        metavar="SPEC",
        help="PAYTABLE[*COUNT][:shared=N|:boxes=N]; PAYTABLE is a pay table id as `croupier "
        "par` takes it (casino-holdem/classic) or its short name (classic); e.g. "
        "casino-holdem/classic*2 texas-holdem-plus/standard:boxes=7 "
        "(default: one table per pay table)",
    )
    parser.add_argument("--table-prefix", default="studio", help="table ids: PREFIX-1-classic...")
    parser.add_argument(
        "--players", type=int, default=50, help="players per table (a shared hand: each bets)"
    )
    parser.add_argument(
        "--boxes", type=int, help="1-7 boxes per table, one player each (default: a shared hand)"
    )
    parser.add_argument(
        "--strategy", default="simple", choices=sorted(STRATEGIES), help="how the players decide"
    )
    parser.add_argument("--timeout-rate", type=float, default=0.0, help="decisions timed out")
    parser.add_argument("--side-bet-rate", type=float, default=0.3, help="antes with a side bet")
    parser.add_argument("--void-rate", type=float, default=0.0, help="rounds voided (misdeal)")
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="rate of every fault below that is not given on its own (not voids)",
    )
    for kind in Faults.kinds():
        if kind != "void":
            flag = "--" + kind.replace("_", "-") + "-rate"
            parser.add_argument(flag, type=float, dest=f"{kind}_rate", help=_fault_help(kind))
    parser.add_argument(
        "--deal-bias",
        type=float,
        default=0.0,
        help="game fault: rate at which a weak first box's hole and flop are dealt again",
    )
    parser.add_argument(
        "--completion-bias",
        type=float,
        default=0.0,
        help="game fault: rate at which a qualifying dealer hand is redrawn",
    )
    output = parser.add_mutually_exclusive_group(required=True)
    output.add_argument("--out", type=Path, metavar="FEED.jsonl", help="write JSONL here")
    output.add_argument("--amqp", metavar="URL", help="publish to RabbitMQ at URL")
    parser.add_argument("--rate", type=float, help="with --amqp: at most this many events/s")


def _fault_help(kind: str) -> str:
    doc = {
        "duplicate_card": "rounds with a card read twice",
        "bad_card": "rounds with a card text that is no card",
        "missing_cards": "rounds completed without the river",
        "redelivery": "rounds with one event sent twice",
        "out_of_order": "rounds with two adjacent events swapped",
        "wrong_call": "rounds with a call that is not 2x the ante",
        "late_bet": "rounds with a bet after betting closed",
        "malformed": "rounds with a torn (non-JSON) line",
    }
    return doc.get(kind, kind) + " (default: --fault-rate)"


def config_from_args(args: argparse.Namespace) -> StudioConfig:
    """The :class:`StudioConfig` the parsed options describe."""
    specs = args.tables or paytable_ids()
    tables = parse_table_specs(specs, args.players, args.boxes, args.table_prefix)
    rates = {
        kind: getattr(args, f"{kind}_rate")
        if getattr(args, f"{kind}_rate") is not None
        else args.fault_rate
        for kind in Faults.kinds()
        if kind != "void"
    }
    return StudioConfig(
        tables=tables,
        rounds=args.rounds,
        seed=args.seed,
        strategy=args.strategy,
        timeout_rate=args.timeout_rate,
        side_bet_rate=args.side_bet_rate,
        faults=Faults(void=args.void_rate, **rates),
        game_faults=GameFaults(args.deal_bias, args.completion_bias),
    )


Watch = Callable[[StudioConfig, Iterator[FeedMessage]], Iterator[FeedMessage]]


def run_simulate(
    args: argparse.Namespace, watch: Watch = lambda _config, messages: messages
) -> int:
    """Run ``simulate``: emit the feed, then print a summary. Returns the exit status.

    ``watch`` sees the messages on their way out (``croupier simulate`` shows progress).
    """
    if args.seed is None:
        args.seed = secrets.randbits(32)
    try:
        config = config_from_args(args)
    except ConfigError as error:
        print(f"{args.prog}: {error}", file=sys.stderr)
        return 2
    tally = FeedTally()
    messages = watch(config, tally.watch(simulate(config)))
    started = time.perf_counter()
    if args.out is not None:
        write_jsonl(messages, args.out)
        where = str(args.out)
    else:
        from studio.publisher import publish

        asyncio.run(publish(messages, args.amqp, rate=args.rate))
        where = f"exchange studio.feed at {_without_credentials(args.amqp)}"
    elapsed = time.perf_counter() - started
    total = tally.total.events
    if getattr(args, "json", False):
        summary = {"seed": config.seed, "events": total, "to": where, "seconds": elapsed}
        print(json.dumps(summary | {"rounds": tally.total.rounds}, indent=1))
        return 0
    print(tally.report())
    print(f"seed {config.seed}: {total} events to {where} in {elapsed:.2f}s")
    return 0


def _without_credentials(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def build_parser() -> argparse.ArgumentParser:
    """The ``studio`` argument parser."""
    parser = argparse.ArgumentParser(prog="studio", description="A live casino studio simulator.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    simulate_parser = commands.add_parser("simulate", help=SIMULATE_HELP)
    add_simulate_arguments(simulate_parser)
    simulate_parser.set_defaults(run=run_simulate, prog="studio simulate")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``studio`` script."""
    args = build_parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
