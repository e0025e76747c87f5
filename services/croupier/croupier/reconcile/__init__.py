"""Wallet reconciliation: every stake, credit and refund of a period, against the ledger.

What is compared
----------------
Ledger side, from the ``wagers`` read model (:mod:`croupier.projection.wagers`): each
accepted wager expects one wallet ``debit`` of its stake; each settlement result that
returns money expects one ``credit`` of ``returned`` (a voided round's result: one
``refund``) under its ``message_id``. A result that returns nothing expects no row.

Wallet side: the rows of its transaction log (:mod:`croupier.reconcile.wallet`).

The cut-off rule
----------------
- The period is a range of ledger positions ``A..B`` (``--positions A:B``); ``--from`` and
  ``--to`` name times and become positions by the ledger's ``recorded_at`` (the first
  position recorded at or after ``--from``, the last before ``--to``). A movement belongs to
  the period by the position of the ledger fact that makes it: a wager by its acceptance, a
  result or refund by its round's settlement or void. The report names ``A..B`` and the
  hash at ``B``, which ``croupier verify --anchor B:HASH`` checks.
- The head is pinned when the run starts: facts recorded later are not seen, so the run's
  answer depends only on the ledger up to that head and the wallet input.
- Wallet rows are matched against the whole ledger up to the head. Rows matching a movement
  before the period (``earlier``) or after it (``later``) are counted, not flagged.
- In transit, not missing: a result of the period with no wallet credit is ``in_transit``
  when it was settled after the wallet's latest credit or refund less ``lag`` (the
  wallet's export ended before it could apply it); a debit for a wager the ledger never
  saw is ``in_transit`` when it occurred after the time of position ``B`` less ``lag``
  (the feed had not reached the ledger at the cut-off). ``in_transit`` rows are listed,
  and are not discrepancies: with nothing else, the exit status is 0.
- The wallet debits a stake before the ledger accepts the wager: export the wallet from a
  little before the period's start, so that the debits of the period's first wagers are in
  it (debits of earlier wagers are counted as ``earlier``, not flagged).

Discrepancy kinds, in report order: ``missing_in_wallet``, ``unknown_to_ledger``,
``duplicate_credit``, ``amount_mismatch``, ``currency_mismatch``, ``debit_without_wager``
(a debit for a wager the ledger rejected or never saw, or a second debit of one wager),
``wager_without_debit``, ``in_transit``. The per-player net difference is what the wallet
did to the player's balance less what the ledger says, per currency, over the
discrepancies (``in_transit`` excluded).

Scale and crashes
-----------------
The wallet rows are staged in chunks into a temporary table of the ledger's database and
compared by SQL joins; discrepancies are streamed out. Memory stays flat as the period
grows. Nothing is written but temporary tables (gone with the connection, also after
SIGKILL) and the read model's catch-up, which is itself crash-safe: a killed run leaves
nothing that changes the next run's answer.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from croupier.ledger import Ledger
from croupier.ledger.chain import format_timestamp
from croupier.projection import Session, open_store
from croupier.projection.projector import Projector
from croupier.projection.wagers import WagersProjection
from croupier.reconcile.wallet import BadRow, WalletRow

__all__ = [
    "KINDS",
    "Discrepancy",
    "Period",
    "PeriodError",
    "Reconciliation",
    "Summary",
    "resolve_period",
]

KINDS: Final = (
    "missing_in_wallet",
    "unknown_to_ledger",
    "duplicate_credit",
    "amount_mismatch",
    "currency_mismatch",
    "debit_without_wager",
    "wager_without_debit",
    "in_transit",
)
MOVEMENTS: Final = ("debit", "credit", "refund")
MAX_CHUNK: Final = 100_000
MAX_BAD_ROWS_KEPT: Final = 1_000
_TIME: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
_WALLET_COLUMNS: Final = WalletRow._fields


class PeriodError(Exception):
    """The period asked for does not exist in the ledger."""


@dataclass(frozen=True, slots=True)
class Period:
    """Ledger positions ``first..last`` (inclusive), the times they were recorded, and hashes."""

    first: int
    last: int
    first_at: str
    last_at: str
    last_hash: str
    head: int
    head_hash: str


@dataclass(frozen=True, slots=True)
class Discrepancy:
    """One exception, with the ids that locate it and the amounts on each side."""

    kind: str
    movement: str
    line: int | None
    transaction_id: str | None
    message_id: str | None
    table_id: str | None
    round_id: str | None
    bet_id: str | None
    player_id: str | None
    wallet_currency: str | None
    wallet_amount: int | None
    ledger_currency: str | None
    ledger_amount: int | None
    ledger_position: int | None
    occurred_at: str | None
    detail: str | None


@dataclass
class Summary:
    """Counts and amounts of a reconciliation (discrepancies are streamed separately)."""

    period: Period
    lag_seconds: int
    wallet_rows: int = 0
    bad_rows: list[BadRow] = field(default_factory=list)
    bad_row_count: int = 0
    #: currency -> movement -> [count, amount]
    matched: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    #: currency -> kind -> [count, wallet amount, ledger amount]
    discrepancies: dict[str, dict[str, list[int]]] = field(default_factory=dict)
    #: earlier / later -> count of wallet rows matching movements outside the period
    outside: dict[str, int] = field(default_factory=dict)

    @property
    def finding_count(self) -> int:
        """Discrepancies (in transit excluded) plus bad wallet rows."""
        found = sum(
            counts[0]
            for kinds in self.discrepancies.values()
            for kind, counts in kinds.items()
            if kind != "in_transit"
        )
        return found + self.bad_row_count

    @property
    def ok(self) -> bool:
        return self.finding_count == 0


async def _recorded(ledger: Ledger, position: int) -> tuple[datetime, str]:
    page = await ledger.read_all(position - 1, 1)
    assert page and page[0].position == position, f"position {position} must exist"
    return page[0].recorded_at, page[0].hash


async def _position_before(ledger: Ledger, moment: datetime, head: int) -> int:
    """The last position recorded before ``moment`` (0 if none); ``recorded_at`` rises."""
    low, high = 0, head
    while low < high:
        middle = (low + high + 1) // 2
        at, _ = await _recorded(ledger, middle)
        if at < moment:
            low = middle
        else:
            high = middle - 1
    return low


async def resolve_period(
    ledger: Ledger,
    head: int,
    *,
    positions: tuple[int, int] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
) -> Period:
    """The period's positions from ``positions`` (inclusive) or from times, up to ``head``."""
    if head == 0:
        raise PeriodError("the ledger is empty: there is nothing to reconcile")
    if positions is not None:
        first, last = positions
    else:
        first = 1 if start is None else await _position_before(ledger, start, head) + 1
        last = head if end is None else await _position_before(ledger, end, head)
    if not 1 <= first <= last <= head:
        raise PeriodError(
            f"the period covers positions {first}..{last}, but the ledger holds 1..{head}"
        )
    first_at, _ = await _recorded(ledger, first)
    last_at, last_hash = await _recorded(ledger, last)
    _, head_hash = await _recorded(ledger, head)
    return Period(
        first,
        last,
        format_timestamp(first_at),
        format_timestamp(last_at),
        last_hash,
        head,
        head_hash,
    )


