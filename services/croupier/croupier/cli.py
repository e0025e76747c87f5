"""The ``croupier`` command line: one sub-command per module in :mod:`croupier.commands`."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module defines ``register(subparsers) -> None``, which adds its parser with
# ``set_defaults(run=...)``; ``run(args) -> int`` returns the exit status.
COMMANDS = (
    "demo",
    "serve",
    "replay",
    "simulate",
    "migrate",
    "verify",
    "project",
    "par",
    "odds",
    "contracts",
    "web",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, with every sub-command that is installed."""
    parser = argparse.ArgumentParser(
        prog="croupier",
        description="Round settlement for live Casino Hold'em and Texas Hold'em Plus tables.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"croupier.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``croupier`` script."""
    args = build_parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
