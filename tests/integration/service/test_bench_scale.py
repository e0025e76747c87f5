"""``bench scale``'s core on a small backlog: 2,000 messages drained by one and by two
``croupier serve`` processes in the partitioned mode, on the real RabbitMQ and PostgreSQL.

The bench prints its figures and never asserts them; what it checks, it checks the same way
whatever the size: every round closed once, every result at the wallet, nothing
dead-lettered, nothing rejected that one instance did not reject. Those checks must pass,
and the figures it reads (CPU from ``/proc``, messages from each instance's metrics) must be
there. The machine's own E(N) is the CPU of real processes deciding at once.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from conftest import POSTGRES_URL, scratch_database, scratch_vhost

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # the benchmarks live beside the services, not in them

from bench.scale import (  # noqa: E402
    Services,
    _decide_at_once,
    machine_efficiency,
    measure,
    print_report,
)

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("takeover")]


async def test_one_and_two_instances_settle_a_small_backlog_correctly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    services = Services(POSTGRES_URL, scratch_vhost, scratch_database)
    report = await measure(2000, (1, 2), services)
    print_report(report, None, {1: 1.0, 2: 0.97})
    assert report.problems() == {1: [], 2: []}, capsys.readouterr().out
    assert report.backlog >= 2000
    for run in report.runs:
        assert len(run.consumed) == len(run.instance_cpu) == run.instances
        # Every message was consumed by one instance or another (more after a handover).
        assert sum(run.consumed) >= report.backlog
        assert all(cpu > 0 for cpu in run.instance_cpu)
        assert run.database_cpu > 0 and run.broker_cpu > 0
        assert math.isfinite(run.balance) and run.seconds > 0
        assert 0 < run.drain_cpu < run.cpu  # start-up is counted in C(N), and shown apart
        # Each instance reports how long it held the ledger's append lock, within the run.
        assert all(0 < s.lock_held < run.seconds for s in run.scraped)
    printed = capsys.readouterr().out
    assert "correctness: passed" in printed
    assert printed.count("without start-up (context)") == 2
    assert printed.count("append lock held") == 2
    assert "the machine's own E(N), deciding alone with N processes at once" in printed
    assert "E(1) 1.00, E(2) 0.97" in printed


def test_a_process_of_the_machine_anchor_that_dies_fails_it_at_once() -> None:
    # A feed of -1 rounds is refused as each process builds it: nobody says ready.
    with pytest.raises(RuntimeError, match="did not start"):
        _decide_at_once(2, rounds=-1)


def test_the_machine_anchor_is_one_alone_and_a_ratio_of_cpu_seconds_for_more() -> None:
    found = machine_efficiency((1, 2), rounds=20)
    assert set(found) == {1, 2}
    assert found[1] == 1.0
    assert math.isfinite(found[2]) and 0.2 < found[2] < 5
