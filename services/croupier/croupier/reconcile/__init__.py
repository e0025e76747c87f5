"""Wallet reconciliation: every stake, credit and refund of a period, against the ledger.

What is compared
----------------
Ledger side, from the ``wagers`` read model (:mod:`croupier.projection.wagers`): each
accepted wager expects one wallet ``debit`` of its stake; each settlement result that
returns money expects one ``credit`` of ``returned`` (a voided round's result: one
``refund``) under its ``message_id``, or, for a voided round, one ``refund`` per wager
(``message_id`` and ``bet_id``) of the stake it returns (``wager_results``). A result is
applied in the form of its first wallet row (in ``(occurred_at, line)`` order); a row for
the result after that, or for a wager already refunded, is ``duplicate_credit``. A result
that returns nothing expects no row.

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
- A stake refund (a ``refund`` naming a wager instead of a ``message_id``) returns one
  debit the ledger does not account for (a wager it rejected or never saw, or a second
  debit) of the same wager, currency and amount, in (occurred_at, line) order: the money
  went back, so neither is flagged; the pairs are counted as ``refunded_stake``. An
  unreturned debit is still ``debit_without_wager``; a stake refund with no such debit is
  ``unknown_to_ledger``.
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
On PostgreSQL a CSV wallet log is loaded by ``COPY`` and checked by SQL
(:mod:`croupier.reconcile.bulk`); other inputs are staged chunk by chunk. Each side of the
ledger is then joined once with the wallet rows it expects (a full join, so what only one
side has is found in the same pass) and only what does not match is written out and
streamed; matched rows are only counted. Memory stays flat as the period grows. Nothing is
written but temporary tables (gone with the connection, also after SIGKILL) and the read
model's catch-up, which is itself crash-safe: a killed run leaves nothing that changes the
next run's answer.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final, get_args

from croupier.ledger import Ledger
from croupier.ledger.chain import format_timestamp
from croupier.projection import Session, open_store
from croupier.projection.projector import Progress, Projector
from croupier.projection.wagers import WagersProjection
from croupier.reconcile.bulk import copy_csv
from croupier.reconcile.contract import Discrepancy, Kind
from croupier.reconcile.wallet import BadRow, WalletRow, file_chunks

__all__ = [
    "COMPARE_STEPS",
    "KINDS",
    "Discrepancy",
    "Period",
    "PeriodError",
    "Reconciliation",
    "Summary",
    "resolve_period",
]

KINDS: Final[tuple[str, ...]] = get_args(Kind)
DISCREPANCY_FIELDS: Final = tuple(Discrepancy.model_fields)
MOVEMENTS: Final = ("debit", "credit", "refund")
#: Debits the ledger does not account for that the wallet returned with a stake refund.
REFUNDED_STAKE: Final = "refunded_stake"
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
    """One comparison on one database session: stage the wallet rows (:meth:`stage`,
    :meth:`stage_file`), then :meth:`compare`; or both at once with :meth:`run` or
    :meth:`run_file`."""

    def __init__(self, session: Session, summary: Summary) -> None:
        self.session = session
        self.summary = summary
        self._staging = False

    @classmethod
    async def prepare_ledger(
        cls, ledger: Ledger, on_progress: Callable[[Progress], None] | None = None
    ) -> int:
        """Bring the ``wagers`` read model up to the head; the head, pinned."""
        projector = Projector(ledger, open_store(ledger), [WagersProjection()], batch=5_000)
        await projector.setup()
        head = await ledger.last_position()
        await projector.catch_up(upto=head, on_progress=on_progress)
        return head

    async def run(
        self,
        chunks: AsyncIterator[Sequence[WalletRow | BadRow]],
        on_staged: Callable[[int], None] | None = None,
    ) -> Summary:
        """Stage the wallet rows (chunk by chunk), compare, and fill in the summary."""
        await self.stage(chunks, on_staged)
        return await self.compare()

    async def run_file(self, path: Path, on_staged: Callable[[int], None] | None = None) -> Summary:
        """:meth:`run` on a wallet log file."""
        await self.stage_file(path, on_staged)
        return await self.compare()

    async def stage(
        self,
        chunks: AsyncIterator[Sequence[WalletRow | BadRow]],
        on_staged: Callable[[int], None] | None = None,
    ) -> None:
        """Stage wallet rows, chunk by chunk; ``on_staged(n)`` after each chunk."""
        await self._create_staging()
        async for chunk in chunks:
            await self._stage(chunk)
            if on_staged is not None:
                on_staged(len(chunk))

    async def stage_file(self, path: Path, on_staged: Callable[[int], None] | None = None) -> None:
        """Stage a wallet log file: where the database can load a CSV itself
        (:func:`croupier.reconcile.bulk.copy_csv`), it does, and only the rows it cannot
        vouch for are checked here, one by one."""
        await self._create_staging()
        loaded = await copy_csv(self.session, path, "wallet_tx")
        if loaded is None:
            await self.stage(file_chunks(path), on_staged)
        else:
            self.summary.wallet_rows += loaded.staged
            if on_staged is not None:
                on_staged(loaded.staged)
            await self.stage(loaded.leftovers, on_staged)

    async def compare(self, on_step: Callable[[int], None] | None = None) -> Summary:
        """Compare the staged rows with the ledger and fill in the summary;
        ``on_step(1)`` after each of :data:`COMPARE_STEPS` statements."""
        await self._compare(on_step)
        await self._summarise(on_step)
        return self.summary

    async def _create_staging(self) -> None:
        if not self._staging:
            await self.session.execute(_STAGING)
            self._staging = True

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

    async def _compare(self, on_step: Callable[[int], None] | None) -> None:
        p, lag = self.summary.period, self.summary.lag_seconds
        horizon = await self.session.fetch(
            "SELECT max(occurred_at) FROM wallet_tx WHERE kind <> 'debit'"
        )
        latest = horizon[0][0]
        values = {
            "after": int(p.first) - 1,
            "upto": int(p.last),
            "head": int(p.head),
            "kind_only": " (kind)" if self.session.dialect == "postgres" else "",
            "per_wager": _PER_WAGER,
            # results settled after this may not have reached the wallet's export
            "credit_transit": _text(_shift(latest or p.last_at, -lag)),
            # debits after this may not have reached the ledger by position B
            "debit_transit": _text(_shift(p.last_at, -lag)),
        }
        for statement in _COMPARE:
            await self.session.execute(statement.format(**values))
            if on_step is not None:
                on_step(1)

    async def _summarise(self, on_step: Callable[[int], None] | None) -> None:
        summary = self.summary
        # int(): PostgreSQL sums bigints as numeric
        for verdict, movement, currency, count, amount in await self.session.fetch(_COUNTED):
            if verdict in ("earlier", "later"):
                summary.outside[verdict] = summary.outside.get(verdict, 0) + int(count)
                continue
            if verdict == "refunded":
                movement = REFUNDED_STAKE
            totals = summary.matched.setdefault(currency, {}).setdefault(movement, [0, 0])
            totals[0] += int(count)
            totals[1] += int(amount)
        for kind, currency, count, wallet, ledger in await self.session.fetch(_FOUND):
            totals = [int(count), int(wallet), int(ledger)]
            summary.discrepancies.setdefault(currency, {})[kind] = totals
        if on_step is not None:
            on_step(1)

    async def discrepancies(self, page: int = 5_000) -> AsyncGenerator[Discrepancy, None]:
        """Every discrepancy (and row in transit), in report order."""
        async with aclosing(self.session.stream(_LIST, (), page)) as pages:
            async for rows in pages:
                for row in rows:
                    yield Discrepancy.model_construct(
                        **dict(zip(DISCREPANCY_FIELDS, row, strict=True))
                    )

    async def player_differences(
        self, page: int = 5_000
    ) -> AsyncGenerator[tuple[str, str, int], None]:
        """(player_id, currency, wallet less ledger) for every player whose balance differs."""
        async with aclosing(self.session.stream(_PLAYERS, (), page)) as pages:
            async for rows in pages:
                for player, currency, difference in rows:
                    yield player, currency, int(difference)


_FINDINGS_COLUMNS = (
    "kind, movement, line, transaction_id, message_id, table_id, round_id, bet_id, player_id, "
    "wallet_currency, wallet_amount, ledger_currency, ledger_amount, ledger_position, "
    "occurred_at, detail, wallet_net, ledger_net"
)
_STAGING: Final = (
    "CREATE TEMP TABLE wallet_tx (line bigint, transaction_id text, kind text, "
    "message_id text, table_id text, round_id text, bet_id text, player_id text, "
    "currency text, amount bigint, occurred_at text)"
)
# 1 for a refund of one wager of a result (it names both), else 0.
_PER_WAGER: Final = (
    "CASE WHEN kind = 'refund' AND message_id IS NOT NULL AND bet_id IS NOT NULL THEN 1 ELSE 0 END"
)
# The play wager of a call or bet decision has the player and currency of its ante.
_ANTE: Final = """(SELECT a.{column} FROM wagers a WHERE a.table_id = w.table_id
                   AND a.round_id = w.round_id AND a.bet_id = w.ante_bet_id)"""

# The comparison, statement by statement: each side of the ledger is joined once with the
# wallet rows it expects (a full join: what only one side has is found in the same pass),
# and what does not match is listed in ``findings``. {after}, {upto}, {head} are integers
# and the {..._transit} times quoted ledger timestamps, checked before formatting;
# {kind_only} limits ANALYZE to one column where the database can; {per_wager} is
# _PER_WAGER.
#: The last steps of every check of a wallet row against the ledger: in the period, then
#: the same currency and amount.
_IN_PERIOD_AND_EQUAL: Final = """WHEN position <= {after} THEN 'earlier'
                   WHEN position > {upto} THEN 'later'
                   WHEN ledger_currency <> wallet_currency THEN 'currency_mismatch'
                   WHEN ledger_amount <> wallet_amount THEN 'amount_mismatch'
                   ELSE 'matched' END AS verdict"""
_COMPARE: Final = (
    # A temporary table has no statistics until asked; the joins need its size, no more.
    "ANALYZE wallet_tx{kind_only}",
    # -- repeats: the wallet rows after the first of their movement, in (occurred_at, line)
    # order; ordered only where a movement has more than one row. A result is applied once:
    # by one row, or by one refund per wager; whichever its first row is, a row for the
    # result after it, or for a wager already refunded, is applied again. A wager is
    # debited once.
    """CREATE TEMP TABLE repeats AS
       SELECT line FROM (
           SELECT line, per_wager,
                  ROW_NUMBER() OVER (PARTITION BY message_id ORDER BY occurred_at, line) AS n,
                  FIRST_VALUE(per_wager) OVER (PARTITION BY message_id
                                               ORDER BY occurred_at, line) AS first_per_wager,
                  ROW_NUMBER() OVER (PARTITION BY message_id, bet_id
                                     ORDER BY occurred_at, line) AS m
           FROM (SELECT line, message_id, bet_id, occurred_at, {per_wager} AS per_wager
                 FROM wallet_tx
                 WHERE kind <> 'debit' AND message_id IN (
                     SELECT message_id FROM wallet_tx WHERE kind <> 'debit'
                     GROUP BY message_id HAVING count(*) > 1)) AS applied
       ) AS numbered
       WHERE n > 1 AND (first_per_wager = 0 OR per_wager = 0 OR m > 1)
       UNION ALL
       SELECT line FROM (
           SELECT line, ROW_NUMBER() OVER (PARTITION BY table_id, round_id, bet_id
                                           ORDER BY occurred_at, line) AS n
           FROM wallet_tx
           WHERE kind = 'debit' AND (table_id, round_id, bet_id) IN (
               SELECT table_id, round_id, bet_id FROM wallet_tx WHERE kind = 'debit'
               GROUP BY table_id, round_id, bet_id HAVING count(*) > 1)
       ) AS numbered
       WHERE n > 1""",
    # -- the refunds of a result wager by wager (the first of each wager), and the results
    # the wallet applied so
    """CREATE TEMP TABLE wager_refunds AS
       SELECT line, transaction_id, message_id, table_id, round_id, bet_id, player_id,
              currency, amount, occurred_at
       FROM wallet_tx
       WHERE {per_wager} = 1 AND line NOT IN (SELECT line FROM repeats)""",
    "CREATE INDEX wager_refunds__message_bet ON wager_refunds (message_id, bet_id)",
    "CREATE TEMP TABLE refunded_per_wager AS SELECT DISTINCT message_id FROM wager_refunds",
    """CREATE TEMP TABLE findings (kind text, movement text, line bigint,
       transaction_id text, message_id text, table_id text, round_id text, bet_id text,
       player_id text, wallet_currency text, wallet_amount bigint, ledger_currency text,
       ledger_amount bigint, ledger_position bigint, occurred_at text, detail text,
       wallet_net bigint, ledger_net bigint)""",
    # -- credits and result refunds against the results (n: the row's place among the
    # wallet rows of its message_id)
    """CREATE TEMP TABLE credit_checks AS
       SELECT x.*,
              CASE WHEN line IS NULL AND settled_at > {credit_transit} THEN 'in_transit'
                   WHEN line IS NULL THEN 'missing_in_wallet'
                   WHEN position IS NULL THEN 'unknown_to_ledger'
                   WHEN n > 1 THEN 'duplicate_credit'
