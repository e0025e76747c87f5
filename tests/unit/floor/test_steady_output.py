"""The demo's output never goes quiet: while the caller is busy (here: the main thread
sleeping, as a busy event loop or a long import would hold it), a line comes at least every
``every`` seconds, from a thread of its own; after ``rest`` nothing more."""

from __future__ import annotations

import itertools
import time

from floor.steady import SteadyOutput


def test_a_busy_caller_still_shows_it_is_at_work() -> None:
    lines: list[tuple[float, str]] = []
    with SteadyOutput(lambda line: lines.append((time.monotonic(), line)), every=0.1) as say:
        say("starting")
        time.sleep(0.65)
        say("done")
        said = len(lines)
        say.rest()
        time.sleep(0.3)

    assert lines[0][1] == "starting" and lines[-1][1] == "done"
    assert len(lines) == said  # resting: nothing more of its own
    assert 3 <= said - 2 <= 7, lines
    assert all("still at work" in line for _, line in lines[1:-1])
    gaps = [later - earlier for (earlier, _), (later, _) in itertools.pairwise(lines)]
    assert max(gaps) < 0.45, gaps  # 0.65 without it


def test_lines_said_often_enough_bring_nothing_of_its_own() -> None:
    lines: list[str] = []
    with SteadyOutput(lines.append, every=0.2) as say:
        for n in range(10):
            say(f"line {n}")
            time.sleep(0.02)
    assert lines == [f"line {n}" for n in range(10)]
