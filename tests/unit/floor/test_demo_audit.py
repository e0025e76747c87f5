"""The demo's closing audit: which rounds are open, unpaid or mispaid, and the verdict."""

from __future__ import annotations

from collections import Counter

from floor.demo import Audit, dealt_rounds
from studio import StudioConfig, every_paytable, simulate
from studio.config import Faults

A, B, C = ("T1", "R1"), ("T1", "R2"), ("T2", "R1")


def eur(amount: int) -> Counter[str]:
    return Counter({"EUR": amount})


def test_every_round_closed_and_paid_is_ok() -> None:
    audit = Audit({A: set(), B: set()}, {A: eur(100), B: eur(0)}, {A: eur(100)})
    assert audit.ok
    assert audit.report()[-1] == "demo: OK, every closed round paid to the unit"


def test_a_round_the_wallets_were_not_paid_fails_and_is_listed() -> None:
    audit = Audit({A: set(), B: set()}, {A: eur(100), B: eur(50)}, {A: eur(100)})
    assert not audit.ok
    assert audit.unpaid() == [B]
    report = audit.report()
    assert "  UNPAID T1 R2: ledger returned {'EUR': 50}, wallets {}" in report
    assert report[-1].startswith("demo: FAILED: 1 unpaid round(s)")


def test_a_round_paid_another_amount_fails() -> None:
    audit = Audit({A: set()}, {A: eur(100)}, {A: eur(90)})
    assert audit.unpaid() == [A] and audit.mismatched() == ["EUR"]
    assert not audit.ok


def test_an_open_round_is_reported_and_fails_only_without_an_injected_fault() -> None:
    faulted = Audit({A: set(), C: {"duplicate_card"}}, {A: eur(10)}, {A: eur(10)})
    assert faulted.ok
    assert "  open T2 R1: faults injected: duplicate_card" in faulted.report()
    lost = Audit({A: set(), C: {"redelivery"}}, {A: eur(10)}, {A: eur(10)})
    assert not lost.ok and lost.unexplained() == [C]
    assert "rounds dealt 2, closed 1, open 1" in lost.report()


def test_a_round_closed_twice_or_unbalanced_fails_and_is_listed() -> None:
    once = Audit({A: set(), B: set()}, {A: eur(10), B: eur(0)}, {A: eur(10)}, Counter([A, B]))
    assert once.ok and "closed once each: 2 of 2; postings balanced in 2" in once.report()
    twice = Audit({A: set()}, {A: eur(10)}, {A: eur(10)}, Counter([A, A]))
    assert not twice.ok and twice.twice() == [A]
    assert "  CLOSED 2 TIMES T1 R1" in twice.report()
    assert "1 closed more than once" in twice.report()[-1]
    unbalanced = Audit({A: set()}, {A: eur(10)}, {A: eur(10)}, Counter([A]), frozenset([A]))
    assert not unbalanced.ok
    assert "  POSTINGS UNBALANCED T1 R1" in unbalanced.report()


def test_dealt_rounds_come_from_the_feed_with_their_faults() -> None:
    config = StudioConfig(every_paytable(players=3), rounds=40, seed=3, faults=Faults(void=0.5))
    messages = list(simulate(config))
    rounds = dealt_rounds(messages)
    assert len(rounds) == 40
    assert any("void" in faults for faults in rounds.values())


def test_two_runs_of_one_seed_under_other_table_ids_share_no_event_id() -> None:
    def ids(prefix: str) -> set[str]:
        tables = tuple(
            spec.__class__(f"{prefix}-{spec.table_id}", spec.paytable, spec.players, spec.boxes)
            for spec in every_paytable(players=3)
        )
        return {m.event_id for m in simulate(StudioConfig(tables, rounds=10, seed=2))}

    first, again, other = ids("run-a"), ids("run-a"), ids("run-b")
    assert first == again
    assert not first & other
