"""The consumer tells a transient fault from a bad message by the ledger port's own error
types: a ledger out of reach, or a head its key may not append after, is retried, never
quarantined."""

from __future__ import annotations

from pathlib import Path

import pytest

from croupier.ledger import HeadNotSigned, LedgerError, StreamAppend, open_ledger
from croupier.ledger.signing import LedgerKey
from croupier.settlement.consumer import is_transient
from croupier.settlement.facts import Fact


async def test_a_ledger_out_of_reach_is_a_fault_to_retry(tmp_path: Path) -> None:
    ledger = open_ledger(f"sqlite:///{tmp_path / 'no such directory' / 'ledger.db'}")
    try:
        with pytest.raises(LedgerError) as raised:
            await ledger.append([StreamAppend("s", 0, [Fact("t", {"n": 1}, "k1")])])
        assert is_transient(raised.value)
    finally:
        await ledger.close()


def test_a_permanent_fault_is_not_retried() -> None:
    assert not is_transient(ValueError("a message settlement fails on"))


async def test_a_key_that_handed_the_ledger_over_is_retried_not_quarantined(
    tmp_path: Path,
) -> None:
    old, new = LedgerKey.generate(), LedgerKey.generate()
    async with open_ledger(f"sqlite:///{tmp_path / 'ledger.db'}", old) as ledger:
        await ledger.migrate()
        await ledger.append([StreamAppend("s", 0, [Fact("t", {"n": 1}, "k1")])])
        await ledger.rotate_key(new.public)
        with pytest.raises(HeadNotSigned) as raised:
            await ledger.append([StreamAppend("s", 1, [Fact("t", {"n": 2}, "k2")])])
    # No message is at fault: nothing is quarantined, nothing acknowledged, until the
    # service runs with a key that may append.
    assert is_transient(raised.value)
