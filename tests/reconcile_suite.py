"""The reconciliation suite every ledger adapter must pass (SQLite and PostgreSQL).

A subclass provides ``ledger_url`` (a fresh ledger per test). The ledger is filled by
settling a simulated studio feed (voids, wrong calls and late bets among it) through the
real settler; the wallet log is written by the studio's wallet from that feed and the
settlement results, honest or misbehaving on request; the report must find exactly what
the wallet planted, and nothing else.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from contract.wallet import FIELDS
from croupier.cli import main
from croupier.ledger import open_ledger
from croupier.projection import open_store
from croupier.reconcile import Reconciliation, Summary, as_dict, resolve_period
from croupier.reconcile.wallet import BadRow, read_file
from croupier.settlement.replay import replay
from croupier.settlement.round import SETTLED, VOIDED
from studio.config import Faults, StudioConfig, parse_table_specs
from studio.feed import simulate
from studio.message import FeedMessage
from studio.wallet import Planted, WalletFaults, WalletLog

TABLES = ("classic:shared=6", "royal-20:boxes=3", "progressive:shared=6", "standard:shared=6")
#: Discrepancies where the ledger expected a movement the wallet did not make as recorded.
EXPECTED_BY_LEDGER = (
    "missing_in_wallet",
    "wager_without_debit",
    "amount_mismatch",
    "currency_mismatch",
)
SCHEMA = Path(__file__).parents[1] / "contracts/reconcile/reconciliation-report.schema.json"


@dataclass
class Settled:
    """A ledger filled from a feed: the feed's messages and the results written."""

    url: str
    messages: list[FeedMessage]
    results: list[dict[str, Any]]
    rejected: set[str]


def feed(rounds: int = 80, seed: int = 11) -> list[FeedMessage]:
    config = StudioConfig(
        tables=parse_table_specs(list(TABLES), prefix="rc"),
        rounds=rounds,
        seed=seed,
        timeout_rate=0.05,
        side_bet_rate=0.4,
        faults=Faults(void=0.06, wrong_call=0.06, late_bet=0.06, redelivery=0.03),
    )
    return list(simulate(config))


async def settle_feed(url: str, messages: list[FeedMessage]) -> Settled:
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        out = io.StringIO()
        await replay([m.body for m in messages], ledger, out, io.StringIO(), batch_size=120)
        await Reconciliation.prepare_ledger(ledger)
        async with open_store(ledger).session() as session:
            rows = await session.fetch("SELECT event_id FROM rejected_wagers")
    results = [json.loads(line) for line in out.getvalue().splitlines()]
    return Settled(url, messages, results, {event_id for (event_id,) in rows})


def write_wallet(
    settled: Settled,
    path: Path,
    faults: WalletFaults | None = None,
    seed: int = 3,
    *,
    refund_per_wager: bool = False,
) -> list[Planted]:
    """The wallet's log of the whole feed; what it planted."""
    with WalletLog(path, faults, seed=seed, refund_per_wager=refund_per_wager) as wallet:
        for message in settled.messages:
            wallet.debit(message, rejected=message.event_id in settled.rejected)
        for result in settled.results:
            wallet.credit(result)
    assert not wallet.unused, f"the feed gave no row for {wallet.unused}"
    return wallet.planted


def planted_keys(planted: list[Planted]) -> set[tuple[str, str]]:
    out = set()
    for p in planted:
        where = p.message_id if p.wager is None else "/".join(p.wager)
        out.add((p.finds, where or ""))
    return out


def found_keys(discrepancies: list[dict[str, Any]]) -> set[tuple[str, str]]:
    out = set()
    for d in discrepancies:
        if d["message_id"]:
            where = d["message_id"]
        else:
            where = f"{d['table_id']}/{d['round_id']}/{d['bet_id']}"
        out.add((d["kind"], where))
    return out


def _voided(settled: Settled) -> list[dict[str, Any]]:
    """The voided results that return money."""
    return [
        r
        for r in settled.results
        if r["returned_total"] > 0 and all(b["outcome"] == "refund" for b in r["bets"])
    ]


def _result(settled: Settled, message_id: str) -> int:
    (amount,) = [r["returned_total"] for r in settled.results if r["message_id"] == message_id]
    return int(amount)


