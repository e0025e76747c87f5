"""Replay throughput of this tree against another revision, side by side.

``python -m bench.compare REV`` (``make bench-compare REV=...``) checks ``REV`` out in a
temporary git worktree and runs ``python -m bench replay`` in both trees at the same time,
``BENCH_COMPARE_PAIRS`` times. Started together, both sides see the same host: on a machine
whose speed drifts by more than the difference measured, runs one after the other compare
the host as much as the code. Prints, per ledger and pair, each side's bets/s with the raw
append anchor of its own run, and the ratio (this tree over ``REV``); then the median ratio.
Where both sides print bets per CPU-second of the replay, those and their ratio too: CPU
time is what a loaded machine disturbs least.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

PAIRS: Final = int(os.environ.get("BENCH_COMPARE_PAIRS", "5"))
ROOT: Final = Path(__file__).resolve().parent.parent
#: What ``bench.replay`` prints per ledger: bets/s, its raw append anchor, and (where the
#: revision prints it) bets per CPU-second.
_REPLAY: Final = re.compile(
    r"^replay (\w+)\s+([\d,]+) bets/s.*\n\s+anchor: raw \w+ append\s+([\d,]+) events/s.*"
    r"(?:\n\s+cpu:\s+([\d,]+) bets per CPU-second)?",
    re.MULTILINE,
)

Figures = dict[str, tuple[int, int, int]]  # ledger -> (bets/s, anchor events/s, bets/CPU-s)


def tree_path(tree: Path) -> str:
    """The PYTHONPATH that imports a tree's own packages before any installed ones."""
    return os.pathsep.join([str(tree), *sorted(str(p) for p in (tree / "services").iterdir())])


def _figures(report: str) -> Figures:
    def number(text: str) -> int:
        return int(text.replace(",", "") or 0)

    figures = {
        name: (number(bets), number(anchor), number(cpu))
        for name, bets, anchor, cpu in _REPLAY.findall(report)
    }
    if not figures:
        raise RuntimeError(f"bench replay printed no figures:\n{report}")
    return figures


def side_by_side(trees: list[Path]) -> list[Figures]:
    """``bench replay`` in every tree at once; each tree's figures."""
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "bench", "replay"],
            cwd=tree,
            env={**os.environ, "PYTHONPATH": tree_path(tree)},
            stdout=subprocess.PIPE,
            text=True,
        )
        for tree in trees
    ]
    reports = [child.communicate()[0] for child in children]
    if any(child.returncode for child in children):
        raise RuntimeError("bench replay failed:\n" + "\n".join(reports))
    return [_figures(report) for report in reports]


def compare(revision: str, pairs: int = PAIRS) -> None:
    """Print this tree's replay throughput over ``revision``'s, pair by pair."""
    ratios: dict[str, list[float]] = {}
    cpu_ratios: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as folder:
        other = Path(folder) / "tree"
        git = ["git", "-C", str(ROOT)]
        subprocess.run([*git, "worktree", "add", "--detach", str(other), revision], check=True)
        try:
            for pair in range(1, pairs + 1):
                now, then = side_by_side([ROOT, other])
                for ledger in now.keys() & then.keys():
                    (bets, anchor, cpu), (old_bets, old_anchor, old_cpu) = now[ledger], then[ledger]
                    ratios.setdefault(ledger, []).append(bets / old_bets)
                    per_cpu = ""
                    if cpu and old_cpu:
                        cpu_ratios.setdefault(ledger, []).append(cpu / old_cpu)
                        per_cpu = (
                            f"; per CPU-second {cpu:,} against {old_cpu:,}, "
                            f"ratio {cpu / old_cpu:.3f}"
                        )
                    print(
                        f"{ledger:<9} pair {pair}: this tree {bets:7,} bets/s (anchor "
                        f"{anchor:,} events/s), {revision} {old_bets:7,} bets/s (anchor "
                        f"{old_anchor:,} events/s), ratio {bets / old_bets:.3f}{per_cpu}",
                        flush=True,
                    )
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(other)], check=True)
    for ledger, values in sorted(ratios.items()):
        print(f"{ledger:<9} median ratio {statistics.median(values):.3f} over {len(values)}")
    for ledger, values in sorted(cpu_ratios.items()):
        print(
            f"{ledger:<9} median ratio per CPU-second {statistics.median(values):.3f} "
            f"over {len(values)}"
        )


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m bench.compare REV   (e.g. make bench-compare REV=90e484e)")
    compare(sys.argv[1])
