"""A CSV wallet log loaded by PostgreSQL's COPY stages exactly what reading it row by row
stages, and reports the same bad rows with the same line numbers and reasons."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from contract.wallet import FIELDS
from croupier.ledger import open_ledger
from croupier.projection import open_store
from croupier.reconcile import _STAGING
from croupier.reconcile.bulk import copy_csv
from croupier.reconcile.wallet import BadRow, WalletRow, read_file

pytestmark = pytest.mark.integration

HEADER = ",".join((*FIELDS, "note")) + "\n"
ROWS = (
    "w1,credit,m1,,,,p1,EUR,100,2024-05-01T00:00:00Z,x\n"
    "w2,debit,,t1,r1,b1,p1,EUR,0042,2024-05-01T00:00:00.123456Z,x\n"
    "w3,refund,m3,t1,r1,,p1,GBP,7,2024-05-01T02:00:00+02:00,x\n"  # an offset: checked one by one
    "w4,credit,m4,,,,p1,EUR,1e3,2024-05-01T00:00:00Z,x\n"
    "w5,debit,,t1,r1,,p1,EUR,100,2024-05-01T00:00:00Z,x\n"
    "w6,credit,m6,,,,p1,eur,100,2024-05-01T00:00:00Z,x\n"
    "w7,credit,m7,,,,p1,EUR,0,2024-05-01T00:00:00Z,x\n"
    "w8,credit,m8,,,,p1,EUR,9223372036854775807,2024-05-01T00:00:00Z,x\n"
    "w9,credit,m9,,,,p1,EUR,9223372036854775808,2024-05-01T00:00:00Z,x\n"
    f"w10,debit,,t1,r1,{'b' * 201},p1,EUR,5,2024-05-01T00:00:00Z,x\n"
    "w11,,m11,,,,p1,EUR,5,2024-05-01T00:00:00Z,x\n"
    "w12,credit,m12,,,,,EUR,5,2024-05-01T00:00:00Z,x\n"
    "w13,credit,m13,,,,p1,EUR,5,2024-05-01T0a:00:00Z,x\n"
    "w14,credit,m14,,,,p1,EUR,5,2024-13-01T00:00:00Z,x\n"
    "w15,credit,m15,,,,p1,EUR,-5,2024-05-01T00:00:00Z,x"  # no newline at the end
)


async def _staged(url: str, path: Path) -> tuple[bool, list[tuple[Any, ...]], list[BadRow]]:
    """Whether COPY took the file, the rows staged, and the bad rows."""
    async with open_ledger(url) as ledger:
        await ledger.migrate()
        async with open_store(ledger).session() as session:
            await session.execute(_STAGING)
            loaded = await copy_csv(session, path, "wallet_tx")
            bad: list[BadRow] = []
            if loaded is not None:
                async for chunk in loaded.leftovers:
                    good = [row for row in chunk if isinstance(row, WalletRow)]
                    bad.extend(row for row in chunk if isinstance(row, BadRow))
                    await session.copy_rows("wallet_tx", WalletRow._fields, good)
            rows = await session.fetch("SELECT * FROM wallet_tx ORDER BY line")
    return loaded is not None, rows, bad


@pytest.mark.parametrize(
    ("name", "text", "copied"),
    [
        ("plain", HEADER + ROWS, True),
        ("crlf", (HEADER + ROWS).replace("\n", "\r\n"), True),
        ("quoted", HEADER + ROWS.replace("w1,", '"w1",'), False),
        ("ragged", HEADER + ROWS + "\nw16,credit,m16\n", False),
        ("end marker", HEADER + "\\.\n" + ROWS, False),
        (
            "no note column",
            "\n".join(x.rpartition(",")[0] for x in (HEADER + ROWS).split("\n")),
            True,
        ),
    ],
)
async def test_copy_stages_what_the_row_reader_stages(
    postgres_database: str, tmp_path: Path, name: str, text: str, copied: bool
) -> None:
    path = tmp_path / "wallet.csv"
    path.write_bytes(text.encode())
    taken, rows, bad = await _staged(postgres_database, path)
    assert taken == copied
    expected = list(read_file(path))
    if taken:
        assert rows == [tuple(r) for r in expected if isinstance(r, WalletRow)]
        assert bad == [r for r in expected if isinstance(r, BadRow)]
        assert len(bad) >= 9  # every kind of bad row above
    else:
        assert rows == []  # the file is read row by row instead, from the start
