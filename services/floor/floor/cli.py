"""The ``croupier`` program: croupier's own commands and the floor's (``demo``, ``simulate``).

Every command behaves as :mod:`croupier.cli` describes: one-line errors, the same exit codes.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from croupier import cli

#: The floor's commands first, then croupier's own.
COMMANDS = {
    "demo": (
        "floor.commands.demo",
        "run the service with a simulated studio and print a summary",
    ),
    "simulate": (
        "floor.commands.simulate",
        "play simulated studio tables and emit their feed (JSONL file or RabbitMQ)",
    ),
    **cli.COMMANDS,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``croupier`` script; returns the exit status."""
    return cli.main(argv, COMMANDS)


if __name__ == "__main__":
    sys.exit(main())
