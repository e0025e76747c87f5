"""``croupier web`` under load: a player's latest 20 rounds and one round's recall.

The database (``CROUPIER_BENCH_HISTORY_URL``, default ``croupier_bench_history`` on the local
PostgreSQL) holds at least 1,000,000 settlement results and is kept between runs. It is
built once: a studio feed of ``BASE_ROUNDS`` rounds (shared hands of 40 players and a
seven-box table, both games) is settled through the real settler and projected into the
rounds read model; then its ledger events and read-model rows are copied under new table
(round and player) ids until the target is reached. The copies reuse the base rows' hashes and
leave out the jackpot meter streams, so the bench ledger's hash chain does not verify and
its positions have gaps: it is a bench database, never projected again, nothing else.

Measured, for 50 concurrent clients each on its own keep-alive connection, over HTTP to a
``croupier web`` process, and beside it the anchor: the same SQL straight through an
asyncpg pool of the service's size. Figures are printed with the load average, never
asserted (the target is p99 <= 20 ms).
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final

import asyncpg
import jwt

from croupier.history.postgres import _PLAYER_ROUNDS, _RECALL
from croupier.ledger import open_ledger
from croupier.ledger.postgres import create_database_if_missing
from croupier.projection import open_store
from croupier.projection.projector import Projector
from croupier.projection.registry import load_projections
from croupier.replay import replay
from studio.config import StudioConfig, parse_table_specs
from studio.feed import simulate

URL: Final = os.environ.get(
    "CROUPIER_BENCH_HISTORY_URL", "postgresql://postgres@127.0.0.1:5432/croupier_bench_history"
)
TARGET_RESULTS: Final = 1_000_000
BASE_ROUNDS: Final = 400
BASE_PREFIX: Final = "hb00000"  # 'h' is no hex digit: the prefix occurs in no hash or uuid
TABLES: Final = (
    "classic:shared=40",
    "progressive:shared=40",
    "standard:shared=40",
    "royal-20:boxes=7",
)
CLIENTS: Final = 50
DURATION_S: Final = float(os.environ.get("CROUPIER_BENCH_HISTORY_SECONDS", "8"))
POOL: Final = 10  # the web store's pool size
SECRET: Final = "bench secret of at least thirty-two bytes, HS256"
SAMPLES: Final = 2000


def run() -> None:
    """Build the database if needed, then print both scenarios against their anchors."""
    asyncio.run(_run())


async def _run() -> None:
    await create_database_if_missing(URL)
    results = await _prepare()
    picks = await _sample()
    print(f"database: {results:,} settlement results (player rounds); {CLIENTS} clients")
    print(f"{'query':<22}{'through':<16}{'requests/s':>12}{'p50 ms':>9}{'p99 ms':>9}")
    with _web_process() as port:
        for name, path_of, anchor in (
            ("latest 20 rounds", _history_path, _history_sql),
            ("round recall", _recall_path, _recall_sql),
        ):
            web = await _load(_http_worker(port, picks, path_of))
            raw = await _anchored(anchor, picks)
            print(_row(name, "croupier web", web))
            print(_row("", "asyncpg anchor", raw))
            print(f"{'':<22}{'web / anchor p99':<16}{web.p99 / max(raw.p99, 1e-9):>12.1f}x")
    print(f"load average: {os.getloadavg()[0]:.2f} (2 cores shared); target p99 <= 20 ms")


# -- the database ------------------------------------------------------------------------


async def _prepare() -> int:
    async with open_ledger(URL) as ledger:
        pool = await ledger.pool()
        have = await _results(pool)
        if have >= TARGET_RESULTS:
            return have
        await ledger.migrate()
        if await ledger.last_position() == 0:
            await _settle_base(ledger)
        projector = Projector(ledger, open_store(ledger), load_projections(["rounds"]))
        await projector.setup()
        await projector.catch_up()
        await _copy_until(pool, TARGET_RESULTS)
        return await _results(pool)


async def _results(pool: asyncpg.Pool) -> int:
    exists = await pool.fetchval("SELECT to_regclass('history_player_rounds') IS NOT NULL")
    return int(await pool.fetchval("SELECT count(*) FROM history_player_rounds")) if exists else 0


async def _settle_base(ledger: object) -> None:
    config = StudioConfig(
        tables=parse_table_specs(list(TABLES), prefix=BASE_PREFIX), rounds=BASE_ROUNDS, seed=15
    )
    feed = [message.body for message in simulate(config)]
    print(f"building: settling {BASE_ROUNDS} rounds ({len(feed):,} feed events)...", flush=True)
    with open(os.devnull, "w") as results, open(os.devnull, "w") as rejections:
        await replay(feed, ledger, results, rejections)  # type: ignore[arg-type]


_COPY_EVENTS = """
    INSERT INTO events (position, stream, version, type, data, key, recorded_at, prev_hash, hash)
    SELECT position + $1, replace(stream, $2, $3), version, type,
           replace(data::text, $2, $3)::json, key || ':' || $3, recorded_at, prev_hash, hash
    FROM events WHERE position <= $4 AND stream LIKE 'round:' || $2 || '%'
