"""``croupier replay``: settle a recorded feed through the service's own settler."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    input_file,
    ledger_at,
    ledger_of,
    output_file,
    print_json,
    signing_key,
    signing_keyring,
)
from croupier.cli.progress import Progress
from croupier.config import settings
from croupier.errors import CommandError
from croupier.ledger import HeadNotSigned, Ledger
from croupier.settlement.replay import ReplaySummary, replay


def register(subparsers: Any) -> None:
    """Add the ``replay`` sub-command."""
    parser = subparsers.add_parser(
        "replay",
        epilog="Signs the ledger's heads when CROUPIER_LEDGER_SIGNING_KEY is set; after a key "
        "rotation, under the keyring CROUPIER_LEDGER_KEYRING names (docs/keys.md).",
        description=__doc__,
    )
    parser.add_argument("feed", type=input_file, help="recorded feed, one JSON event per line")
    parser.add_argument("--out", type=output_file, required=True, help="settlement results (JSONL)")
    parser.add_argument(
        "--rejections", type=output_file, required=True, help="rejected events (JSONL)"
    )
    add_ledger_argument(parser)
    add_json_argument(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Replay the feed and print the summary (rounds left open are listed in it)."""
    summary = asyncio.run(_replay(args.feed, ledger_of(args), args.out, args.rejections))
    if args.json:
        print_json(summary.to_json())
    else:
        print(summary.render())
    return 0


async def _replay(feed: Path, url: str, out: Path, rejected: Path) -> ReplaySummary:
    total = _count_lines(feed)
    key = signing_key(settings().ledger_signing_key, required=False)
    keyring = signing_keyring(settings().ledger_keyring, key)
    async with ledger_at(url, create=True, key=key, keyring=keyring) as ledger:
        await ledger.migrate()
        try:
            await ledger.check_signing()
            return await _settle(ledger, feed, total, out, rejected)
        except HeadNotSigned as error:  # at the start, or someone else appended meanwhile
            raise CommandError(str(error)) from None


async def _settle(
    ledger: Ledger, feed: Path, total: int, out: Path, rejected: Path
) -> ReplaySummary:
    with (
        feed.open("rb") as lines,
        out.open("w") as results,
        rejected.open("w") as rejections,
        Progress("replay", "events", total) as progress,
    ):
        return await replay(progress.track(lines), ledger, results, rejections)


def _count_lines(feed: Path, chunk: int = 1 << 20) -> int:
    with feed.open("rb") as stream:
        return sum(block.count(b"\n") for block in iter(lambda: stream.read(chunk), b""))
