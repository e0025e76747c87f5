"""``croupier replay``: settle a recorded feed through the service's own settler."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from croupier.config import EMBEDDED_LEDGER_URL, configure_logging
from croupier.ledger import open_ledger
from croupier.replay import ReplaySummary, replay


def register(subparsers: Any) -> None:
    """Add the ``replay`` sub-command."""
    parser = subparsers.add_parser(
        "replay",
        help="settle a recorded feed (JSONL) and write results and rejections",
        description=__doc__,
    )
    parser.add_argument("feed", type=Path, help="recorded feed, one JSON event per line")
    parser.add_argument("--out", type=Path, required=True, help="settlement results (JSONL)")
    parser.add_argument("--rejections", type=Path, required=True, help="rejected events (JSONL)")
    parser.add_argument(
        "--ledger",
        default=EMBEDDED_LEDGER_URL,
        help=f"ledger URL: sqlite:///FILE or postgresql://... (default {EMBEDDED_LEDGER_URL})",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Replay the feed and print the summary."""
    configure_logging("WARNING")
    if not args.feed.is_file():
        print(f"croupier replay: no such feed file: {args.feed}", file=sys.stderr)
        return 2
    summary = asyncio.run(_replay(args.feed, args.ledger, args.out, args.rejections))
    print(summary.render())
    return 0


async def _replay(feed: Path, url: str, out: Path, rejected: Path) -> ReplaySummary:
    if url.startswith("sqlite:///") and not url.endswith(":memory:"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        with feed.open("rb") as lines, out.open("w") as results, rejected.open("w") as rejections:
            return await replay(lines, ledger, results, rejections)
