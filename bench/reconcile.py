"""Wallet reconciliation at scale: ``croupier reconcile`` on 1,000,000 results.

The ledger's read model holds ``RESULTS`` settlement results (one wager each; some won, some
voided) and the wallet log debits every wager and credits every result that returns money
(half the voided ones refunded wager by wager, a row naming the ``bet_id``), with
``PLANTED`` discrepancies of every kind (and ``PLANTED`` debits returned by a stake refund,
which must match). The read model is loaded straight into its tables, not projected from a
ledger (the projector's own rate, over a ledger a simulated studio settled, is the last
row), and its checkpoint put at the head, so the timed run is the reconciliation alone: the
command as an operator runs it, in a process of its own, from reading the file to the last
line of its JSON report. Rows: PostgreSQL with the CSV log (at a quarter of the size and
at full size), then PostgreSQL with the same log as JSON Lines, and SQLite with each.

Anchors, in the same run, beside each row: the same database reading the same rows. For
PostgreSQL and a CSV log, ``COPY`` of the CSV into a table; for SQLite, or a JSON Lines
log, the file parsed in Python (``csv.reader`` or ``json.loads`` per line) and its rows
inserted into a table (``executemany``; PostgreSQL: ``COPY`` of the records); each plus a
scan summing the read model's results and wagers. Each row gives wall seconds and the
child's CPU seconds (user + system: on a shared machine the steadier figure; for
PostgreSQL the server's share is not in it), and its peak RSS, which does not grow with
the period.
"""

from __future__ import annotations

import asyncio
import csv
import io
import itertools
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from contract.wallet import FIELDS
from croupier.ledger import open_ledger
from croupier.projection import open_store
from croupier.projection.projector import Projector
from croupier.projection.wagers import WagersProjection

