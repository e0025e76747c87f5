"""Wallet reconciliation at scale: ``croupier reconcile`` on 1,000,000 results, PostgreSQL.

The ledger's read model holds ``RESULTS`` settlement results (one wager each; some won, some
voided) and the wallet log (CSV) debits every wager and credits every result that returns
money, with ``PLANTED`` discrepancies of every kind (and ``PLANTED`` debits returned by a
stake refund, which must match). The read model is loaded straight into its tables, not
projected from a ledger (the projector's own rate, over a ledger a simulated studio
settled, is the last row), and its checkpoint put at the head, so the timed run is the
reconciliation alone: the command as an operator runs it, in a process of its own, from
reading the file to the last line of its JSON report.

Anchor, in the same run: PostgreSQL reading the same rows (``COPY`` of the same CSV into a
table, plus a scan summing the results and wagers). Memory: the child's peak RSS at a
quarter of the size and at full size, to show it does not grow with the period.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from croupier.ledger import open_ledger
from croupier.projection import open_store
from croupier.projection.projector import Projector
from croupier.projection.wagers import WagersProjection

RESULTS = int(os.environ.get("CROUPIER_BENCH_RESULTS", "1000000"))
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


async def _load_read_model(url: str, draws: list[tuple[int, int, int]]) -> None:
    """Events 1..N, and one result (one wager) at each position; the checkpoint there."""
    results = len(draws) - 1
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        await Projector(ledger, open_store(ledger), [WagersProjection()]).setup()
    wagers, rows = [], []
    for i in range(1, results + 1):
        table, round_, bet, player, message = _ids(i)
        stake, returned, refunded = draws[i]
        status = "voided" if refunded else "settled"
        wagers.append(
            (table, round_, bet, player, "EUR", "main", "ante", stake, None, f"e{i}", i, STAMP)
        )
        rows.append((message, table, round_, player, "EUR", status, "casino-holdem/classic",
                     stake, returned, refunded, json.dumps([bet]), i, STAMP, STAMP))  # fmt: skip
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "INSERT INTO events (position, stream, version, type, data, key, recorded_at, "
            "prev_hash, hash) SELECT g, 'bench:' || g, 1, 'bench', '{}', 'k' || g, "
            "'2024-05-01T20:15:00Z', repeat('0', 64), repeat('0', 64) "
            "FROM generate_series(1, $1) AS g",
            results,
        )
        for table, records in (("wagers", wagers), ("results", rows)):
            await conn.copy_records_to_table(table, records=records, columns=_columns(table))
        await conn.execute(
            "UPDATE projection_checkpoints SET position = $1 WHERE name = 'wagers'", results
        )
        for table in ("events", "wagers", "results"):  # as autovacuum leaves a settled table
            await conn.execute(f"VACUUM ANALYZE {table}")
    finally:
        await conn.close()


def _columns(table: str) -> list[str]:
    (found,) = [t for t in WagersProjection.tables if t.name == table]
    return list(found.column_names)


def _write_wallet(path: Path, draws: list[tuple[int, int, int]]) -> int:
    """The wallet's log of every movement, with the planted discrepancies; rows written."""
    plant = _plants(draws)
    count = 0
    with path.open("w", newline="") as handle:
        out = csv.writer(handle)
        out.writerow(["transaction_id", "kind", "message_id", "table_id", "round_id", "bet_id",
                      "player_id", "currency", "amount", "occurred_at"])  # fmt: skip
        for i in range(1, len(draws)):
            table, round_, bet, player, message = _ids(i)
            stake, returned, refunded = draws[i]
            money = returned + refunded
            kind = "refund" if refunded else "credit"
            if i not in plant["wager_without_debit"]:
                out.writerow(
                    (f"d{i}", "debit", "", table, round_, bet, player, "EUR", stake, STAMP)
                )
                count += 1
            if i in plant["debit_without_wager"]:
                out.writerow(
                    (f"x{i}", "debit", "", table, round_, f"{bet}x", player, "EUR", 100, STAMP)
                )
                count += 1
            if i in plant[RETURNED]:
                for kind in ("debit", "refund"):
                    out.writerow(
                        (
                            f"{kind}{i}",
                            kind,
                            "",
                            table,
                            round_,
                            f"{bet}y",
                            player,
                            "EUR",
                            100,
                            STAMP,
                        )
                    )
                count += 2
            if i in plant["unknown_to_ledger"]:
                out.writerow(
                    (f"u{i}", "credit", f"u-{message}", "", "", "", player, "EUR", 100, STAMP)
                )
                count += 1
            if not money or i in plant["missing_in_wallet"]:
                continue
            amount = money + 1 if i in plant["amount_mismatch"] else money
            currency = "GBP" if i in plant["currency_mismatch"] else "EUR"
            copies = 2 if i in plant["duplicate_credit"] else 1
            for copy in range(copies):
                out.writerow((f"c{i}-{copy}", kind, message, "", "", "", player, currency, amount,
                              "2024-05-01T21:00:00Z"))  # fmt: skip
                count += 1
    return count