def as_dict_row(row: Any) -> dict[str, Any]:
    """A row read from a wallet log, as the fields a log writes."""
    assert not isinstance(row, BadRow), row
    return {name: getattr(row, name) for name in FIELDS}


def _write_rows(path: Path, rows: list[dict[str, Any]]) -> None:
    """A wallet log of ``rows`` (CSV or JSON Lines by the suffix)."""
    with path.open("w", newline="") as out:
        if path.suffix == ".csv":
            writer = csv.DictWriter(out, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)
        else:
            for row in rows:
                out.write(json.dumps({k: v for k, v in row.items() if v is not None}) + "\n")


async def reconcile(
    url: str, wallet: Path, positions: tuple[int, int] | None = None
) -> tuple[Summary, list[dict[str, Any]], list[tuple[str, str, int]]]:
    async with open_ledger(url) as ledger:
        head = await Reconciliation.prepare_ledger(ledger)
        period = await resolve_period(ledger, head, positions=positions)
        async with open_store(ledger).session() as session:
            reconciliation = Reconciliation(session, Summary(period, 0))
            summary = await reconciliation.run_file(wallet)
            found = [as_dict(d) async for d in reconciliation.discrepancies()]
            players = [p async for p in reconciliation.player_differences()]
    return summary, found, players


async def _facts(ledger: Any) -> AsyncIterator[Any]:
    """Every fact of the ledger, in position order."""
    after = 0
    while page := await ledger.read_all(after, 1000):
        after = page[-1].position
        for fact in page:
            yield fact


async def cli(argv: list[str]) -> int:
    """``croupier ARGV`` (it runs its own event loop, so in a thread)."""
    return await asyncio.to_thread(main, argv)


