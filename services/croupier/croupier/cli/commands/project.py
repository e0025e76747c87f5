"""``croupier project``: bring the read models up to the ledger's head, or keep following it."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from typing import Any

from prometheus_client import start_http_server

from croupier.cli.console import add_ledger_argument, bounded_int, ledger_at, ledger_of
from croupier.ledger import LedgerError
from croupier.metrics import Metrics
from croupier.projection import ProjectionError, open_store
from croupier.projection.integrity import IntegrityProjection
from croupier.projection.projector import DEFAULT_BATCH, MAX_BATCH, Progress, Projector
from croupier.projection.registry import load_projections


def register(subparsers: Any) -> None:
    """Add the ``project`` sub-command."""
    parser = subparsers.add_parser(
        "project",
        description=(
            "Applies every committed ledger event after each read model's checkpoint, "
            "batch by batch, each batch and its checkpoint in one transaction."
        ),
    )
    add_ledger_argument(parser)
    parser.add_argument(
        "--rebuild", action="store_true", help="empty the read models and project from zero"
    )
    parser.add_argument(
        "--follow", action="store_true", help="keep following the ledger until interrupted"
    )
    parser.add_argument(
        "--only", action="append", default=[], metavar="NAME", help="only this projection"
    )
    parser.add_argument(
        "--batch",
        type=bounded_int(1, MAX_BATCH),
        default=DEFAULT_BATCH,
        help="ledger events per transaction",
    )
    parser.add_argument(
        "--metrics-port",
        type=bounded_int(1, 65535),
        help="serve Prometheus metrics of the projections (integrity figures) on this port",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Project; 2 when the ledger or the read models cannot be used."""
    try:
        return asyncio.run(_project(args))
    except (ProjectionError, LedgerError, OSError, ValueError) as error:
        print(f"croupier project: {error}", file=sys.stderr)
        return 2


async def _project(args: argparse.Namespace) -> int:
    projections = load_projections(args.only)
    async with ledger_at(ledger_of(args)) as ledger:
        projector = Projector(ledger, open_store(ledger), projections, batch=args.batch)
        created = await projector.setup()
        if created:
            print(f"created read models: {', '.join(created)}")
        if args.metrics_port:
            await _serve_metrics(projector, args.metrics_port)
        report = _reporter()
        if args.rebuild:
            position = await projector.rebuild(report)
        else:
            position = await projector.catch_up(on_progress=report)
        print(
            f"read models at ledger position {position}: {', '.join(p.name for p in projections)}"
        )
        if projector.pieces:
            written = (f"{n} fact{'s' * (n > 1)} ({name})" for name, n in projector.pieces.items())
            print(f"written in pieces: {', '.join(written)}")
        if args.follow:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stop.set)
            print("following the ledger (Ctrl-C stops)")
            await projector.follow(stop)
    return 0


async def _serve_metrics(projector: Projector, port: int) -> None:
    """Export what projections count (the integrity figures) on ``port``'s ``/metrics``."""
    metrics = Metrics()
    metrics.initialise()
    for projection in projector.projections:
        if isinstance(projection, IntegrityProjection):
            async with projector.store.session() as session:
                await projection.export(metrics, session)
    start_http_server(port, registry=metrics.registry)
    print(f"metrics on http://0.0.0.0:{port}/metrics")


def _reporter() -> Any:
    """Progress with rate and ETA on a terminal; silent otherwise."""
    if not sys.stderr.isatty():
        return None
    started = time.monotonic()

    def report(progress: Progress) -> None:
        elapsed = max(time.monotonic() - started, 1e-6)
        rate = progress.events / elapsed
        left = (progress.target - progress.position) / rate if rate else 0.0
        print(
            f"\r  position {progress.position:,}/{progress.target:,}  "
            f"{rate:,.0f} events/s  ETA {left:,.0f}s ",
            end="",
            file=sys.stderr,
            flush=True,
        )
        if progress.position >= progress.target:
            print(file=sys.stderr)

    return report