RESULTS = int(os.environ.get("CROUPIER_BENCH_RESULTS", "1000000"))
#: (database, wallet log format) of the full-size rows; CROUPIER_BENCH_RECONCILE picks some,
#: e.g. ``sqlite.jsonl,postgres.csv``.
CASES = tuple(
    (database, f".{suffix}")
    for database, _, suffix in (
        case.partition(".")
        for case in os.environ.get(
            "CROUPIER_BENCH_RECONCILE", "postgres.csv,postgres.jsonl,sqlite.csv,sqlite.jsonl"
        ).split(",")
    )
)
PLANTED = min(1_000, RESULTS // 400)  # of each kind
ADMIN_URL = os.environ.get(
    "CROUPIER_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
STAMP = "2024-05-01T20:15:00.000000Z"
CREDIT_KINDS = ("missing_in_wallet", "duplicate_credit", "amount_mismatch", "currency_mismatch")
KINDS = (
    "missing_in_wallet",
    "unknown_to_ledger",
    "duplicate_credit",
    "amount_mismatch",
    "currency_mismatch",
    "debit_without_wager",
    "wager_without_debit",
)


#: Debits for wagers the ledger never saw that the wallet returned: planted, never flagged.
RETURNED = "refunded_stake"


def _ids(i: int) -> tuple[str, str, str, str, str]:
    table = f"t{i % 100}"
    return table, f"{table}:r{i}", f"b{i}", f"p{i % 50_000}", str(uuid.UUID(int=i))


def _draws(results: int) -> list[tuple[int, int, int]]:
    """(stake, returned, refunded) of results 1..results: 45% won, 5% voided."""
    rng = random.Random(5)
    out = [(0, 0, 0)]
    for _ in range(results):
        stake, roll = 100 * rng.randint(1, 10), rng.random()
        out.append((stake, 2 * stake if roll < 0.45 else 0, stake if roll > 0.95 else 0))
    return out


def _plants(draws: list[tuple[int, int, int]]) -> dict[str, set[int]]:
    """Disjoint results to plant each kind on (credit kinds on results that return money)."""
    rng = random.Random(9)
    paying = [i for i in range(1, len(draws)) if draws[i][1] or draws[i][2]]
    everyone = list(range(1, len(draws)))
    taken: set[int] = set()
    plants: dict[str, set[int]] = {}
    for kind in (*KINDS, RETURNED):
        pool = paying if kind in CREDIT_KINDS else everyone
        chosen: set[int] = set()
        while len(chosen) < PLANTED:
            i = rng.choice(pool)
            if i not in taken:
                chosen.add(i)
                taken.add(i)
        plants[kind] = chosen
    return plants


def _read_model(draws: list[tuple[int, int, int]]) -> dict[str, Iterator[tuple[Any, ...]]]:
    """The read model's rows, table by table: one result (one wager) at each position."""

    def wagers() -> Iterator[tuple[Any, ...]]:
        for i in range(1, len(draws)):
            table, round_, bet, player, _ = _ids(i)
            yield table, round_, bet, player, "EUR", "main", "ante", draws[i][0], None, f"e{i}", \
                i, STAMP  # fmt: skip

    def results() -> Iterator[tuple[Any, ...]]:
        for i in range(1, len(draws)):
            table, round_, bet, player, message = _ids(i)
            stake, returned, refunded = draws[i]
            status = "voided" if refunded else "settled"
            yield (message, table, round_, player, "EUR", status, "casino-holdem/classic",
                   stake, returned, refunded, json.dumps([bet]), i, STAMP, STAMP)  # fmt: skip

    def wager_results() -> Iterator[tuple[Any, ...]]:
        for i in range(1, len(draws)):
            table, round_, bet, _, message = _ids(i)
            stake, returned, refunded = draws[i]
            outcome = "refund" if refunded else "win" if returned else "lose"
            yield table, round_, bet, message, "ante", stake, returned + refunded, outcome, i

    return {"wagers": wagers(), "results": results(), "wager_results": wager_results()}


async def _load_postgres(url: str, draws: list[tuple[int, int, int]]) -> None:
    """Events 1..N and the read model; the checkpoint at N."""
    results = len(draws) - 1
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        await Projector(ledger, open_store(ledger), [WagersProjection()]).setup()
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO events (position, stream, version, type, data, key, recorded_at, "
            "prev_hash, hash) SELECT g, 'bench:' || g, 1, 'bench', '{}', 'k' || g, "
            "'2024-05-01T20:15:00Z', repeat('0', 64), repeat('0', 64) "
            "FROM generate_series(1, $1) AS g",
            results,
        )
        for table, records in _read_model(draws).items():
            await conn.copy_records_to_table(table, records=records, columns=_columns(table))
        await conn.execute(
            "UPDATE projection_checkpoints SET position = $1 WHERE name = 'wagers'", results
        )
        for table in ("events", "wagers", "results", "wager_results"):  # as autovacuum leaves them
            await conn.execute(f"VACUUM ANALYZE {table}")
    finally:
        await conn.close()


async def _load_sqlite(path: Path, draws: list[tuple[int, int, int]]) -> None:
    """:func:`_load_postgres` for a SQLite ledger file."""
    results = len(draws) - 1
    async with open_ledger(f"sqlite:///{path}") as ledger:
        await ledger.migrate()
        await Projector(ledger, open_store(ledger), [WagersProjection()]).setup()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.executemany(
            "INSERT INTO events (position, stream, version, type, data, key, recorded_at, "
            "prev_hash, hash) VALUES (?, 'bench:' || ?, 1, 'bench', '{}', 'k' || ?, "
            f"'{STAMP}', '{'0' * 64}', '{'0' * 64}')",
            ((i, i, i) for i in range(1, results + 1)),
        )
        for table, records in _read_model(draws).items():
            columns = _columns(table)
            marks = ", ".join("?" * len(columns))
            conn.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", records
            )
        conn.execute(
            "UPDATE projection_checkpoints SET position = ? WHERE name = 'wagers'", (results,)
        )
        conn.execute("COMMIT")
        conn.execute("ANALYZE")
    finally:
        conn.close()


def _columns(table: str) -> list[str]:
    (found,) = [t for t in WagersProjection.tables if t.name == table]
    return list(found.column_names)


def _write_wallet(path: Path, draws: list[tuple[int, int, int]]) -> int:
    """The wallet's log of every movement, with the planted discrepancies; rows written.

    CSV or JSON Lines by the suffix; odd voided results are refunded wager by wager."""
    plant = _plants(draws)
    count = 0
    with path.open("w", newline="") as handle:
        csv_out = csv.writer(handle) if path.suffix == ".csv" else None

        def write(row: tuple[Any, ...]) -> None:
            nonlocal count
            count += 1
            if csv_out is not None:
                csv_out.writerow(row)
            else:
                record = {k: v for k, v in zip(FIELDS, row, strict=True) if v != ""}
                handle.write(json.dumps(record) + "\n")

        if csv_out is not None:
            csv_out.writerow(FIELDS)
        for i in range(1, len(draws)):
            table, round_, bet, player, message = _ids(i)
            stake, returned, refunded = draws[i]
            money = returned + refunded
            kind = "refund" if refunded else "credit"
            if i not in plant["wager_without_debit"]:
                write((f"d{i}", "debit", "", table, round_, bet, player, "EUR", stake, STAMP))
            if i in plant["debit_without_wager"]:
                write((f"x{i}", "debit", "", table, round_, f"{bet}x", player, "EUR", 100, STAMP))
            if i in plant[RETURNED]:
                for movement in ("debit", "refund"):
                    write((f"{movement}{i}", movement, "", table, round_, f"{bet}y", player,
                           "EUR", 100, STAMP))  # fmt: skip
            if i in plant["unknown_to_ledger"]:
                write((f"u{i}", "credit", f"u-{message}", "", "", "", player, "EUR", 100, STAMP))
            if not money or i in plant["missing_in_wallet"]:
                continue
            amount = money + 1 if i in plant["amount_mismatch"] else money
            currency = "GBP" if i in plant["currency_mismatch"] else "EUR"
            copies = 2 if i in plant["duplicate_credit"] else 1
            per_wager = bet if refunded and i % 2 else ""
            for copy in range(copies):
                write((f"c{i}-{copy}", kind, message, "", "", per_wager, player, currency, amount,
                       "2024-05-01T21:00:00Z"))  # fmt: skip
    return count


@dataclass(frozen=True)
class Run:
    """One ``croupier reconcile`` in a process of its own."""

    seconds: float
    cpu_seconds: float  # its own, user and system (not the PostgreSQL server's)
    found: dict[str, int]
    peak_mib: int


def _reconcile(url: str, wallet: Path) -> Run:
    command = [sys.executable, "-m", "croupier.cli", "reconcile", "--ledger", url,
               "--wallet", str(wallet), "--json"]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *command], capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    status, peak, cpu = done.stderr.rstrip().rpartition("\n")[2].split(" ")
    if status != "1":
        raise RuntimeError(f"reconcile exited {status}: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    found: dict[str, int] = {
        RETURNED: sum(c["matched"][RETURNED]["count"] for c in report["currencies"])
    }
    for item in report["discrepancies"]:
        found[item["kind"]] = found.get(item["kind"], 0) + 1
    return Run(elapsed, float(cpu), found, int(peak) // 1024)


# Runs the command given as arguments; its last stderr line: exit status, peak RSS (KiB)
# and CPU seconds (user + system).
_PEAK = """
import resource, subprocess, sys
status = subprocess.run(sys.argv[1:]).returncode
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(status, usage.ru_maxrss, usage.ru_utime + usage.ru_stime, file=sys.stderr)
"""


async def _anchor_postgres(url: str, wallet: Path) -> float:
    """PostgreSQL reading the same rows: the log into a table (COPY of the CSV, or of the
    records parsed from JSON Lines), and a scan of the read model."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"CREATE TEMP TABLE raw_wallet ({_RAW_COLUMNS})")
        start = time.perf_counter()
        if wallet.suffix == ".csv":
            with wallet.open("rb") as handle:
                await conn.copy_to_table("raw_wallet", source=handle, format="csv", header=True)
        else:
            for chunk in _parsed(wallet):
                await conn.copy_records_to_table("raw_wallet", records=chunk)
        for sql in _SCANS:
            await conn.fetch(sql)
        return time.perf_counter() - start
    finally:
        await conn.close()


def _anchor_sqlite(path: Path, wallet: Path) -> tuple[float, float]:
    """SQLite reading the same rows: the log parsed and inserted, and a scan of the read
    model; seconds, and CPU seconds (SQLite runs in this process)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute(f"CREATE TEMP TABLE raw_wallet ({_RAW_COLUMNS})")
        marks = ", ".join("?" * len(FIELDS))
        start, cpu = time.perf_counter(), time.process_time()
        conn.execute("BEGIN")
        for chunk in _parsed(wallet):
            conn.executemany(f"INSERT INTO raw_wallet VALUES ({marks})", chunk)
        conn.execute("COMMIT")
        for sql in _SCANS:
            conn.execute(sql).fetchall()
        return time.perf_counter() - start, time.process_time() - cpu
    finally:
        conn.close()


_RAW_COLUMNS = (
    "transaction_id text, kind text, message_id text, table_id text, round_id text, "
    "bet_id text, player_id text, currency text, amount bigint, occurred_at text"
)
_SCANS = (
    "SELECT count(*), sum(stake) FROM wagers",
    "SELECT count(*), sum(returned + refunded) FROM results",
)


def _parsed(wallet: Path, size: int = 10_000) -> Iterator[list[tuple[Any, ...]]]:
    """The log's rows as tuples of its fields, ``size`` at a time, parsed and no more."""
    with wallet.open(encoding="utf-8", newline="") as handle:
        if wallet.suffix == ".csv":
            reader = csv.reader(handle)
            next(reader)
            rows: Iterator[tuple[Any, ...]] = (tuple(row) for row in reader)
        else:
            rows = (tuple(map(json.loads(line).get, FIELDS)) for line in handle)
        while chunk := list(itertools.islice(rows, size)):
            yield chunk


async def _scratch() -> tuple[asyncpg.Connection, str, str] | None:
    name = f"croupier_bench_{uuid.uuid4().hex[:12]}"
    try:
        admin = await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        print(f"reconcile: skipped, {ADMIN_URL} unreachable ({error}); run `make services`")
        return None
    await admin.execute(f'CREATE DATABASE "{name}"')
    return admin, name, urlunsplit(urlsplit(ADMIN_URL)._replace(path=f"/{name}"))


async def _size(results: int, folder: Path, cases: tuple[tuple[str, str], ...]) -> None:
    """Reconcile ``results`` on each (database, log format) of ``cases``."""
    draws = _draws(results)
    for database, suffix in cases:
        wallet = folder / f"wallet-{results}{suffix}"
        rows = _write_wallet(wallet, draws)
        anchor_cpu: float | None = None
        if database == "postgres":
            scratch = await _scratch()
            if scratch is None:
                continue
            admin, name, url = scratch
            try:
                await _load_postgres(url, draws)
                anchor = await _anchor_postgres(url, wallet)
                run = _reconcile(url, wallet)
            finally:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                await admin.close()
            how = "COPY of the same CSV" if suffix == ".csv" else "the same rows parsed, COPY"
        else:
            path = folder / f"ledger-{results}.db"
            await _load_sqlite(path, draws)
            anchor, anchor_cpu = _anchor_sqlite(path, wallet)
            run = _reconcile(f"sqlite:///{path}", wallet)
            for leftover in folder.glob(f"{path.name}*"):
                leftover.unlink()
            how = "the same rows parsed and inserted"
        wallet.unlink()
        exact = run.found == dict.fromkeys((RETURNED, *KINDS), PLANTED)
        print(
            f"reconcile {database:<8} {suffix[1:]:<5}: {results:>9,} results vs {rows:>9,} "
            f"wallet rows in {run.seconds:6.1f} s ({rows / run.seconds:>8,.0f} rows/s), "
            f"CPU {run.cpu_seconds:5.1f} s ({rows / run.cpu_seconds:>8,.0f} rows/CPU-s), "
            f"peak RSS {run.peak_mib:,} MiB; found {sum(run.found.values()):,} of "
            f"{PLANTED * (len(KINDS) + 1):,} planted "
            f"({'exactly' if exact else 'NOT EXACTLY: ' + str(run.found)})"
        )
        cpu = (
            ""
            if anchor_cpu is None
            else f", CPU {anchor_cpu:5.1f} s ({rows / anchor_cpu:>9,.0f} rows/CPU-s)"
        )
        ratio = f"{run.seconds / anchor:4.1f}x" + (
            "" if anchor_cpu is None else f", CPU {run.cpu_seconds / anchor_cpu:4.1f}x"
        )
        print(
            f"  anchor: {how} + scans of the read model {anchor:5.1f} s "
            f"({rows / anchor:>9,.0f} rows/s){cpu}; reconcile / anchor = {ratio}; "
            f"load {os.getloadavg()[0]:.2f} (1 min)",
            flush=True,
        )


async def _projector_rate() -> None:
    """The projector following a real ledger (a simulated studio settled through the settler)."""
    from croupier.settlement.replay import replay
    from studio.config import StudioConfig, parse_table_specs
    from studio.feed import simulate

    scratch = await _scratch()
    if scratch is None:
        return
    admin, name, url = scratch
    try:
        config = StudioConfig(
            tables=parse_table_specs(["classic:shared=40", "standard:shared=40"], prefix="pb"),
            rounds=300,
            seed=1,
        )
        async with open_ledger(url) as ledger:
            await ledger.migrate()
            feed = [m.body for m in simulate(config)]
            await replay(feed, ledger, io.StringIO(), io.StringIO())
            head = await ledger.last_position()
            start = time.perf_counter()
            after = 0
            while page := await ledger.read_all(after, 2_000):
                after = page[-1].position
            anchor = time.perf_counter() - start
            projector = Projector(ledger, open_store(ledger), [WagersProjection()])
            await projector.setup()
            start = time.perf_counter()
            await projector.catch_up()
            elapsed = time.perf_counter() - start
        print(
            f"projector postgres: {head:,} ledger events in {elapsed:5.2f} s "
            f"({head / elapsed:,.0f} events/s); anchor read_all of the same events "
            f"{anchor:5.2f} s ({head / anchor:,.0f} events/s), ratio {elapsed / anchor:4.1f}x"
        )
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _run() -> None:
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as folder:
        await _size(RESULTS // 4, Path(folder), (("postgres", ".csv"),))
        await _size(RESULTS, Path(folder), CASES)
    await _projector_rate()


def run() -> None:
    """Print the reconciliation rows and their anchors."""
    asyncio.run(_run())


if __name__ == "__main__":
    run()
