"""The operator's wallet as the studio's game server drives it, writing its transaction log.

It debits each wager the game server accepts (a bet, or the play wager of a call or bet
decision), once, however often the message is sent; a wager the settlement service
rejected is not debited. It credits each settlement result once per ``message_id``
(redeliveries ignored), as a ``refund`` when the round was voided (one row for the result,
or, asked to, one per wager, naming its ``bet_id``); a result that returns nothing is no
money movement and writes no row. The log is the format
:mod:`contract.wallet` defines and ``croupier reconcile`` reads (CSV with a header, or JSON
Lines).

On request it misbehaves, a counted number of times each, and notes what it planted:
``drop_credit``, ``double_credit``, ``change_amount``, ``wrong_currency``,
``unknown_credit``, ``debit_rejected`` (debits a wager that was then rejected) and
``drop_debit``. Asked to, it also debits a counted number of rejected wagers and then
returns their stakes (a ``refund`` naming the wager): what a wallet that debits before the
settlement service decides does; the money went back, so that is no discrepancy.
"""

from __future__ import annotations

import csv
import json
import random
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TextIO

from contract.feed import WAGER_ACTIONS
from contract.wallet import FIELDS
from studio.message import FeedMessage

#: What each misbehaviour shows as in a reconciliation report.
FINDS: Final = {
    "drop_credit": "missing_in_wallet",
    "double_credit": "duplicate_credit",
    "change_amount": "amount_mismatch",
    "wrong_currency": "currency_mismatch",
    "unknown_credit": "unknown_to_ledger",
    "debit_rejected": "debit_without_wager",
    "drop_debit": "wager_without_debit",
}
_CHANCE: Final = 0.25  # an eligible row misbehaves with this chance until its count is used


@dataclass(frozen=True)
class WalletFaults:
    """How many times to misbehave in each way (all 0: an honest wallet)."""

    drop_credit: int = 0
    double_credit: int = 0
    change_amount: int = 0
    wrong_currency: int = 0
    unknown_credit: int = 0
    debit_rejected: int = 0
    drop_debit: int = 0

    def __post_init__(self) -> None:
        for field in fields(self):
            if getattr(self, field.name) < 0:
                raise ValueError(f"wallet fault {field.name} must be >= 0")

    @classmethod
    def parse(cls, spec: str) -> WalletFaults:
        """``drop_credit=2,double_credit=1``."""
        counts: dict[str, int] = {}
        names = {f.name for f in fields(cls)}
        for part in filter(None, spec.split(",")):
            name, _, count = part.partition("=")
            if name not in names or not count.isdigit():
                raise ValueError(f"wallet faults are NAME=COUNT with NAME in {sorted(names)}")
            counts[name] = int(count)
        return cls(**counts)


@dataclass(frozen=True, slots=True)
class Planted:
    """A misbehaviour the wallet planted: its name and the ids that locate it."""

    fault: str
    message_id: str | None = None
    wager: tuple[str, str, str] | None = None

    @property
    def finds(self) -> str:
        """The discrepancy kind a reconciliation must report for it."""
        return FINDS[self.fault]