def _reconcile(url: str, wallet: Path) -> tuple[float, dict[str, int], int]:
    """Seconds, discrepancies by kind, and the child's peak RSS in MiB."""
    command = [sys.executable, "-m", "croupier.cli", "reconcile", "--ledger", url,
               "--wallet", str(wallet), "--json"]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", _PEAK, *command], capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - start
    status, _, peak = done.stderr.rstrip().rpartition("\n")[2].partition(" ")
    if status != "1":
        raise RuntimeError(f"reconcile exited {status}: {done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    found: dict[str, int] = {
        RETURNED: sum(c["matched"][RETURNED]["count"] for c in report["currencies"])
    }
    for item in report["discrepancies"]:
        found[item["kind"]] = found.get(item["kind"], 0) + 1
    return elapsed, found, int(peak) // 1024


# Runs the command given as arguments; its last stderr line: exit status and peak RSS (KiB).
_PEAK = """
import resource, subprocess, sys
status = subprocess.run(sys.argv[1:]).returncode
print(status, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)
"""


async def _anchor(url: str, wallet: Path) -> float:
    """PostgreSQL reading the same rows: COPY of the wallet CSV, a scan of the read model."""
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(
            "CREATE TEMP TABLE raw_wallet (transaction_id text, kind text, message_id text, "
            "table_id text, round_id text, bet_id text, player_id text, currency text, "
            "amount bigint, occurred_at timestamptz)"
        )
        start = time.perf_counter()
        with wallet.open("rb") as handle:
            await conn.copy_to_table("raw_wallet", source=handle, format="csv", header=True)
        await conn.fetch("SELECT count(*), sum(stake) FROM wagers")
        await conn.fetch("SELECT count(*), sum(returned + refunded) FROM results")
        return time.perf_counter() - start
    finally:
        await conn.close()


async def _scratch() -> tuple[asyncpg.Connection, str, str] | None:
    name = f"croupier_bench_{uuid.uuid4().hex[:12]}"
    try:
        admin = await asyncpg.connect(ADMIN_URL, timeout=5)
    except (OSError, asyncpg.PostgresError, TimeoutError) as error:
        print(f"reconcile: skipped, {ADMIN_URL} unreachable ({error}); run `make services`")
        return None
    await admin.execute(f'CREATE DATABASE "{name}"')
    return admin, name, urlunsplit(urlsplit(ADMIN_URL)._replace(path=f"/{name}"))


async def _size(results: int, folder: Path) -> None:
    scratch = await _scratch()
    if scratch is None:
        return
    admin, name, url = scratch
    try:
        draws = _draws(results)
        await _load_read_model(url, draws)
        wallet = folder / f"wallet-{results}.csv"
        rows = _write_wallet(wallet, draws)
        del draws
        anchor = await _anchor(url, wallet)
        elapsed, found, peak = _reconcile(url, wallet)
        exact = found == dict.fromkeys((RETURNED, *KINDS), PLANTED)
        print(
            f"reconcile postgres: {results:>9,} results vs {rows:>9,} wallet rows "
            f"in {elapsed:6.1f} s ({rows / elapsed:>8,.0f} rows/s), peak RSS {peak:,} MiB; "
            f"found {sum(found.values()):,} of {PLANTED * (len(KINDS) + 1):,} planted "
            f"({'exactly' if exact else 'NOT EXACTLY: ' + str(found)})"
        )
        print(
            f"  anchor: PostgreSQL COPY of the same CSV + scans of the read model "
            f"{anchor:5.1f} s; reconcile / anchor = {elapsed / anchor:4.1f}x; "
            f"load {os.getloadavg()[0]:.2f} (1 min)"
        )
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


async def _projector_rate() -> None:
    """The projector following a real ledger (a simulated studio settled through the settler)."""
    from croupier.replay import replay
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
        await _size(RESULTS // 4, Path(folder))
        await _size(RESULTS, Path(folder))
    await _projector_rate()


def run() -> None:
    """Print the reconciliation rows and their anchors."""
    asyncio.run(_run())


if __name__ == "__main__":
    run()