"""
    + _IN_PERIOD_AND_EQUAL
    + """
       FROM (
           SELECT c.line, c.transaction_id, c.n, c.occurred_at, c.bet_id,
                  COALESCE(c.kind, CASE r.status WHEN 'voided' THEN 'refund'
                                   ELSE 'credit' END) AS movement,
                  COALESCE(c.message_id, r.message_id) AS message_id,
                  COALESCE(r.player_id, c.player_id) AS player_id,
                  c.currency AS wallet_currency, c.amount AS wallet_amount,
                  r.table_id, r.round_id, r.currency AS ledger_currency,
                  r.returned + r.refunded AS ledger_amount, r.position, r.settled_at, r.status
           FROM (SELECT * FROM (
                     SELECT line, transaction_id, kind, message_id, bet_id, player_id, currency,
                            amount, occurred_at, {per_wager} AS per_wager,
                            CASE WHEN line IN (SELECT line FROM repeats) THEN 2 ELSE 1 END AS n
                     FROM wallet_tx WHERE kind <> 'debit' AND message_id IS NOT NULL) AS a
                 WHERE per_wager = 0 OR n > 1) AS c
           FULL JOIN results r ON r.message_id = c.message_id AND r.position <= {head}
       ) AS x
       WHERE line IS NOT NULL
          OR (position > {after} AND position <= {upto} AND ledger_amount > 0
              AND message_id NOT IN (SELECT message_id FROM refunded_per_wager))""",
    # -- refunds wager by wager against each wager's line of its result; the wagers of a
    # result refunded so that the wallet did not refund
    """CREATE TEMP TABLE refund_checks AS
       SELECT x.*,
              CASE WHEN line IS NULL AND settled_at > {credit_transit} THEN 'in_transit'
                   WHEN line IS NULL THEN 'missing_in_wallet'
                   WHEN position IS NULL THEN 'unknown_to_ledger'