class WalletLog:
    """Applies money movements and writes each as a row of the transaction log."""

    def __init__(
        self,
        path: Path,
        faults: WalletFaults | None = None,
        *,
        seed: int = 0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        refunds: int = 0,
        refund_per_wager: bool = False,
    ) -> None:
        if path.suffix not in (".csv", ".jsonl"):
            raise ValueError(f"{path}: a wallet log is .csv or .jsonl")
        self.path = path
        self._out: TextIO = path.open("w", encoding="utf-8", newline="")
        self._csv = csv.writer(self._out) if path.suffix == ".csv" else None
        if self._csv is not None:
            self._csv.writerow(FIELDS)
        self._left = {
            f.name: getattr(faults or WalletFaults(), f.name) for f in fields(WalletFaults)
        }
        self._rng = random.Random(seed)
        self._clock = clock
        self._debited: set[tuple[str, str, str]] = set()
        self._antes: dict[tuple[str, str, str], tuple[str, str]] = {}
        self._credited: set[str] = set()
        self._count = 0
        self.planted: list[Planted] = []
        self.duplicates = 0
        self._refunds = refunds
        self._per_wager = refund_per_wager
        #: The rejected wagers debited and then refunded.
        self.refunded: list[tuple[str, str, str]] = []

    # -- stakes ----------------------------------------------------------------------

    def debit(self, message: FeedMessage, *, rejected: bool = False) -> None:
        """The game server sent this feed message: debit the wager it makes, if any."""
        wager = self._wager(message.event)
        if wager is None:
            return
        ids, player, currency, amount = wager
        if ids in self._debited:
            return  # the same wager sent again
        if rejected:
            self._rejected(ids, player, currency, amount)
            return
        self._debited.add(ids)
        if self._misbehave("drop_debit"):
            self.planted.append(Planted("drop_debit", wager=ids))
            return
        self._write("debit", None, ids, player, currency, amount)

    def _rejected(self, ids: tuple[str, str, str], player: str, currency: str, amount: int) -> None:
        """A wager the settlement service rejected: not debited, unless asked to."""
        if self._misbehave("debit_rejected"):
            self._debited.add(ids)
            self.planted.append(Planted("debit_rejected", wager=ids))
            self._write("debit", None, ids, player, currency, amount)
        elif self._refunds and self._rng.random() < _CHANCE:
            self._refunds -= 1
            self._debited.add(ids)
            self.refunded.append(ids)
            self._write("debit", None, ids, player, currency, amount)
            self._write("refund", None, ids, player, currency, amount)

    def _wager(
        self, event: Mapping[str, Any] | None
    ) -> tuple[tuple[str, str, str], str, str, int] | None:
        if event is None:
            return None
        payload = event["payload"]
        table, round_ = event["table_id"], event["round_id"]
        if event["event_type"] == "bet.placed":
            ids = (table, round_, payload["bet_id"])
            if payload["spot"] == "ante":
                self._antes.setdefault(ids, (payload["player_id"], payload["currency"]))
            return ids, payload["player_id"], payload["currency"], payload["amount"]
        if event["event_type"] == "decision.made" and payload["action"] in WAGER_ACTIONS:
            ante = self._antes.get((table, round_, payload["ante_bet_id"]))
            if ante is None:
                return None  # no ante the wallet knows: nothing it could debit
            return (table, round_, payload["bet_id"]), *ante, payload["amount"]
        if event["event_type"] in ("round.completed", "round.voided"):
            for key in [k for k in self._antes if k[0] == table and k[1] == round_]:
                del self._antes[key]
        return None

    # -- results ---------------------------------------------------------------------

    def credit(self, result: Mapping[str, Any]) -> None:
        """Apply one settlement result (a repeated ``message_id`` is ignored)."""
        message_id = str(result["message_id"])
        if message_id in self._credited:
            self.duplicates += 1
            return
        self._credited.add(message_id)
        amount = int(result["returned_total"])
        if amount == 0:
            return
        voided = all(bet["outcome"] == "refund" for bet in result["bets"])
        kind = "refund" if voided else "credit"
        table, round_ = str(result["table_id"]), str(result["round_id"])
        player, currency = str(result["player_id"]), str(result["currency"])
        # (bet id, currency, amount) of each row: the result's, or each wager's of a void
        rows = [("", currency, amount)]
        if voided and self._per_wager:
            rows = [(str(b["bet_id"]), currency, int(b["returned"])) for b in result["bets"]]
            rows = [row for row in rows if row[2] > 0]
        if self._misbehave("drop_credit"):
            self.planted.append(Planted("drop_credit", message_id))
            return
        bet, _, money = rows[0]  # a misbehaviour acts on the first row
        if self._misbehave("change_amount"):
            self.planted.append(Planted("change_amount", message_id))
            rows[0] = (bet, currency, money + self._rng.randint(1, 100))
        elif self._misbehave("wrong_currency"):
            self.planted.append(Planted("wrong_currency", message_id))
            rows[0] = (bet, "XTS" if currency != "XTS" else "XXX", money)  # ISO 4217 testing
        for bet, paid_in, money in rows:
            self._write(kind, message_id, (table, round_, bet), player, paid_in, money)
        if self._misbehave("double_credit"):
            self.planted.append(Planted("double_credit", message_id))
            bet, paid_in, money = rows[-1]
            self._write(kind, message_id, (table, round_, bet), player, paid_in, money)
        ids = (table, round_, "")
        if self._misbehave("unknown_credit"):
            made_up = str(uuid.UUID(int=self._rng.getrandbits(128)))
            self.planted.append(Planted("unknown_credit", made_up))
            self._write("credit", made_up, ids, player, currency, self._rng.randint(1, 10_000))

    # -- writing ---------------------------------------------------------------------

    def _misbehave(self, fault: str) -> bool:
        if self._left[fault] and self._rng.random() < _CHANCE:
            self._left[fault] -= 1
            return True
        return False

    def _write(
        self,
        kind: str,
        message_id: str | None,
        ids: tuple[str, str, str],
        player: str,
        currency: str,
        amount: int,
    ) -> None:
        self._count += 1
        at = self._clock().astimezone(UTC).isoformat().replace("+00:00", "Z")
        row = (f"w{self._count}", kind, message_id or "", *ids, player, currency, amount, at)
        if self._csv is not None:
            self._csv.writerow(row)
        else:
            record = dict(zip(FIELDS, row, strict=True))
            self._out.write(json.dumps({k: v for k, v in record.items() if v != ""}) + "\n")

    @property
    def unused(self) -> dict[str, int]:
        """Misbehaviours asked for that found no row to act on."""
        unused = {name: left for name, left in self._left.items() if left}
        return unused | ({"refunds": self._refunds} if self._refunds else {})

    def close(self) -> None:
        self._out.close()

    def __enter__(self) -> WalletLog:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
