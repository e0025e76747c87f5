"""``croupier web`` under load: a player's latest 20 rounds and one round's recall.

The data
    A named database (``CROUPIER_BENCH_HISTORY_URL``, default ``croupier_bench_history`` on
    the local PostgreSQL), built once and reused: a simulated studio feed (``FEED_TABLES``,
    shared hands of 40 players and seven-box tables, both games) is settled by ``replay``
    through the real settler into the ledger, then the real projector projects it into the
    rounds read model. Nothing is copied: every row's hash chains, ``croupier verify``
    passes. Build time is printed apart from the load figures. Every run prints where the
    data is and its size; ``python -m bench.history drop`` (``make bench-history-drop``)
    drops it.

The load (both models printed, for each query, beside the anchor)
    closed loop
        ``CLIENTS`` clients, each on its own keep-alive connection, sending the next
        request as soon as the last is answered (no think time). This is a throughput test:
        by Little's law (clients = rate x latency) p99 <= 20 ms at 50 clients needs more
        than 2,500 requests/s.
    paced
        ``CLIENTS`` clients that each send at Poisson times, mean think time ``THINK_S``
        (offered rate ``CLIENTS / THINK_S``), latency counted from when the request was due,
        so a slow answer also delays the client's next ones in the figures.
    anchor
        The same SQL (the service's one indexed lookup) straight through an asyncpg pool of
        the service's connections, under the same load model, in the same run.

Also measured: a 404 for another player's round against a 404 for no such round (one
client, interleaved), medians of both. Figures are printed with the load average, never
asserted; the target is p99 <= 20 ms.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import asyncpg
import jwt

from croupier.history.postgres import _PLAYER_ROUNDS, _RECALL
from croupier.ledger import Ledger, open_ledger
from croupier.ledger.postgres import PostgresLedger, create_database_if_missing
from croupier.projection import open_store
from croupier.projection.projector import Progress, Projector
from croupier.projection.registry import load_projections
from croupier.settlement.replay import replay
from studio.config import StudioConfig, parse_table_specs
from studio.feed import simulate

URL: Final = os.environ.get(
    "CROUPIER_BENCH_HISTORY_URL", "postgresql://postgres@127.0.0.1:5432/croupier_bench_history"
)
TARGET_RESULTS: Final = int(os.environ.get("CROUPIER_BENCH_HISTORY_RESULTS", "1000000"))
FEED_TABLES: Final = (
    "classic*3:shared=40",
    "progressive*3:shared=40",
    "standard*2:shared=40",
    "royal-20*2:boxes=7",
)
RESULTS_PER_ROUND: Final = 76  # measured on this feed (seed 15); the build settles enough rounds
CLIENTS: Final = 50
THINK_S: Final = float(os.environ.get("CROUPIER_BENCH_HISTORY_THINK", "0.5"))
DURATION_S: Final = float(os.environ.get("CROUPIER_BENCH_HISTORY_SECONDS", "8"))
WORKERS: Final = int(os.environ.get("CROUPIER_BENCH_HISTORY_WORKERS", "2"))
POOL: Final = 10  # each web worker's pool size
SECRET: Final = "bench secret of at least thirty-two bytes, HS256"
SAMPLES: Final = 2000
PROBES: Final = 1000

Pick = tuple[str, str, str]  # player, table, round


def run() -> None:
    """Build the database if needed, then print both queries under both load models."""
    if sys.argv[1:] == ["drop"]:
        asyncio.run(_drop())
        return
    asyncio.run(_run())


async def _run() -> None:
    await create_database_if_missing(URL)
    results = await _prepare()
    await _describe(results)
    picks = await _sample()
    print(f"load: {CLIENTS} clients; croupier web --workers {WORKERS} (pool {POOL} each)")
    print(f"{'query':<18}{'model':<14}{'through':<16}{'req/s':>8}{'p50 ms':>9}{'p99 ms':>9}")
    with _web_process() as port:
        for name, path_of, anchor in (
            ("latest 20 rounds", _history_path, _history_sql),
            ("round recall", _recall_path, _recall_sql),
        ):
            for model, think in (("closed loop", 0.0), (f"paced {THINK_S:g}s", THINK_S)):
                web = await _load(_http_worker(port, picks, path_of, think))
                raw = await _anchored(anchor, picks, think)
                print(_row(name, model, "croupier web", web))
                print(_row("", "", "asyncpg anchor", raw))
                print(f"{'':<32}{'web/anchor p99':<16}{web.p99 / max(raw.p99, 1e-9):>8.1f}x")
                print(f"{'':<32}load average {os.getloadavg()[0]:.2f}")
        await _not_found_timing(port, picks)
    print(
        f"load average: {os.getloadavg()[0]:.2f} (2 cores shared); target p99 <= 20 ms; "
        f"closed loop at {CLIENTS} clients needs > {CLIENTS / 0.020:,.0f} req/s for it"
    )


# -- the database ------------------------------------------------------------------------


async def _prepare() -> int:
    """The settlement results in the bench database, settling and projecting if short."""
    async with open_ledger(URL) as ledger:
        assert isinstance(ledger, PostgresLedger)
        pool = await ledger.pool()
        have = await _built(pool)
        if have >= TARGET_RESULTS:
            return have
        await ledger.migrate()
        if await ledger.last_position() > 0:
            raise SystemExit(
                f"{_where()} holds a ledger but no finished bench build: "
                "run `python -m bench.history drop` and run the bench again"
            )
        rounds = -(-TARGET_RESULTS // RESULTS_PER_ROUND)
        started = time.perf_counter()
        bets = await _settle(ledger, rounds)
        settled = time.perf_counter() - started
        print(f"  settled in {settled:,.0f} s ({bets / settled:,.0f} feed events/s)")
        started = time.perf_counter()
        projector = Projector(ledger, open_store(ledger), load_projections(["rounds"]))
        await projector.setup()
        await projector.catch_up(on_progress=_progress)
        projected = time.perf_counter() - started
        print(f"\n  projected in {projected:,.0f} s")
        await pool.execute("ANALYZE")
        have = await _count(pool)
        await pool.execute(
            "CREATE TABLE bench_history_build (results bigint, rounds int, settle_s real, "
            "project_s real, feed text)"
        )
        await pool.execute(
            "INSERT INTO bench_history_build VALUES ($1, $2, $3, $4, $5)",
            have,
            rounds,
            settled,
            projected,
            " ".join(FEED_TABLES),
        )
        if have < TARGET_RESULTS:
            print(f"  note: {have:,} results, short of {TARGET_RESULTS:,}")
        return have


async def _built(pool: asyncpg.Pool) -> int:
    if not await pool.fetchval("SELECT to_regclass('bench_history_build') IS NOT NULL"):
        return 0
    return int(await pool.fetchval("SELECT max(results) FROM bench_history_build") or 0)


async def _settle(ledger: Ledger, rounds: int) -> int:
    config = StudioConfig(
        tables=parse_table_specs(list(FEED_TABLES), prefix="bench"), rounds=rounds, seed=15
    )
    print(f"building {_where()}: settling a studio feed of {rounds:,} rounds...", flush=True)
    with open(os.devnull, "w") as results, open(os.devnull, "w") as rejections:
        summary = await replay((m.body for m in simulate(config)), ledger, results, rejections)
    return int(summary.events)


def _progress(progress: Progress) -> None:
    print(f"  projecting: position {progress.position:,} of {progress.target:,}", end="\r")


async def _count(pool: asyncpg.Pool) -> int:
    """Settlement results: one per bet settled, as the settled facts list them."""
    return int(
        await pool.fetchval(
            "SELECT coalesce(sum(json_array_length(wagers::json)), 0) FROM history_player_rounds"
        )
    )


async def _describe(results: int) -> None:
    conn = await asyncpg.connect(URL)
    try:
        build = await conn.fetchrow("SELECT * FROM bench_history_build")
        sizes = await conn.fetch(
            "SELECT relname, pg_total_relation_size(oid) AS bytes FROM pg_class "
            "WHERE relname IN ('events', 'history_recalls', 'history_player_rounds') "
            "ORDER BY relname"
        )
        total = await conn.fetchval("SELECT pg_database_size(current_database())")
        counts = await conn.fetchrow(
            "SELECT (SELECT count(*) FROM history_player_rounds) AS rows, "
            "(SELECT count(*) FROM history_rounds) AS rounds, "
            "(SELECT max(position) FROM events) AS events"
        )
    finally:
        await conn.close()
    print(
        f"data: {_where()}: {results:,} settlement results in {counts['rounds']:,} rounds "
        f"({counts['rows']:,} player rounds, {counts['events']:,} ledger facts); "
        f"{total / 2**30:.2f} GiB ("
        + ", ".join(f"{r['relname']} {r['bytes'] / 2**20:,.0f} MiB" for r in sizes)
        + ")"
    )
    print(
        f"built once: settled by replay in {build['settle_s']:,.0f} s, projected in "
        f"{build['project_s']:,.0f} s; remove it with `make bench-history-drop`"
    )


def _where() -> str:
    parts = urlsplit(URL)
    return f"database {parts.path.lstrip('/')!r} on {parts.hostname}:{parts.port or 5432}"


async def _drop() -> None:
    parts = urlsplit(URL)
    name = parts.path.lstrip("/")
    admin = await asyncpg.connect(parts._replace(path="/postgres").geturl())
    try:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        await admin.close()
    print(f"dropped {_where()}")


async def _sample() -> list[Pick]:
    """(player, table, round) picks: rounds players were in, across the whole database."""
    conn = await asyncpg.connect(URL)
    try:
        rows = await conn.fetch(
            "SELECT player_id, table_id, round_id FROM history_recalls "
            "TABLESAMPLE SYSTEM (2) LIMIT $1",
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


Record = Callable[[float], None]
Worker = Callable[[int, Record, asyncio.Event], Awaitable[None]]
Send = Callable[[Pick], Awaitable[None]]


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


async def _client(
    index: int, picks: list[Pick], send: Send, think: float, record: Record, stop: asyncio.Event
) -> None:
    """One client: closed loop (``think`` 0) or paced at Poisson times of mean ``think``."""
    rng = random.Random(index)
    n = index
    due = time.perf_counter() + (rng.expovariate(1 / think) if think else 0.0)
    while not stop.is_set():
        if think:
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
        started = due if think else time.perf_counter()
        await send(picks[n % len(picks)])
        record(time.perf_counter() - started)
        n += CLIENTS
        due += rng.expovariate(1 / think) if think else 0.0


def _history_path(pick: Pick) -> str:
    return f"/v1/players/{pick[0]}/rounds?limit=20"


def _recall_path(pick: Pick) -> str:
    return f"/v1/rounds/{pick[1]}/{pick[2]}"


def _http_worker(
    port: int, picks: list[Pick], path_of: Callable[[Pick], str], think: float
) -> Worker:
    tokens = {p: _token(p) for p in {pick[0] for pick in picks}}

    async def work(index: int, record: Record, stop: asyncio.Event) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)

        async def send(pick: Pick) -> None:
            status, _ = await _get(reader, writer, path_of(pick), tokens[pick[0]])
            assert status == 200, f"{path_of(pick)} answered {status}"

        try:
            await _client(index, picks, send, think, record, stop)
        finally:
            writer.close()

    return work


async def _get(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, token: str
) -> tuple[int, bytes]:
    writer.write(
        f"GET {path} HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    )
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    body = await reader.readexactly(length)
    return int(lines[0].split(" ")[1]), body


def _token(player_id: str) -> str:
    return jwt.encode({"sub": player_id, "exp": int(time.time()) + 3600}, SECRET, "HS256")


async def _history_sql(conn: asyncpg.Connection, pick: Pick) -> None:
    await conn.fetch(_PLAYER_ROUNDS, pick[0], 2**63 - 1, "~", 21)


async def _recall_sql(conn: asyncpg.Connection, pick: Pick) -> None:
    await conn.fetchval(_RECALL, pick[1], pick[2], pick[0])


async def _anchored(
    query: Callable[[asyncpg.Connection, Pick], Awaitable[None]],
    picks: list[Pick],
    think: float,
) -> Figures:
    pool = await asyncpg.create_pool(URL, min_size=POOL * WORKERS, max_size=POOL * WORKERS)
    try:

        async def send(pick: Pick) -> None:
            async with pool.acquire() as conn:
                await query(conn, pick)

        async def work(index: int, record: Record, stop: asyncio.Event) -> None:
            await _client(index, picks, send, think, record, stop)

        return await _load(work)
    finally:
        await pool.close()


async def _not_found_timing(port: int, picks: list[Pick]) -> None:
    """Median latency of a 404 for another player's round and for no such round.

    The round of another table's pick: players sit at one table, so it is not theirs.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    others = [(a[0], b[1], b[2]) for a, b in itertools.pairwise(picks) if a[1] != b[1]]
    tokens = {p: _token(p) for p in {pick[0] for pick in others}}
    times: dict[str, list[float]] = {"another player's round": [], "no such round": []}
    bodies: dict[str, set[bytes]] = {name: set() for name in times}
    try:
        for n in range(PROBES):
            player, table, round_id = others[n % len(others)]
            nowhere = round_id[:-4] + "zzzz"
            pair = [
                ("another player's round", f"/v1/rounds/{table}/{round_id}"),
                ("no such round", f"/v1/rounds/{table}/{nowhere}"),
            ]
            for name, path in pair if n % 2 else pair[::-1]:  # neither always goes first
                started = time.perf_counter()
                status, body = await _get(reader, writer, path, tokens[player])
                times[name].append(time.perf_counter() - started)
                assert status == 404, f"{path} answered {status}"
                bodies[name].add(body)
    finally:
        writer.close()
    other, missing = (statistics.median(t) * 1000 for t in times.values())
    same = len(bodies["another player's round"] | bodies["no such round"]) == 1
    print(
        f"404 timing (1 client, interleaved, {PROBES} each): another player's round median "
        f"{other:.3f} ms, no such round median {missing:.3f} ms, difference "
        f"{other - missing:+.3f} ms; one body for both: {same}"
    )


class _web_process:
    """``croupier web --workers WORKERS`` on a free port, in its own process; yields the port."""

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
            [*command, "--workers", str(WORKERS)],
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=Path.cwd(),
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=1)
                time.sleep(2)  # every worker up, not just the first
                return self.port
            if self.process.poll() is not None:
                break
            time.sleep(0.2)
        self.__exit__()
        self.log.seek(0)
        raise RuntimeError(f"croupier web did not start: {self.log.read().decode()[-2000:]}")

    def __exit__(self, *_: object) -> None:
        self.process.terminate()
        self.process.wait(20)
        self.log.close()


def _row(name: str, model: str, through: str, figures: Figures) -> str:
    return (
        f"{name:<18}{model:<14}{through:<16}{figures.rate:>8,.0f}"
        f"{figures.p50:>9.2f}{figures.p99:>9.2f}"
    )


if __name__ == "__main__":
    run()
