"""``croupier simulate``: the studio feed simulator (the same command as ``studio simulate``)."""

from __future__ import annotations

import argparse
from typing import Any

from studio.cli import SIMULATE_HELP, add_simulate_arguments, run_simulate


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the ``simulate`` sub-command, with the studio's own options."""
    parser = subparsers.add_parser("simulate", help=SIMULATE_HELP)
    add_simulate_arguments(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Play the studio and emit its feed; print a summary."""
    return run_simulate(args)