"""
    + _IN_PERIOD_AND_EQUAL
    + """
       FROM (
           SELECT c.line, c.transaction_id, c.occurred_at, c.message_id, c.bet_id,
                  COALESCE(r.table_id, c.table_id) AS table_id,
                  COALESCE(r.round_id, c.round_id) AS round_id,
                  COALESCE(r.player_id, c.player_id) AS player_id,
                  c.currency AS wallet_currency, c.amount AS wallet_amount,
                  r.currency AS ledger_currency, wr.returned AS ledger_amount, wr.position,
                  r.settled_at, r.status,
                  CASE WHEN r.message_id IS NULL THEN 0 ELSE 1 END AS known_result
           FROM wager_refunds c
           LEFT JOIN results r ON r.message_id = c.message_id AND r.position <= {head}
           LEFT JOIN wager_results wr ON wr.message_id = r.message_id AND wr.bet_id = c.bet_id
           UNION ALL
           SELECT NULL, NULL, NULL, wr.message_id, wr.bet_id, r.table_id, r.round_id,
                  r.player_id, NULL, NULL, r.currency, wr.returned, wr.position, r.settled_at,
                  r.status, 1
           FROM refunded_per_wager f
           JOIN results r ON r.message_id = f.message_id
           JOIN wager_results wr ON wr.message_id = r.message_id
           LEFT JOIN wager_refunds c ON c.message_id = wr.message_id AND c.bet_id = wr.bet_id
           WHERE c.line IS NULL AND wr.returned > 0
             AND r.position > {after} AND r.position <= {upto}
       ) AS x""",
    # -- debits against the wagers
    """CREATE TEMP TABLE debit_checks AS
       SELECT x.*,
              CASE WHEN line IS NULL THEN 'wager_without_debit'
                   WHEN n > 1 THEN 'debit_without_wager'
                   WHEN NOT known AND rejection IS NULL AND occurred_at > {debit_transit}
                        THEN 'in_transit'
                   WHEN NOT known THEN 'debit_without_wager'
