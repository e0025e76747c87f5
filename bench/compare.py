"""Replay throughput of this tree against another revision, side by side.

``python -m bench.compare REV`` (``make bench-compare REV=...``) checks ``REV`` out in a
temporary git worktree and replays the ``bench.replay`` feed (about 100,000 bets) in both
trees at the same time, ``BENCH_COMPARE_PAIRS`` times per ledger, each side the best of
``RUNS`` replays. Started together, both sides see the same host: on a machine whose speed
drifts by more than the difference measured, runs one after the other compare the host as
much as the code. Prints each pair's ratio (this tree over ``REV``) and their median.

``REV`` must have ``bench.replay.make_feed`` and ``scratch_database``,
``croupier.ledger.open_ledger`` and ``croupier.replay.replay``; a tree that signs its
ledger heads replays with a fresh signing key, as the service runs.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Final

PAIRS: Final = int(os.environ.get("BENCH_COMPARE_PAIRS", "5"))
RUNS: Final = 2
LEDGERS: Final = ("sqlite", "postgres")
ROOT: Final = Path(__file__).resolve().parent.parent

#: Runs in either tree: replays the feed ``RUNS`` times into fresh ledgers, prints bets/s.
_CHILD: Final = """
import asyncio, io, json, sys, tempfile, time
from bench.replay import make_feed, scratch_database
from croupier.ledger import open_ledger
from croupier.replay import replay
try:
    from croupier.ledger.signing import LedgerKey
except ImportError:
    LedgerKey = None

async def once(url, feed):
    key = () if LedgerKey is None else (LedgerKey.generate(),)
    async with open_ledger(url, *key) as ledger:
        await ledger.migrate()
        start = time.perf_counter()
        await replay(feed.lines, ledger, io.StringIO(), io.StringIO())
        return feed.bets / (time.perf_counter() - start)

async def main(kind, runs):
    feed = make_feed()
    rates = []
    for run in range(runs):
        if kind == "sqlite":
            with tempfile.TemporaryDirectory() as folder:
                rates.append(await once(f"sqlite:///{folder}/ledger.db", feed))
        else:
            async with scratch_database() as url:
                rates.append(await once(url, feed))
    print(json.dumps(rates))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


def tree_path(tree: Path) -> str:
    """The PYTHONPATH that imports a tree's own packages before any installed ones."""
    return os.pathsep.join([str(tree), *sorted(str(p) for p in (tree / "services").iterdir())])


def side_by_side(trees: Sequence[Path], ledger: str) -> list[float]:
    """Replay in every tree at once; each tree's best bets/s."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, ledger, str(RUNS)],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": tree_path(tree)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for tree in trees
    ]
    rates = []
    for child in children:
        out, _ = child.communicate()
        if child.returncode:
            raise RuntimeError(f"a replay failed (exit {child.returncode})")
        rates.append(max(json.loads(out.strip().splitlines()[-1])))
    return rates


def compare(revision: str, pairs: int = PAIRS) -> None:
    """Print this tree's replay throughput over ``revision``'s, pair by pair."""
    with tempfile.TemporaryDirectory() as folder:
        other = Path(folder) / "tree"
        git = ["git", "-C", str(ROOT)]
        subprocess.run([*git, "worktree", "add", "--detach", str(other), revision], check=True)
        try:
            for ledger in LEDGERS:
                ratios = []
                for pair in range(1, pairs + 1):
                    now, then = side_by_side([ROOT, other], ledger)
                    ratios.append(now / then)
                    print(
                        f"{ledger:<9} pair {pair}: this tree {now:8,.0f} bets/s, "
                        f"{revision} {then:8,.0f} bets/s, ratio {now / then:.3f}",
                        flush=True,
                    )
                print(f"{ledger:<9} median ratio {statistics.median(ratios):.3f} over {pairs}")
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(other)], check=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m bench.compare REV   (e.g. make bench-compare REV=90e484e)")
    compare(sys.argv[1])
