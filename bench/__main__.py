"""Run every benchmark: ``python -m bench`` (``make bench``), or ``python -m bench NAME ...``.

Each module in ``MODULES`` has a ``run()`` that prints its own figures; they run in this
order. A module that is not written yet is skipped with a note. Each runs with the
interpreter's switch interval the ``croupier`` command sets (:mod:`croupier.scheduling`).
"""

from __future__ import annotations

import importlib
import sys

from croupier.scheduling import answer_round_trips_promptly

MODULES = (
    "bench.evaluator",
    "bench.ledger",
    "bench.fencing",
    "bench.open_rounds",
    "bench.memory",
    "bench.odds",
    "bench.par",
    "bench.replay",
    "bench.service",
    "bench.scale",
    "bench.history",
    "bench.projection",
    "bench.logs",
    "bench.reconcile",
    "bench.integrity",
)


def main(argv: list[str]) -> int:
    answer_round_trips_promptly()
    names = [f"bench.{name.removeprefix('bench.')}" for name in argv] or list(MODULES)
    for name in names:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as error:
            if error.name != name:
                raise  # the module exists but something it imports does not
            print(f"{name}: skipped, no such module yet")
            continue
        print(f"== {name}", flush=True)
        module.run()
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