class ReconcileSuite:
    """Reconciliation on one database; subclasses supply ``ledger_url``."""

    @pytest.fixture
    def ledger_url(self) -> str:
        raise NotImplementedError

    @pytest.fixture
    async def settled(self, ledger_url: str) -> Settled:
        return await settle_feed(ledger_url, feed())

    async def test_an_honest_wallet_matches_everything(
        self, settled: Settled, tmp_path: Path
    ) -> None:
        wallet = tmp_path / "wallet.csv"
        assert write_wallet(settled, wallet) == []
        summary, found, players = await reconcile(settled.url, wallet)
        assert found == [] and players == []
        assert summary.ok and summary.bad_row_count == 0
        credited = [r for r in settled.results if r["returned_total"] > 0]
        matched = {c: m for c, m in summary.matched.items()}
        assert sum(
            m.get("credit", [0])[0] + m.get("refund", [0])[0] for m in matched.values()
        ) == len(credited)
        debits = sum(1 for _ in read_file(wallet)) - len(credited)
        assert sum(m["debit"][0] for m in matched.values()) == debits > 0
        for currency, kinds in matched.items():
            returned = sum(r["returned_total"] for r in credited if r["currency"] == currency)
            assert kinds.get("credit", [0, 0])[1] + kinds.get("refund", [0, 0])[1] == returned
        assert any("refund" in m for m in matched.values())  # voided rounds were refunded

    async def test_a_wallet_refunding_each_wager_of_a_void_matches_everything(
        self, settled: Settled, tmp_path: Path
    ) -> None:
        wallet = tmp_path / "wallet.jsonl"
        assert write_wallet(settled, wallet, refund_per_wager=True) == []
        summary, found, players = await reconcile(settled.url, wallet)
        assert found == [] and players == [] and summary.ok
        refunded = [b for r in _voided(settled) for b in r["bets"] if b["returned"] > 0]
        assert len(refunded) > len(_voided(settled))  # some voids refund several wagers
        matched = [m["refund"] for m in summary.matched.values() if "refund" in m]
        assert sum(count for count, _ in matched) == len(refunded)
        assert sum(amount for _, amount in matched) == sum(b["returned"] for b in refunded)

    @pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
    async def test_refunds_wager_by_wager_are_checked_wager_by_wager(
        self, settled: Settled, tmp_path: Path, suffix: str
    ) -> None:
        honest = tmp_path / f"honest{suffix}"
        write_wallet(settled, honest, refund_per_wager=True)
        rows = [as_dict_row(row) for row in read_file(honest)]
        voids = [r for r in _voided(settled) if sum(b["returned"] > 0 for b in r["bets"]) > 1]
        assert len(voids) >= 8
        dropped, again, changed, foreign, whole_after, whole_first, unknown_bet, alone = (
            r["message_id"] for r in voids[:8]
        )
        expected: set[tuple[str, str, str | None]] = set()
        out: list[dict[str, Any]] = []
        firsts = {id(r) for r in {r["message_id"]: r for r in reversed(rows)}.values()}
        for row in rows:
            message, bet = row["message_id"], row["bet_id"]
            first = message is not None and id(row) in firsts
            if message == dropped and first:
                expected.add(("missing_in_wallet", message, bet))
                continue
            if message == whole_first and first:  # refunded as a whole, then per wager
                out.append({**row, "bet_id": None, "amount": _result(settled, message)})
                expected |= {
                    ("duplicate_credit", message, r["bet_id"])
                    for r in rows
                    if r["message_id"] == message
                }
                out.append(row)
                continue
            out.append(row)
            if message == again and first:
                out.append({**row, "transaction_id": "again"})
                expected.add(("duplicate_credit", message, bet))
            elif message == changed and first:
                out[-1] = {**row, "amount": row["amount"] + 7}
                expected.add(("amount_mismatch", message, bet))
            elif message == foreign and first:
                out[-1] = {**row, "currency": "XTS"}
                expected.add(("currency_mismatch", message, bet))
            elif message == whole_after and first:
                out.append({**row, "bet_id": None, "amount": _result(settled, message)})
                expected.add(("duplicate_credit", message, None))
            elif message == unknown_bet and first:
                out.append({**row, "bet_id": "b-none"})
                expected.add(("unknown_to_ledger", message, "b-none"))
        made_up = {**out[-1], "kind": "refund", "message_id": "m-none", "bet_id": "b-x"}
        out.append(made_up)  # a wager refund of a result the ledger does not have
        expected.add(("unknown_to_ledger", "m-none", "b-x"))
        wallet = tmp_path / f"wallet{suffix}"
        _write_rows(wallet, out)
        summary, found, players = await reconcile(settled.url, wallet)
        assert {(d["kind"], d["message_id"], d["bet_id"]) for d in found} == expected
        assert len(found) == len(expected) and summary.finding_count == len(expected)
        assert alone not in {d["message_id"] for d in found}
        (missing,) = [d for d in found if d["kind"] == "missing_in_wallet"]
        assert missing["movement"] == "refund" and missing["ledger_amount"] > 0
        unknown = {d["bet_id"]: d["detail"] for d in found if d["kind"] == "unknown_to_ledger"}
        assert unknown == {
            "b-none": "no such wager in this result",
            "b-x": "no such result in the ledger",
        }
        net: dict[tuple[str, str], int] = {}
        for d in found:  # what the wallet did to each balance, less what the ledger says
            if d["wallet_amount"] is not None:
                key = (d["player_id"], d["wallet_currency"])
                net[key] = net.get(key, 0) + d["wallet_amount"]
            if d["kind"] in EXPECTED_BY_LEDGER:
                key = (d["player_id"], d["ledger_currency"])
                net[key] = net.get(key, 0) - d["ledger_amount"]
        assert {(p, c): v for p, c, v in players} == {k: v for k, v in net.items() if v}

    @pytest.mark.parametrize("fault", list(WalletFaults.__dataclass_fields__))
    async def test_each_misbehaviour_is_found_and_nothing_else(
        self, settled: Settled, tmp_path: Path, fault: str
    ) -> None:
        wallet = tmp_path / "wallet.jsonl"
        planted = write_wallet(settled, wallet, WalletFaults(**{fault: 3}))
        assert len(planted) == 3
        summary, found, players = await reconcile(settled.url, wallet)
        assert found_keys(found) == planted_keys(planted)
        assert len(found) == 3 and not summary.ok
        assert players and all(difference != 0 for _, _, difference in players)

    async def test_every_misbehaviour_at_once(self, settled: Settled, tmp_path: Path) -> None:
        wallet = tmp_path / "wallet.csv"
        faults = WalletFaults(**dict.fromkeys(WalletFaults.__dataclass_fields__, 2))
        planted = write_wallet(settled, wallet, faults, seed=9)
        summary, found, players = await reconcile(settled.url, wallet)
        assert found_keys(found) == planted_keys(planted)
        assert summary.finding_count == len(planted) == 14
        net: dict[tuple[str, str], int] = {}
        for d in found:  # what the wallet did to each balance, less what the ledger says
            sign = -1 if d["movement"] == "debit" else 1
            if d["wallet_amount"] is not None:
                key = (d["player_id"], d["wallet_currency"])
                net[key] = net.get(key, 0) + sign * d["wallet_amount"]
            if d["kind"] in EXPECTED_BY_LEDGER:
                key = (d["player_id"], d["ledger_currency"])
                net[key] = net.get(key, 0) - sign * d["ledger_amount"]
        assert {(p, c): v for p, c, v in players} == {k: v for k, v in net.items() if v}

    async def test_a_rejected_wager_debited_then_refunded_matches(
        self, settled: Settled, tmp_path: Path
    ) -> None:
        wallet = tmp_path / "wallet.csv"
        with WalletLog(wallet, WalletFaults(debit_rejected=1), seed=5, refunds=2) as log:
            for message in settled.messages:
                log.debit(message, rejected=message.event_id in settled.rejected)
            for result in settled.results:
                log.credit(result)
        assert not log.unused and len(log.refunded) == 2
        with wallet.open("a") as out:  # a stake refund with no debit to return
            out.write("w-ref,refund,,rc-1-classic,r-x,b-x,p1,EUR,500,2024-05-01T00:00:00Z\n")
        summary, found, players = await reconcile(settled.url, wallet)
        assert found_keys(found) == planted_keys(log.planted) | {
            ("unknown_to_ledger", "rc-1-classic/r-x/b-x")
        }
        assert len(log.planted) == 1 and summary.finding_count == 2
        refunded = [m["refunded_stake"] for m in summary.matched.values() if "refunded_stake" in m]
        assert sum(count for count, _ in refunded) == 2
        assert ("p1", "EUR", 500) in players

    async def test_a_period_in_the_middle_flags_nothing_outside_it(
        self, settled: Settled, tmp_path: Path
    ) -> None:
        wallet = tmp_path / "wallet.csv"
        write_wallet(settled, wallet)
        async with open_ledger(settled.url) as ledger:
            head = await ledger.last_position()
        summary, found, _ = await reconcile(settled.url, wallet, (head // 3, 2 * head // 3))
        assert found == [] and summary.ok
        assert summary.outside["earlier"] > 0 and summary.outside["later"] > 0

    async def test_a_dropped_credit_before_the_wallets_last_row_is_missing(
        self, settled: Settled, tmp_path: Path
    ) -> None:
        wallet = tmp_path / "wallet.csv"
        write_wallet(settled, wallet)
        lines = wallet.read_text().splitlines()
        last_credit = max(i for i, line in enumerate(lines) if ",credit," in line)
        dropped = next(csv.reader([lines[last_credit]]))[2]
        wallet.write_text("\n".join(lines[:last_credit] + lines[last_credit + 1 :]) + "\n")
        _, found, _ = await reconcile(settled.url, wallet)
        # the wallet applied other results after this one was settled: it is missing
        assert [(d["kind"], d["message_id"]) for d in found] == [("missing_in_wallet", dropped)]

    async def test_what_the_cut_off_leaves_unapplied_is_in_transit(
        self, settled: Settled, tmp_path: Path
    ) -> None:
        wallet = tmp_path / "wallet.csv"
        past = datetime(2001, 1, 1, tzinfo=UTC)  # the wallet's export ended before settling
        with WalletLog(wallet, WalletFaults(drop_credit=1), clock=lambda: past) as log:
            for message in settled.messages:
                log.debit(message, rejected=message.event_id in settled.rejected)
            for result in settled.results:
                log.credit(result)
        (dropped,) = log.planted
        with wallet.open("a") as out:  # debits for wagers the ledger has not seen (yet)
            out.write("w-new,debit,,rc-1-classic,r-new,b-new,p1,EUR,500,2999-01-01T00:00:00Z\n")
            out.write("w-old,debit,,rc-1-classic,r-old,b-old,p1,EUR,500,2001-01-01T00:00:00Z\n")
        summary, found, players = await reconcile(settled.url, wallet)
        kinds = {(d["kind"], d["message_id"] or d["bet_id"]) for d in found}
        assert kinds == {
            ("in_transit", dropped.message_id),
            ("in_transit", "b-new"),
            ("debit_without_wager", "b-old"),
        }
        assert summary.finding_count == 1
        assert players == [("p1", "EUR", -500)]

    async def test_from_and_to_follow_the_cut_off_rule_and_late_credits_are_in_transit(
        self, settled: Settled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        async with open_ledger(settled.url) as ledger:
            recorded = [(f.position, f.recorded_at) async for f in _facts(ledger)]
            head = len(recorded)
            start, end = recorded[head // 3][1], recorded[2 * head // 3][1]
            async with open_store(ledger).session() as session:
                results = await session.fetch(
                    "SELECT message_id, settled_at, position FROM results "
                    "WHERE returned + refunded > 0 ORDER BY position"
                )
        # --from: the first position recorded at or after it; --to: the last before it
        first = min(position for position, at in recorded if at >= start)
        last = max(position for position, at in recorded if at < end)
        in_period = [r for r in results if first <= r[2] <= last]
        # The wallet applied each result when it was settled, and its export ended at the
        # settlement of a result in the middle of the period: what came later is in transit.
        export_end = in_period[len(in_period) // 2][1]
        settled_at = {message_id: at for message_id, at, _ in results}
        late = {m for m, at, _ in in_period if at >= export_end}
        wallet = tmp_path / "wallet.csv"
        write_wallet(settled, wallet)
        with wallet.open() as handle:
            rows = list(csv.DictReader(handle))
        with wallet.open("w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=list(rows[0]))
            writer.writeheader()
            for row in rows:
                at = settled_at.get(row["message_id"])
                if at is None:
                    writer.writerow(row)
                elif at < export_end:
                    writer.writerow({**row, "occurred_at": at})
        args = ["reconcile", "--ledger", settled.url, "--wallet", str(wallet), "--json"]
        capsys.readouterr()
        period = ["--from", start.isoformat(), "--to", end.isoformat()]
        assert await cli([*args, *period]) == 0  # rows in transit alone are no discrepancy
        report = json.loads(capsys.readouterr().out)
        assert (report["ledger"]["first_position"], report["ledger"]["last_position"]) == (
            first,
            last,
        )
        assert late and {d["message_id"] for d in report["discrepancies"]} == late
        assert {d["kind"] for d in report["discrepancies"]} == {"in_transit"}
        assert report["wallet"]["outside_period"]["earlier"] > 0
        # the same export against the whole ledger: the late results of the period are
        # still in transit, and so are the later ones the export never reached
        assert await cli(args) == 0
        everything = json.loads(capsys.readouterr().out)["discrepancies"]
        assert {d["message_id"] for d in everything} == {
            m for m, at, _ in results if at >= export_end
        }

    async def test_the_cli_reports_json_csv_and_exit_codes(
        self, settled: Settled, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        wallet = tmp_path / "wallet.csv"
        planted = write_wallet(settled, wallet, WalletFaults(drop_credit=1, debit_rejected=1))
        with wallet.open("a") as out:
            out.write("w-bad,credit,m-1,,,,p1,EUR,-5,2024-05-01T00:00:00Z\n")
        exceptions = tmp_path / "exceptions.csv"
        args = ["reconcile", "--wallet", str(wallet), "--ledger", settled.url]
        assert await cli([*args, "--json", "--csv", str(exceptions)]) == 1
        report = json.loads(capsys.readouterr().out)
        jsonschema.validate(report, json.loads(SCHEMA.read_text()))
        assert found_keys(report["discrepancies"]) == planted_keys(planted)
        bad = report["wallet"]["bad_rows"]
        assert bad == [{"line": len(wallet.read_text().splitlines()), "reason": bad[0]["reason"]}]
        assert "amount" in bad[0]["reason"]
        with exceptions.open() as handle:
            assert len(list(csv.DictReader(handle))) == 2
        assert report["ledger"]["last_hash"] == report["ledger"]["head_hash"]
        assert (
            await cli(
                [
                    "verify",
                    "--ledger",
                    settled.url,
                    "--anchor",
                    f"{report['ledger']['last_position']}:{report['ledger']['last_hash']}",
                ]
            )
            == 0
        )
        honest = tmp_path / "honest.jsonl"
        write_wallet(settled, honest)
        assert await cli(["reconcile", "--wallet", str(honest), "--ledger", settled.url]) == 0
        text = capsys.readouterr().out
        assert "everything matches" in text
        assert (
            await cli(
                ["reconcile", "--wallet", str(tmp_path / "none.csv"), "--ledger", settled.url]
            )
            == 2
        )
        assert await cli([*args, "--positions", "5:999999999"]) == 2
        assert "ledger holds" in capsys.readouterr().err

    async def test_sigkill_during_a_reconciliation_changes_nothing(
        self, settled: Settled, tmp_path: Path
    ) -> None:
        wallet = tmp_path / "wallet.csv"
        write_wallet(settled, wallet, WalletFaults(drop_credit=2, double_credit=2))
        big = tmp_path / "big.csv"  # long enough to be killed in the middle
        lines = wallet.read_text().splitlines()
        with big.open("w") as out:
            out.write(lines[0] + "\n")
            for copy in range(2000):  # 400 copies once finished inside the 1.5 s kill
                for line in lines[1:]:
                    out.write(f"c{copy}-{line}\n")
        command = [sys.executable, "-m", "croupier.cli", "reconcile", "--ledger", settled.url]
        for delay in (0.5, 1.0, 1.5):
            process = subprocess.Popen(
                [*command, "--wallet", str(big), "--csv", str(tmp_path / "x.csv")],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            await asyncio.sleep(delay)
            process.send_signal(signal.SIGKILL)
            assert process.wait() == -signal.SIGKILL, "it ended before the kill: nothing proven"
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".x.csv")] == []
        assert not (tmp_path / "x.csv").exists()
        done = subprocess.run(
            [*command, "--wallet", str(wallet), "--json"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 1, done.stderr
        _, found, _ = await reconcile(settled.url, wallet)
        report = json.loads(done.stdout)
        assert report["discrepancies"] == found
        assert len(found) == 4


class HoldSuite:
    """``croupier report hold`` against the settlement facts; subclasses supply ``ledger_url``."""

    @pytest.fixture
    def ledger_url(self) -> str:
        raise NotImplementedError

    async def test_the_days_hold_is_the_ledgers_to_the_unit(
        self, ledger_url: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        settled = await settle_feed(ledger_url, feed(rounds=60))
        expected: dict[tuple[str, str, str], Counter[str]] = {}
        async with open_ledger(ledger_url) as ledger:
            after = 0
            while page := await ledger.read_all(after, 1000):
                after = page[-1].position
                for fact in page:
                    if fact.type not in (SETTLED, VOIDED):
                        continue
                    day = fact.recorded_at.astimezone(UTC).date().isoformat()
                    game_day = fact.data["event"]["occurred_at"][:10]
                    for line in fact.data["results"]:
                        key = (day, fact.stream.split(":")[1], line["currency"])
                        sums = expected.setdefault(key, Counter())
                        if fact.type == VOIDED:
                            sums["refunded"] += line["stake"]
                        else:
                            sums["wagered"] += line["stake"]
                            sums["returned"] += line["returned"]
                    for posting in fact.data["postings"]:
                        if posting["account"] == "house":
                            key = (day, fact.stream.split(":")[1], posting["currency"])
                            expected[key]["hold"] += posting["amount"]
                    for meter in fact.data["jackpot"]:
                        key = (day, fact.stream.split(":")[1], meter["currency"])
                        expected[key]["contributed"] += meter["contributed"]
        assert settled.results
        days = {day for day, _, _ in expected}
        capsys.readouterr()
        for day in days:
            assert (
                await cli(["report", "hold", "--day", day, "--ledger", ledger_url, "--json"]) == 0
            )
            report = json.loads(capsys.readouterr().out)
            lines = report["by_settlement_time"]["lines"]
            got = {
                (day, line["table_id"], line["currency"]): Counter(
                    {k: line[k] for k in ("wagered", "returned", "refunded", "contributed", "hold")}
                )
                for line in lines
            }
            mine = {k: +v for k, v in expected.items() if k[0] == day}
            assert {k: +v for k, v in got.items()} == mine
            assert report["rounds_with_other_game_day"] > 0  # the studio's clock is not today
            assert report["by_game_time"]["lines"] == []
        assert any(line["contributed"] for line in lines)  # the progressive table's meter
        assert await cli(["report", "hold", "--day", game_day, "--ledger", ledger_url]) == 0
        text = capsys.readouterr().out
        assert "by game time" in text and "rc-3-progressive" in text
        assert await cli(["report", "hold", "--day", "2024-13-01", "--ledger", ledger_url]) == 2
