"""``croupier verify --read-models``: a read model edited behind the projector's back is
caught, row by row, on both databases; an honest one (also one still behind the ledger)
passes."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import nullcontext
from pathlib import Path

import pytest
from history_rounds import (
    TABLE_CH,
    boxes_round,
    jackpot_round,
    settle,
    shared_round,
    simple_round,
    voided_round,
)
from integration.conftest import connect_postgres, scratch_database

from croupier.cli import main
from croupier.ledger import open_ledger
from croupier.projection import open_store as read_models_of
from croupier.projection.check import CHECKED, check_read_models
from croupier.projection.projector import Projector
from croupier.projection.registry import load_projections

pytestmark = pytest.mark.integration

#: The attack: the player is shown a million euros paid where the ledger says 1.00 EUR.
MILLION = (
    "UPDATE history_recalls SET document = "
    "replace(document, '\"returned\":100,', '\"returned\":100000000,')"
)


@pytest.fixture(params=["postgres", "sqlite"])
async def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A ledger with the history rounds settled and projected."""
    sqlite = nullcontext(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    async with scratch_database() if request.param == "postgres" else sqlite as url:
        async with open_ledger(url) as ledger:
            await ledger.migrate()
            rounds = [shared_round(), boxes_round(), voided_round(), jackpot_round()]
            await settle(ledger, [*rounds, simple_round(TABLE_CH, "r-small", "p9", ante=50)])
            projector = Projector(ledger, read_models_of(ledger), load_projections())
            await projector.setup()
            await projector.catch_up()
        yield url


async def tamper(url: str, *statements: str) -> int:
    """Run ``statements`` as the database's owner would; the rows they changed."""
    changed = 0
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            for statement in statements:
                changed += conn.execute(statement).rowcount
            conn.commit()
        finally:
            conn.close()
        return changed
    pg = await connect_postgres(url)
    try:
        for statement in statements:
            status = await pg.execute(statement)
            changed += int(status.split()[-1])
    finally:
        await pg.close()
    return changed


async def verify(url: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, ["verify", "--read-models", "--ledger", url, *extra])
    return code, capsys.readouterr().out


async def test_honest_read_models_pass(ledger_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = await verify(ledger_url, capsys)
    assert code == 0, out
    assert "every row is what the ledger gives" in out


async def test_the_million_euro_edit_is_caught_and_each_row_named(
    ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    changed = await tamper(ledger_url, MILLION + " WHERE document LIKE '%\"returned\":100,%'")
    assert changed >= 1  # p1's Plus bet on box 3 returned 1.00 EUR, among others

    code, out = await verify(ledger_url, capsys)

    assert code == 1
    named = [line.strip() for line in out.splitlines() if "history_recalls (" in line]
    assert len(named) == changed
    assert (
        "history_recalls (table_id='thp-1', round_id='r-boxes', player_id='p1'): changed "
        "(document not what the ledger gives)"
    ) in named
    assert out.startswith("ledger chain ok")  # the chain itself is intact: only this finds it


async def test_every_kind_of_edit_is_named_in_the_json_report(
    ledger_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    await tamper(
        ledger_url,
        "UPDATE history_player_rounds SET returned = returned + 1 "
        "WHERE player_id = 'p1' AND round_id = 'r-shared'",
        "DELETE FROM history_recalls WHERE player_id = 'p2'",
        "INSERT INTO history_recalls (table_id, round_id, player_id, document) "
        "VALUES ('ch-1', 'r-shared', 'p-forged', '{}')",
        "UPDATE wagers SET stake = 1 WHERE bet_id = 'a4' AND round_id = 'r-boxes'",
    )

    code, out = await verify(ledger_url, capsys, "--json")

    assert code == 1
    report = json.loads(out)
    assert report["ok"] is False
    async with open_ledger(ledger_url) as ledger:
        settlement = (await ledger.read_stream(f"round:{TABLE_CH}:r-shared"))[-1].position
    found = {
        (d["table"], d["kind"], tuple(d["key"].values()), tuple(d["columns"]))
        for d in report["read_models"]["differences"]
    }
    assert found == {
        ("history_player_rounds", "changed", ("p1", settlement, "EUR"), ("returned",)),
        ("history_recalls", "missing", ("ch-1", "r-shared", "p2"), ()),
        ("history_recalls", "unexpected", ("ch-1", "r-shared", "p-forged"), ()),
        ("wagers", "changed", ("thp-1", "r-boxes", "a4"), ("stake",)),
    }


async def test_a_projector_behind_the_ledger_is_not_a_finding(ledger_url: str) -> None:
    async with open_ledger(ledger_url) as ledger:
        await settle(ledger, [simple_round(TABLE_CH, "r-later", "p8")])  # not projected yet
        report = await check_read_models(ledger, read_models_of(ledger), load_projections(CHECKED))
    assert report.ok, [d.line() for d in report.differences] + report.problems
    assert report.compared["history_recalls"] >= 5


async def test_without_read_models_the_check_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'bare.sqlite'}"
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        await settle(ledger, [shared_round()])
    code, out = await verify(url, capsys)
    assert code == 1 and "croupier project" in out


async def test_a_projector_committing_during_the_check_is_not_a_finding(ledger_url: str) -> None:
    """Rows the projector adds while the check reads are neither missing nor unexpected."""
    async with open_ledger(ledger_url) as ledger:
        more = [simple_round(TABLE_CH, f"r-busy-{n}", f"p{n % 7}") for n in range(60)]
        await settle(ledger, more)
        projector = Projector(ledger, read_models_of(ledger), load_projections(CHECKED), batch=40)
        moved: list[int] = []
        following = asyncio.create_task(
            projector.catch_up(on_progress=lambda p: moved.append(p.position))
        )
        reports = []
        while not following.done():
            reports.append(
                await check_read_models(ledger, read_models_of(ledger), load_projections(CHECKED))
            )
        await following
        reports.append(
            await check_read_models(ledger, read_models_of(ledger), load_projections(CHECKED))
        )
        async with read_models_of(ledger).session() as session:
            [(recalls,)] = await session.fetch("SELECT count(*) FROM history_recalls")
    assert len(moved) > 5 and len(reports) >= 2
    for report in reports:
        assert report.ok, [d.line() for d in report.differences] + report.problems
    assert reports[-1].compared["history_recalls"] == recalls > 60  # every row, once done
