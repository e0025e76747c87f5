"""PAR sheets: ``holdem.odds.par`` against a C + OpenMP reference, in CPU-seconds.

The reference (``bench/par_reference.c``) is the same exact enumeration written in C: per
flop, every hand valued once and put in strength order, dealt out to the turn/river pairs
and swept (:mod:`holdem.odds.sweep`), the decisions and the sheet's counts added up per pay
table (:mod:`holdem.odds.kernel`, :mod:`holdem.odds.par`). It is built here with the
machine's gcc (``CFLAGS``) and runs on ``THREADS`` threads; Python runs
``holdem.odds.par.par_counts`` on as many worker processes. Both are whole programs started
by the bench, timed by their total CPU time (user + system, every thread and worker
process), so other work on a shared machine does not count; wall time is printed beside it.
Both print their integer counts, and the bench checks they are equal before it compares.

By default a sample of the canonical flops (every ``BENCH_PAR_STEP``-th, default 10) is
run and the CPU time scaled to all 1,755; ``BENCH_PAR_STEP=1`` runs the full sheets. The
reference reads the evaluator's look-up tables from a file the bench writes, so both value
hands alike; valuing hands is under 2% of either's time.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

import numpy as np

from holdem import evaluator
from holdem.odds import kernel, par
from holdem.odds.combos import canonical_flops, hole_class_table
from holdem.odds.situation import ante_multipliers, category_of_strength, qualifying_strength
from holdem.paytable import Game, load_paytable, paytable_ids

THREADS: Final = 2
#: The reference is built twice: at gcc's usual -O2, and at -O3 for the host's CPU, as numba
#: compiles (LLVM -O3, host CPU); the second takes about half the CPU time of the first.
CFLAGS: Final = (("-O2", "-fopenmp"), ("-O3", "-march=native", "-fopenmp"))
SOURCE: Final = Path(__file__).with_name("par_reference.c")
#: The issue's bounds: Python CPU time over the reference's.
TARGETS: Final = {Game.CASINO_HOLDEM: 1.5, Game.TEXAS_HOLDEM_PLUS: 2.0}
FLOPS: Final = 1755


def _flops(step: int) -> list[tuple[tuple[int, int, int], int]]:
    return list(canonical_flops())[::step]


def _write_tables(path: Path) -> None:
    t = evaluator._T
    sums, strengths, suit5 = kernel.five_card_tables()
    arrays = [
        t.np_card_keys,
        t.np_rank_bits,
        t.np_suit7,
        suit5,
        t.rank7,
        t.np_flush,
        category_of_strength(),
        par._five_key_of_strength(),
        sums,
        strengths,
        np.array([qualifying_strength()]),
        hole_class_table(),
    ]
    with path.open("wb") as out:
        for array in arrays:
            flat = np.ascontiguousarray(array, dtype=np.int64).ravel()
            out.write(np.int64(flat.size).tobytes())
            out.write(flat.tobytes())


def _timed(
    command: list[str], scale: float, env: dict[str, str] | None = None
) -> tuple[list[int], float, float]:
    """(counts, CPU seconds, wall seconds) of a program, its flops' part scaled by ``scale``.

    The program prints ``cpu SECONDS`` (its CPU time over the flops alone, every thread
    and worker) and then its counts; start-up (tables, imports, compiled code) counts once.
    """
    before = _cpu(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - started
    total = _cpu(resource.RUSAGE_CHILDREN) - before
    if done.returncode:
        raise RuntimeError(f"{command[0]} failed: {done.stderr.strip()}")
    first, rest = done.stdout.split("\n", 1)
    work = float(first.removeprefix("cpu "))
    startup = total - work
    return [int(x) for x in rest.split()], startup + work * scale, wall


def _multipliers(game: Game) -> list[str]:
    tables = [load_paytable(i) for i in paytable_ids()]
    return [",".join(map(str, ante_multipliers(t))) for t in tables if t.game is game]


def worker(game: str, step: int) -> None:
    """The Python side as its own program: print the counts of every pay table of ``game``."""
    tables = [load_paytable(i) for i in paytable_ids()]
    chosen = [t for t in tables if t.game is Game(game)]
    # Start-up, counted once: the compiled kernel is loaded by a first flop, as
    # ``croupier par --write`` does in its parent process before its workers fork.
    par.par_counts(chosen, processes=1, flops=_flops(step)[:1])
    before = _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN)
    counts = par.par_counts(chosen, processes=THREADS, flops=_flops(step))
    work = _cpu(resource.RUSAGE_SELF) + _cpu(resource.RUSAGE_CHILDREN) - before
    print(f"cpu {work:.6f}")
    print(" ".join(str(x) for c in counts for x in np.ravel(c).tolist()))


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def run() -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        raise RuntimeError("bench.par needs gcc to build the C reference (apt-get install gcc)")
    step = int(os.environ.get("BENCH_PAR_STEP", "10"))
    flops = _flops(step)
    scale = FLOPS / len(flops)
    with tempfile.TemporaryDirectory(prefix="croupier-par-") as tmp:
        tables, flop_file = Path(tmp, "tables"), Path(tmp, "flops")
        builds = []
        for i, flags in enumerate(CFLAGS):
            binary = Path(tmp, f"par_reference_{i}")
            subprocess.run([gcc, *flags, "-o", str(binary), str(SOURCE)], check=True)
            builds.append((" ".join(flags), binary))
        _write_tables(tables)
        flop_file.write_text("".join(f"{a} {b} {c} {w}\n" for (a, b, c), w in flops))
        env = {**os.environ, "OMP_NUM_THREADS": str(THREADS)}
        print(
            f"{len(flops)} of {FLOPS} canonical flops (BENCH_PAR_STEP={step}), CPU time scaled x"
            f"{scale:.2f} to the full sheet; C reference on {THREADS} threads, Python on "
            f"{THREADS} worker processes"
        )
        for game in (Game.CASINO_HOLDEM, Game.TEXAS_HOLDEM_PLUS):
            short = "ch" if game is Game.CASINO_HOLDEM else "thp"
            multipliers = _multipliers(game)
            ours, py_cpu, py_wall = _timed(
                [sys.executable, "-m", "bench.par", "worker", game.value, str(step)], scale
            )
            print(
                f"PAR {game} ({len(multipliers)} pay table(s)): holdem.odds.par "
                f"{py_cpu:6.1f} CPU-s (this run's wall {py_wall:.1f} s)"
            )
            target = TARGETS[game]
            for flags, binary in builds:
                reference, c_cpu, c_wall = _timed(
                    [str(binary), str(tables), short, str(flop_file), *multipliers], scale, env
                )
                if reference != ours:
                    raise AssertionError(f"{game}: the C reference and holdem.odds.par disagree")
                ratio = py_cpu / c_cpu
                print(
                    f"  C reference, gcc {flags}: {c_cpu:6.1f} CPU-s (wall {c_wall:.1f} s), "
                    f"counts equal; holdem.odds.par / C = {ratio:.2f}x "
                    f"(target <= {target}x: {'met' if ratio <= target else 'missed'})"
                )


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(sys.argv[2], int(sys.argv[3]))
    else:
        run()