def _text(moment: str) -> str:
    assert _TIME.fullmatch(moment), f"{moment!r} is not a ledger timestamp"
    return f"'{moment}'"


def _shift(moment: str, seconds: int) -> str:
    return format_timestamp(datetime.fromisoformat(moment) + timedelta(seconds=seconds))


class Reconciliation:
    """One comparison on one database session; build with :meth:`run`."""

    def __init__(self, session: Session, summary: Summary) -> None:
        self.session = session
        self.summary = summary

    @classmethod
    async def prepare_ledger(cls, ledger: Ledger) -> int:
        """Bring the ``wagers`` read model up to the head; the head, pinned."""
        projector = Projector(ledger, open_store(ledger), [WagersProjection()], batch=5_000)
        await projector.setup()
        head = await ledger.last_position()
        await projector.catch_up(upto=head)
        return head

    async def run(
        self,
        chunks: AsyncIterator[Sequence[WalletRow | BadRow]],
        on_staged: Callable[[int], None] | None = None,
    ) -> Summary:
        """Stage the wallet rows (chunk by chunk), compare, and fill in the summary."""
        await self.session.execute(
            "CREATE TEMP TABLE wallet_tx (line bigint, transaction_id text, kind text, "
            "message_id text, table_id text, round_id text, bet_id text, player_id text, "
            "currency text, amount bigint, occurred_at text)"
        )
        async for chunk in chunks:
            await self._stage(chunk)
            if on_staged is not None:
                on_staged(len(chunk))
        await self._compare()
        await self._summarise()
        return self.summary

    async def _stage(self, chunk: Sequence[WalletRow | BadRow]) -> None:
        assert len(chunk) <= MAX_CHUNK, f"chunks hold at most {MAX_CHUNK} rows"
        good = [row for row in chunk if type(row) is WalletRow]
        for bad in chunk:
            if type(bad) is BadRow:
                self.summary.bad_row_count += 1
                if len(self.summary.bad_rows) < MAX_BAD_ROWS_KEPT:
                    self.summary.bad_rows.append(bad)
        if good:
            await self.session.copy_rows("wallet_tx", _WALLET_COLUMNS, good)
            self.summary.wallet_rows += len(good)

    async def _compare(self) -> None:
        p, lag = self.summary.period, self.summary.lag_seconds
        horizon = await self.session.fetch(
            "SELECT max(occurred_at) FROM wallet_tx WHERE kind <> 'debit'"
        )
        latest = horizon[0][0]
        values = {
            "after": int(p.first) - 1,
            "upto": int(p.last),
            "head": int(p.head),
            # results settled after this may not have reached the wallet's export
            "credit_transit": _text(_shift(latest or p.last_at, -lag)),
            # debits after this may not have reached the ledger by position B
            "debit_transit": _text(_shift(p.last_at, -lag)),
        }
        for statement in _COMPARE:
            await self.session.execute(statement.format(**values))

    async def _summarise(self) -> None:
        s, summary = self.session, self.summary
        # int(): PostgreSQL sums bigints as numeric
        for kind, currency, count, amount in await s.fetch(_MATCHED):
            summary.matched.setdefault(currency, {}).setdefault(kind, [0, 0])
            summary.matched[currency][kind][0] += int(count)
            summary.matched[currency][kind][1] += int(amount)
        for kind, currency, count, wallet, ledger in await s.fetch(_FOUND):
            totals = [int(count), int(wallet), int(ledger)]
            summary.discrepancies.setdefault(currency, {})[kind] = totals
        for verdict, count in await s.fetch(_OUTSIDE):
            summary.outside[verdict] = summary.outside.get(verdict, 0) + int(count)

    async def discrepancies(self, page: int = 5_000) -> AsyncIterator[Discrepancy]:
        """Every discrepancy (and row in transit), in report order."""
        async for rows in self.session.stream(_LIST, (), page):
            for row in rows:
                yield Discrepancy(*row)

    async def player_differences(self, page: int = 5_000) -> AsyncIterator[tuple[str, str, int]]:
        """(player_id, currency, wallet less ledger) for every player whose balance differs."""
        async for rows in self.session.stream(_PLAYERS, (), page):
            for player, currency, difference in rows:
                yield player, currency, int(difference)


