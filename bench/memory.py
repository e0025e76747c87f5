"""Peak memory of ``croupier replay`` against feed size: bounded, not growing with the feed.

Each replay runs in a process of its own (peak RSS from ``wait4``) on a fresh SQLite ledger.
Anchor: the same interpreter importing the replay's modules and exiting (what any replay
costs before its first line). Figures: peak RSS per feed size and its excess over the
anchor; the ratio of the largest feed's excess to the smallest one's is ~1 when memory is
bounded and grows with the feed when it is not. ``CROUPIER_BENCH_MEMORY_ROUNDS`` (comma
separated, default ``250,1000``) sets the sizes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CROUPIER = (sys.executable, "-m", "floor.cli")
_SEEDED = ("--seed", "3", "--out")
ANCHOR = "import croupier.settlement.replay, croupier.ledger.sqlite, croupier.cli"


def peak_rss_mib(argv: list[str]) -> tuple[float, float]:
    """(peak RSS in MiB, seconds) of running ``argv`` to completion."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        error = process.stderr.read().decode() if process.stderr else ""
        raise RuntimeError(f"{argv[:4]} failed: {error[-2000:]}")
    return usage.ru_maxrss / 1024, time.perf_counter() - start


def feed(rounds: int, directory: Path) -> tuple[Path, int]:
    path = directory / f"feed-{rounds}.jsonl"
    subprocess.run(
        [*_CROUPIER, "simulate", "--rounds", str(rounds), *_SEEDED, str(path)],
        check=True,
        capture_output=True,
    )
    with path.open("rb") as lines:
        return path, sum(1 for _ in lines)


def run() -> None:
    sizes = [int(n) for n in os.environ.get("CROUPIER_BENCH_MEMORY_ROUNDS", "250,1000").split(",")]
    print(f"load {os.getloadavg()[0]:.1f} (1 min)")
    anchor, _ = peak_rss_mib([sys.executable, "-c", ANCHOR])
    print(f"anchor: interpreter with the replay's modules   {anchor:8.1f} MiB")
    excess: list[float] = []
    with tempfile.TemporaryDirectory(prefix="croupier-bench-memory-") as scratch:
        directory = Path(scratch)
        for rounds in sizes:
            path, events = feed(rounds, directory)
            ledger = f"sqlite:///{directory / f'ledger-{rounds}.sqlite'}"
            outputs = ["--out", str(directory / "out.jsonl")]
            outputs += ["--rejections", str(directory / "rejected.jsonl"), "--ledger", ledger]
            argv = [*_CROUPIER, "replay", str(path), *outputs]
            peak, seconds = peak_rss_mib(argv)
            excess.append(peak - anchor)
            print(
                f"replay {rounds:>6,} rounds {events:>9,} events  peak {peak:8.1f} MiB"
                f"  over anchor {peak - anchor:7.1f} MiB  ({seconds:.0f}s)"
            )
    if len(excess) > 1 and excess[0] > 0:
        growth = sizes[-1] / sizes[0]
        print(
            f"ratio: x{growth:.0f} the feed -> x{excess[-1] / excess[0]:.2f} the memory over anchor"
        )