"""
    + _IN_PERIOD_AND_EQUAL
    + """
       FROM (
           SELECT d.line, d.transaction_id, d.n,
                  COALESCE(d.table_id, w.table_id) AS table_id,
                  COALESCE(d.round_id, w.round_id) AS round_id,
                  COALESCE(d.bet_id, w.bet_id) AS bet_id,
                  COALESCE(d.occurred_at, w.accepted_at) AS occurred_at,
                  d.player_id AS wallet_player, d.currency AS wallet_currency,
                  d.amount AS wallet_amount, w.stake AS ledger_amount, w.position, w.spot,
                  COALESCE(w.currency, {ante_currency}) AS ledger_currency,
                  COALESCE(w.player_id, {ante_player}) AS ledger_player,
                  w.bet_id IS NOT NULL AS known,
                  CASE WHEN w.bet_id IS NULL THEN (
                      SELECT 'rejected (' || rw.code || '): ' || rw.reason
                      FROM rejected_wagers rw
                      WHERE rw.table_id = d.table_id AND rw.round_id = d.round_id
                        AND rw.bet_id = d.bet_id AND rw.position <= {head}
                      ORDER BY rw.position LIMIT 1) END AS rejection
           FROM (SELECT line, transaction_id, table_id, round_id, bet_id, player_id, currency,
                        amount, occurred_at,
                        CASE WHEN line IN (SELECT line FROM repeats) THEN 2 ELSE 1 END AS n
                 FROM wallet_tx WHERE kind = 'debit') AS d
           FULL JOIN wagers w
                  ON w.table_id = d.table_id AND w.round_id = d.round_id
                 AND w.bet_id = d.bet_id AND w.position <= {head}
       ) AS x
       WHERE line IS NOT NULL OR (position > {after} AND position <= {upto})""".replace(
        "{ante_currency}", _ANTE.format(column="currency")
    ).replace("{ante_player}", _ANTE.format(column="player_id")),
    # -- stake refunds: each returns one debit the ledger does not account for (a wager it
    # rejected or never saw, or a second debit), of the same wager, currency and amount
    """CREATE TEMP TABLE unaccounted_debits AS
       SELECT line, table_id, round_id, bet_id, wallet_currency AS currency,
              wallet_amount AS amount,
              ROW_NUMBER() OVER (PARTITION BY table_id, round_id, bet_id, wallet_currency,
                                              wallet_amount
                                 ORDER BY occurred_at, line) AS k
       FROM debit_checks
       WHERE line IS NOT NULL AND verdict IN ('debit_without_wager', 'in_transit')""",
    "CREATE INDEX unaccounted_debits__wager ON unaccounted_debits (table_id, round_id, bet_id)",
    """CREATE TEMP TABLE stake_refunds AS
       SELECT r.*, u.line AS debit_line
       FROM (SELECT line, transaction_id, table_id, round_id, bet_id, player_id, currency,
                    amount, occurred_at,
                    ROW_NUMBER() OVER (PARTITION BY table_id, round_id, bet_id, currency, amount
                                       ORDER BY occurred_at, line) AS k
             FROM wallet_tx WHERE kind = 'refund' AND message_id IS NULL) AS r
       LEFT JOIN unaccounted_debits u
              ON u.table_id = r.table_id AND u.round_id = r.round_id AND u.bet_id = r.bet_id
             AND u.currency = r.currency AND u.amount = r.amount AND u.k = r.k""",
    f"""INSERT INTO findings ({_FINDINGS_COLUMNS})
       SELECT verdict, movement, line, transaction_id, message_id, table_id, round_id, bet_id,
              player_id, wallet_currency, wallet_amount, ledger_currency, ledger_amount,
              position, COALESCE(occurred_at, settled_at),
              CASE WHEN line IS NULL AND status = 'voided' THEN 'round voided'
                   WHEN line IS NULL THEN 'round settled'
                   WHEN verdict = 'duplicate_credit' THEN 'applied again'
                   WHEN verdict = 'unknown_to_ledger' THEN 'no such result in the ledger'
                   ELSE NULL END,
              COALESCE(wallet_amount, 0),
              CASE WHEN verdict IN ('amount_mismatch', 'currency_mismatch')
                     OR line IS NULL THEN ledger_amount ELSE 0 END
       FROM credit_checks
       WHERE verdict NOT IN ('matched', 'earlier', 'later')""",
    f"""INSERT INTO findings ({_FINDINGS_COLUMNS})
       SELECT verdict, 'refund', line, transaction_id, message_id, table_id, round_id, bet_id,
              player_id, wallet_currency, wallet_amount, ledger_currency, ledger_amount,
              position, COALESCE(occurred_at, settled_at),
              CASE WHEN line IS NULL THEN 'round voided; the wallet refunded its other wagers'
                   WHEN verdict = 'unknown_to_ledger' AND known_result = 1
                        THEN 'no such wager in this result'
                   WHEN verdict = 'unknown_to_ledger' THEN 'no such result in the ledger'
                   ELSE NULL END,
              COALESCE(wallet_amount, 0),
              CASE WHEN verdict IN ('amount_mismatch', 'currency_mismatch')
                     OR line IS NULL THEN ledger_amount ELSE 0 END
       FROM refund_checks
       WHERE verdict NOT IN ('matched', 'earlier', 'later')""",
    f"""INSERT INTO findings ({_FINDINGS_COLUMNS})
       SELECT verdict, 'debit', line, transaction_id, NULL, table_id, round_id, bet_id,
              COALESCE(ledger_player, wallet_player), wallet_currency, wallet_amount,
              ledger_currency, ledger_amount, position, occurred_at,
              CASE WHEN line IS NULL THEN 'wager ' || spot
                   WHEN n > 1 THEN 'debited again'
                   WHEN NOT known THEN COALESCE(rejection, 'never seen by the ledger')
                   ELSE NULL END,
              -COALESCE(wallet_amount, 0),
              CASE WHEN verdict IN ('amount_mismatch', 'currency_mismatch')
                     OR line IS NULL THEN -ledger_amount ELSE 0 END
       FROM debit_checks
       WHERE verdict NOT IN ('matched', 'earlier', 'later')
         AND (line IS NULL OR line NOT IN (SELECT debit_line FROM stake_refunds
                                           WHERE debit_line IS NOT NULL))""",
    f"""INSERT INTO findings ({_FINDINGS_COLUMNS})
       SELECT 'unknown_to_ledger', 'refund', line, transaction_id, NULL, table_id, round_id,
              bet_id, player_id, currency, amount, NULL, NULL, NULL, occurred_at,
              'stake refund with no debit of this wager the ledger does not account for',
              amount, 0
       FROM stake_refunds WHERE debit_line IS NULL""",
)
# What matched, what lies outside the period, and the debits refunded: counts and amounts.
_COUNTED: Final = """
    SELECT verdict, movement, wallet_currency, count(*), sum(wallet_amount) FROM credit_checks
    WHERE verdict IN ('matched', 'earlier', 'later') GROUP BY verdict, movement, wallet_currency
    UNION ALL
    SELECT verdict, 'refund', wallet_currency, count(*), sum(wallet_amount) FROM refund_checks
    WHERE verdict IN ('matched', 'earlier', 'later') GROUP BY verdict, wallet_currency
    UNION ALL
    SELECT verdict, 'debit', wallet_currency, count(*), sum(wallet_amount) FROM debit_checks
    WHERE verdict IN ('matched', 'earlier', 'later') GROUP BY verdict, wallet_currency
    UNION ALL
    SELECT 'refunded', 'debit', currency, count(*), sum(amount) FROM stake_refunds
    WHERE debit_line IS NOT NULL GROUP BY currency
"""
_FOUND: Final = """
    SELECT kind, COALESCE(ledger_currency, wallet_currency), count(*),
           COALESCE(sum(wallet_amount), 0), COALESCE(sum(ledger_amount), 0)
    FROM findings GROUP BY kind, COALESCE(ledger_currency, wallet_currency)
"""
_ORDER: Final = " ".join(f"WHEN '{kind}' THEN {i}" for i, kind in enumerate(KINDS))
_LIST: Final = f"""
    SELECT {", ".join(DISCREPANCY_FIELDS)}
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


#: Statements :meth:`Reconciliation.compare` runs, one ``on_step`` each.
COMPARE_STEPS: Final = len(_COMPARE) + 1


def as_dict(item: Discrepancy) -> dict[str, Any]:
    """A discrepancy as the JSON report lists it."""
    return item.model_dump()