def stage_order(kinds: Iterable[str]) -> list[str]:
    """``kinds`` in report order."""
    return sorted(kinds, key=KINDS.index)


_FINDINGS_COLUMNS = (
    "kind, movement, line, transaction_id, message_id, table_id, round_id, bet_id, player_id, "
    "wallet_currency, wallet_amount, ledger_currency, ledger_amount, ledger_position, "
    "occurred_at, detail, wallet_net, ledger_net"
)

# The comparison, statement by statement. {after}, {upto}, {head} are integers and the
# {..._transit} times quoted ledger timestamps, checked before formatting.
_COMPARE: Final = (
    """CREATE TEMP TABLE wallet_credits AS
       SELECT line, transaction_id, kind, message_id, player_id, currency, amount, occurred_at,
              ROW_NUMBER() OVER (PARTITION BY message_id ORDER BY occurred_at, line) AS n
       FROM wallet_tx WHERE kind <> 'debit'""",
    """CREATE TEMP TABLE wallet_debits AS
       SELECT line, transaction_id, table_id, round_id, bet_id, player_id, currency, amount,
              occurred_at,
              ROW_NUMBER() OVER (PARTITION BY table_id, round_id, bet_id
                                 ORDER BY occurred_at, line) AS n
       FROM wallet_tx WHERE kind = 'debit'""",
    "CREATE INDEX wallet_credits_message ON wallet_credits (message_id)",
    "CREATE INDEX wallet_debits_wager ON wallet_debits (table_id, round_id, bet_id)",
    "ANALYZE wallet_credits",
    "ANALYZE wallet_debits",
    """CREATE TEMP TABLE findings (kind text, movement text, line bigint,
       transaction_id text, message_id text, table_id text, round_id text, bet_id text,
       player_id text, wallet_currency text, wallet_amount bigint, ledger_currency text,
       ledger_amount bigint, ledger_position bigint, occurred_at text, detail text,
       wallet_net bigint, ledger_net bigint)""",
    # -- credits and refunds, each wallet row against its result
    """CREATE TEMP TABLE credit_checks AS
       SELECT c.line, c.transaction_id, c.kind, c.message_id, c.player_id AS wallet_player,
              c.currency AS wallet_currency, c.amount AS wallet_amount, c.occurred_at,
              r.table_id, r.round_id, r.player_id AS ledger_player,
              r.currency AS ledger_currency, r.returned + r.refunded AS ledger_amount,
              r.position,
              CASE WHEN r.message_id IS NULL THEN 'unknown_to_ledger'
                   WHEN c.n > 1 THEN 'duplicate_credit'
                   WHEN r.position <= {after} THEN 'earlier'
                   WHEN r.position > {upto} THEN 'later'
                   WHEN r.currency <> c.currency THEN 'currency_mismatch'
                   WHEN r.returned + r.refunded <> c.amount THEN 'amount_mismatch'
                   ELSE 'matched' END AS verdict
       FROM wallet_credits c
       LEFT JOIN results r ON r.message_id = c.message_id AND r.position <= {head}""",
    f"""INSERT INTO findings ({_FINDINGS_COLUMNS})
       SELECT verdict, kind, line, transaction_id, message_id, table_id, round_id, NULL,
              COALESCE(ledger_player, wallet_player), wallet_currency, wallet_amount,
              ledger_currency, ledger_amount, position, occurred_at,
              CASE verdict WHEN 'duplicate_credit' THEN 'applied again'
                           WHEN 'unknown_to_ledger' THEN 'no such result in the ledger'
                           ELSE NULL END,
              wallet_amount,
              CASE WHEN verdict IN ('amount_mismatch', 'currency_mismatch')
                   THEN ledger_amount ELSE 0 END
       FROM credit_checks
       WHERE verdict NOT IN ('matched', 'earlier', 'later')""",
    # -- results of the period that no wallet row credited
    f"""INSERT INTO findings ({_FINDINGS_COLUMNS})
       SELECT CASE WHEN r.settled_at > {{credit_transit}} THEN 'in_transit'
                   ELSE 'missing_in_wallet' END,
              CASE r.status WHEN 'voided' THEN 'refund' ELSE 'credit' END, NULL, NULL,
              r.message_id, r.table_id, r.round_id, NULL, r.player_id, NULL, NULL,
              r.currency, r.returned + r.refunded, r.position, r.settled_at,
              CASE r.status WHEN 'voided' THEN 'round voided' ELSE 'round settled' END,
              0, r.returned + r.refunded
       FROM results r
       WHERE r.position > {{after}} AND r.position <= {{upto}} AND r.returned + r.refunded > 0
         AND NOT EXISTS (SELECT 1 FROM wallet_credits c WHERE c.message_id = r.message_id)""",
    # -- debits, each wallet row against its wager
    """CREATE TEMP TABLE debit_checks AS
       SELECT x.*,
              CASE WHEN n > 1 THEN 'debit_without_wager'
                   WHEN NOT known AND rejection IS NULL AND occurred_at > {debit_transit}
                        THEN 'in_transit'
                   WHEN NOT known THEN 'debit_without_wager'
                   WHEN position <= {after} THEN 'earlier'
                   WHEN position > {upto} THEN 'later'
                   WHEN ledger_currency <> currency THEN 'currency_mismatch'
                   WHEN ledger_amount <> amount THEN 'amount_mismatch'
                   ELSE 'matched' END AS verdict
       FROM (
           SELECT d.*, w.stake AS ledger_amount, w.position,
                  COALESCE(w.currency, (SELECT a.currency FROM wagers a
                      WHERE a.table_id = w.table_id AND a.round_id = w.round_id
                        AND a.bet_id = w.ante_bet_id)) AS ledger_currency,
                  COALESCE(w.player_id, (SELECT a.player_id FROM wagers a
                      WHERE a.table_id = w.table_id AND a.round_id = w.round_id
                        AND a.bet_id = w.ante_bet_id)) AS ledger_player,
                  w.bet_id IS NOT NULL AS known,
                  CASE WHEN w.bet_id IS NULL THEN (
                      SELECT 'rejected (' || rw.code || '): ' || rw.reason
                      FROM rejected_wagers rw
                      WHERE rw.table_id = d.table_id AND rw.round_id = d.round_id
                        AND rw.bet_id = d.bet_id AND rw.position <= {head}
                      ORDER BY rw.position LIMIT 1) END AS rejection
           FROM wallet_debits d
           LEFT JOIN wagers w ON w.table_id = d.table_id AND w.round_id = d.round_id
                             AND w.bet_id = d.bet_id AND w.position <= {head}
       ) AS x""",
    f"""INSERT INTO findings ({_FINDINGS_COLUMNS})
       SELECT verdict, 'debit', line, transaction_id, NULL, table_id, round_id, bet_id,
              COALESCE(ledger_player, player_id), currency, amount,
              ledger_currency, ledger_amount, position, occurred_at,
              CASE WHEN n > 1 THEN 'debited again'
                   WHEN NOT known THEN COALESCE(rejection, 'never seen by the ledger')
                   ELSE NULL END,
              -amount,
              CASE WHEN verdict IN ('amount_mismatch', 'currency_mismatch')
                   THEN -ledger_amount ELSE 0 END
       FROM debit_checks
       WHERE verdict NOT IN ('matched', 'earlier', 'later')""",
    # -- wagers of the period that no wallet row debited
    f"""INSERT INTO findings ({_FINDINGS_COLUMNS})
       SELECT 'wager_without_debit', 'debit', NULL, NULL, NULL, w.table_id, w.round_id, w.bet_id,
              COALESCE(w.player_id, a.player_id), NULL, NULL,
              COALESCE(w.currency, a.currency), w.stake, w.position, w.accepted_at,
              'wager ' || w.spot, 0, -w.stake
       FROM wagers w
       LEFT JOIN wagers a ON a.table_id = w.table_id AND a.round_id = w.round_id
                         AND a.bet_id = w.ante_bet_id
       WHERE w.position > {{after}} AND w.position <= {{upto}}
         AND NOT EXISTS (SELECT 1 FROM wallet_debits d WHERE d.table_id = w.table_id
                         AND d.round_id = w.round_id AND d.bet_id = w.bet_id)""",
)
_MATCHED: Final = """
    SELECT kind, wallet_currency, count(*), sum(wallet_amount) FROM credit_checks
    WHERE verdict = 'matched' GROUP BY kind, wallet_currency
    UNION ALL
    SELECT 'debit', currency, count(*), sum(amount) FROM debit_checks
    WHERE verdict = 'matched' GROUP BY currency
"""
_FOUND: Final = """
    SELECT kind, COALESCE(ledger_currency, wallet_currency), count(*),
           COALESCE(sum(wallet_amount), 0), COALESCE(sum(ledger_amount), 0)
    FROM findings GROUP BY kind, COALESCE(ledger_currency, wallet_currency)
"""
_OUTSIDE: Final = """
    SELECT verdict, count(*) FROM credit_checks WHERE verdict IN ('earlier', 'later')
    GROUP BY verdict
    UNION ALL
    SELECT verdict, count(*) FROM debit_checks WHERE verdict IN ('earlier', 'later')
    GROUP BY verdict
"""
_ORDER: Final = " ".join(f"WHEN '{kind}' THEN {i}" for i, kind in enumerate(KINDS))
_LIST: Final = f"""
    SELECT kind, movement, line, transaction_id, message_id, table_id, round_id, bet_id,
           player_id, wallet_currency, wallet_amount, ledger_currency, ledger_amount,
           ledger_position, occurred_at, detail
    FROM findings
    ORDER BY CASE kind {_ORDER} END, ledger_position, line, message_id, table_id, round_id, bet_id
"""
_PLAYERS: Final = """
    SELECT player_id, currency, sum(amount) FROM (
        SELECT player_id, wallet_currency AS currency, wallet_net AS amount FROM findings
        WHERE kind <> 'in_transit' AND wallet_net <> 0
        UNION ALL
        SELECT player_id, ledger_currency, -ledger_net FROM findings
        WHERE kind <> 'in_transit' AND ledger_net <> 0
    ) AS differences
    GROUP BY player_id, currency HAVING sum(amount) <> 0 ORDER BY player_id, currency
"""


def as_dict(item: Discrepancy) -> dict[str, Any]:
    """A discrepancy as the JSON report lists it."""
    return {name: getattr(item, name) for name in Discrepancy.__dataclass_fields__}