"""
_COPY_ROWS = {
    "history_rounds": "table_id, round_id, game, paytable, status, closed_at, position",
    "history_player_rounds": (
        "player_id, position, currency, table_id, round_id, game, paytable, status, "
        "closed_at, stake, returned, wagers, document"
    ),
    "history_recalls": "table_id, round_id, player_id, document",
    "history_decisions": (
        "table_id, round_id, ante_bet_id, stage, action, bet_id, amount, position"
    ),
}


# Ids carry the table id's prefix (players too, e.g. ``hb00000-1-classic-p7``).
_SHIFTED: Final = {
    "table_id": "replace(table_id, $2, $3)",
    "round_id": "replace(round_id, $2, $3)",
    "player_id": "replace(player_id, $2, $3)",
    "wagers": "replace(wagers, $2, $3)",
    "document": "replace(document, $2, $3)",
    "position": "position + $1",
}


async def _copy_until(pool: asyncpg.Pool, target: int) -> None:
    """Copy the base rounds under new table ids until the read model holds ``target``."""
    async with pool.acquire() as conn:
        base = await conn.fetchval("SELECT max(position) FROM events")
        per_copy = await conn.fetchval(
            "SELECT count(*) FROM history_player_rounds WHERE table_id LIKE $1", BASE_PREFIX + "%"
        )
        have = await _results(pool)
        copies = -(-(target - have) // per_copy)
        top = await conn.fetchval("SELECT max(position) FROM events")
        started = time.perf_counter()
        first = -(-top // base)  # copy k sits at positions k*base+1 .. (k+1)*base
        for n in range(copies):
            prefix = f"hb{first + n:05d}"
            shift = (first + n) * base
            async with conn.transaction():
                await conn.execute(_COPY_EVENTS, shift, BASE_PREFIX, prefix, base)
                for table, columns in _COPY_ROWS.items():
                    shifted = ", ".join(
                        _SHIFTED.get(column, column) for column in columns.split(", ")
                    )
                    await conn.execute(
                        f"INSERT INTO {table} ({columns}) SELECT {shifted} FROM {table} "
                        "WHERE table_id LIKE $2 || '%'",
                        shift,
                        BASE_PREFIX,
                        prefix,
                    )
                await conn.execute(
                    "UPDATE projection_checkpoints SET position = $1 WHERE name = 'rounds'",
                    await conn.fetchval("SELECT max(position) FROM events"),
                )
            rate = (n + 1) * per_copy / (time.perf_counter() - started)
            print(f"  copied {n + 1}/{copies} ({rate:,.0f} results/s)", end="\r", flush=True)
        print()
        await conn.execute("ANALYZE")


async def _sample() -> list[tuple[str, str, str]]:
    """(player, table, round) picks: rounds players were in, across the whole table."""
    conn = await asyncpg.connect(URL)
    try:
        rows = await conn.fetch(
            "SELECT player_id, table_id, round_id FROM history_player_rounds "
            "TABLESAMPLE SYSTEM (1) LIMIT $1",
            SAMPLES,
        )
    finally:
        await conn.close()
    picks = [(r[0], r[1], r[2]) for r in rows]
    random.Random(15).shuffle(picks)
    return picks


# -- the load ----------------------------------------------------------------------------


class Figures:
    """Latencies (seconds) of one scenario and the time they were taken over."""

    def __init__(self, latencies: list[float], elapsed: float) -> None:
        ordered = sorted(latencies)
        self.count = len(ordered)
        self.rate = self.count / elapsed
        self.p50 = ordered[self.count // 2] * 1000
        self.p99 = ordered[min(self.count - 1, int(self.count * 0.99))] * 1000


Worker = Callable[[int, Callable[[float], None], asyncio.Event], Awaitable[None]]


async def _load(worker: Worker) -> Figures:
    """``CLIENTS`` workers for a warm-up second, then ``DURATION_S`` of measured requests."""
    latencies: list[float] = []
    measuring = False

    def record(seconds: float) -> None:
        if measuring:
            latencies.append(seconds)

    stop = asyncio.Event()
    tasks = [asyncio.create_task(worker(i, record, stop)) for i in range(CLIENTS)]
    await asyncio.sleep(1.0)
    measuring, started = True, time.perf_counter()
    await asyncio.sleep(DURATION_S)
    measuring = False
    elapsed = time.perf_counter() - started
    stop.set()
    await asyncio.gather(*tasks)
    return Figures(latencies, elapsed)


def _history_path(pick: tuple[str, str, str]) -> str:
    return f"/v1/players/{pick[0]}/rounds?limit=20"


def _recall_path(pick: tuple[str, str, str]) -> str:
    return f"/v1/rounds/{pick[1]}/{pick[2]}"


def _http_worker(
    port: int, picks: list[tuple[str, str, str]], path_of: Callable[[tuple[str, str, str]], str]
) -> Worker:
    tokens = {p: _token(p) for p in {pick[0] for pick in picks}}

    async def work(index: int, record: Callable[[float], None], stop: asyncio.Event) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        n = index
        try:
            while not stop.is_set():
                pick = picks[n % len(picks)]
                n += CLIENTS
                request = (
                    f"GET {path_of(pick)} HTTP/1.1\r\nHost: bench\r\n"
                    f"Authorization: Bearer {tokens[pick[0]]}\r\n\r\n"
                ).encode()
                started = time.perf_counter()
                writer.write(request)
                status = await _read_response(reader)
                record(time.perf_counter() - started)
                assert status == 200, f"{path_of(pick)} answered {status}"
        finally:
            writer.close()

    return work


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    await reader.readexactly(length)
    return int(lines[0].split(" ")[1])


def _token(player_id: str) -> str:
    return jwt.encode({"sub": player_id, "exp": int(time.time()) + 3600}, SECRET, "HS256")


async def _history_sql(conn: asyncpg.Connection, pick: tuple[str, str, str]) -> None:
    await conn.fetch(_PLAYER_ROUNDS, pick[0], 2**63 - 1, "~", 21)


async def _recall_sql(conn: asyncpg.Connection, pick: tuple[str, str, str]) -> None:
    await conn.fetchval(_RECALL, pick[1], pick[2], pick[0])


async def _anchored(
    query: Callable[[asyncpg.Connection, tuple[str, str, str]], Awaitable[None]],
    picks: list[tuple[str, str, str]],
) -> Figures:
    pool = await asyncpg.create_pool(URL, min_size=POOL, max_size=POOL)
    try:

        async def work(index: int, record: Callable[[float], None], stop: asyncio.Event) -> None:
            n = index
            while not stop.is_set():
                pick = picks[n % len(picks)]
                n += CLIENTS
                started = time.perf_counter()
                async with pool.acquire() as conn:
                    await query(conn, pick)
                record(time.perf_counter() - started)

        return await _load(work)
    finally:
        await pool.close()


class _web_process:
    """``croupier web`` on a free port, in its own process; yields the port."""

    def __enter__(self) -> int:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        env = {
            **os.environ,
            "CROUPIER_DATABASE_URL": URL,
            "CROUPIER_WEB_PORT": str(self.port),
            "CROUPIER_PLAYER_TOKEN_SECRET": SECRET,
            "CROUPIER_LOG_LEVEL": "WARNING",
        }
        self.log = tempfile.TemporaryFile()
        command = [sys.executable, "-m", "croupier.cli", "web", "--host", "127.0.0.1"]
        self.process = subprocess.Popen(
            command, env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=Path.cwd()
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1)
                return self.port
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.2)
        self.__exit__()
        self.log.seek(0)
        raise RuntimeError(f"croupier web did not start: {self.log.read().decode()[-2000:]}")

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        self.process.wait(10)
        self.log.close()


def _row(name: str, through: str, figures: Figures) -> str:
    return f"{name:<22}{through:<16}{figures.rate:>12,.0f}{figures.p50:>9.2f}{figures.p99:>9.2f}"


if __name__ == "__main__":
    run()
