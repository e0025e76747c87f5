"""``croupier verify``: walk the ledger's hash chain and outbox; exit 1 when anything is off.

With ``--public-key`` (the auditor's only input besides read access; once per key after
key rotations) or ``--keyring`` it also checks every signed head against the key that
signed it (each row must sit under a head a key signed in its turn, the chain must still
reach the last one, and each key's turn must end with its head) and every publish mark and
marker (docs/keys.md). The outbox is always checked against what the recorded settlements
say. With ``--read-models`` it also projects the ledger
again and compares every row of the history and wager read models with what is stored
(:mod:`croupier.projection.check`), naming each row that differs: what a player's page
shows is then proven against the ledger, not only the ledger itself.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import asdict
from typing import Any

from croupier.bus import DEAD_LETTER_EXCHANGE
from croupier.cli.console import (
    add_json_argument,
    add_ledger_argument,
    ledger_at,
    ledger_of,
    print_json,
)
from croupier.cli.progress import Progress
from croupier.errors import ExitCode
from croupier.ledger import Ledger, VerifyReport
from croupier.ledger.keyring import Keyring, KeyringError
from croupier.ledger.signing import LedgerPublicKey, SigningKeyError
from croupier.projection import open_store as open_read_models
from croupier.projection.check import CHECKED, ReadModelReport, check_read_models
from croupier.projection.registry import load_projections
from croupier.reports.audit import BooksAudit, BooksReport
from croupier.settlement.deadletters import LETTERS
from croupier.settlement.results import outbox_rule

LISTED = 50  # problems printed one per line; --json lists every one
BOOKS_PAGE = 5_000  # ledger rows read per page by the books audit


def register(subparsers: Any) -> None:
    """Add the ``verify`` sub-command."""
    parser = subparsers.add_parser(
        "verify",
        description="Walk the hash chain and the outbox; with --public-key (once per key) or "
        "--keyring also the signed heads, each against the key that signed it, and the "
        "publish marks; with --read-models also every row of the history and wager read "
        "models against the ledger projected again. Exit 1 and name every changed, removed, "
        "inserted, unsigned, forged or missing row. A SQLite ledger file must exist.",
    )
    add_ledger_argument(parser)
    parser.add_argument(
        "--anchor",
        type=_anchor,
        help="POSITION:HASH kept from an earlier run (its head): the chain must still hold it",
    )
    parser.add_argument(
        "--public-key",
        type=_public_key,
        action="append",
        metavar="FILE",
        help="a ledger signing key's public half (croupier keygen): check signed heads and "
        "marks; give it once per key (old and new) after a rotation",
    )
    parser.add_argument(
        "--keyring",
        type=_keyring,
        metavar="FILE",
        help="the keyring file (croupier rotate-key): every key with the positions it may "
        "sign, and its revocations",
    )
    parser.add_argument(
        "--read-models",
        action="store_true",
        help="also re-derive the read models (players' history, wagers) from the ledger and "
        "name every stored row that differs",
    )
    add_json_argument(parser)
    parser.set_defaults(run=run)


def _public_key(text: str) -> LedgerPublicKey:
    try:
        return LedgerPublicKey.from_file(text)
    except SigningKeyError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _keyring(text: str) -> Keyring:
    try:
        return Keyring.load(text)
    except KeyringError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _anchor(text: str) -> tuple[int, str]:
    position, _, digest = text.partition(":")
    if not position.isdigit() or len(digest) != 64:
        raise argparse.ArgumentTypeError("an anchor is POSITION:HASH, e.g. 1042:9f86d081...")
    return int(position), digest


def run(args: argparse.Namespace) -> int:
    """Print the verification report; 1 when any row is changed, removed or inserted."""
    keyring = args.keyring
    if args.public_key:
        keyring = (keyring or Keyring()).merged(Keyring.of(*args.public_key))
    report, books, models = asyncio.run(
        _verify(ledger_of(args), args.anchor, keyring, args.read_models)
    )
    ok = report.ok and books.ok and (models is None or models.ok)
    if args.json:
        extra = {} if models is None else {"read_models": models.to_json()}
        print_json({**report.to_json(), "ok": ok, "books": asdict(books), **extra})
    else:
        print(report.summary())
        print(books.summary())
        for line in books.problems[:LISTED]:
            print(f"  {line}")
        for problem in report.problems[:LISTED]:
            print(f"  {problem.line()}")
        if len(report.problems) > LISTED:
            print(f"  ... and {len(report.problems) - LISTED} more (--json lists every one)")
        if models is not None:
            _print_read_models(models)
        _print_notes(report.notes)
        if ok:  # a head worth keeping outside the database, for the next verification
            print(f"anchor for the next run: --anchor {report.head_position}:{report.head_hash}")
    return ExitCode.OK if ok else ExitCode.FINDING


def _print_read_models(models: ReadModelReport) -> None:
    print(models.summary())
    for difference in models.differences[:LISTED]:
        print(f"  {difference.line()}")
    if len(models.differences) > LISTED:
        print(f"  ... and {len(models.differences) - LISTED} more (--json lists every one)")


def _print_notes(notes: tuple[str, ...]) -> None:
    """Information beside the findings: what the relay set aside, and why."""
    if notes:
        print(f"{len(notes)} note(s), not findings:")
    for note in notes[:LISTED]:
        print(f"  {note}")
    if len(notes) > LISTED:
        print(f"  ... and {len(notes) - LISTED} more (--json lists every one)")


async def _verify(
    url: str, anchor: tuple[int, str] | None, keyring: Keyring | None, read_models: bool
) -> tuple[VerifyReport, BooksReport, ReadModelReport | None]:
    async with ledger_at(url) as ledger:
        total = await ledger.last_position()
        with Progress("verify", "rows", total) as progress:
            report = await ledger.verify(
                anchor=anchor,
                progress=progress.advance,
                keyring=keyring,
                outbox_rule=outbox_rule,
                unruled=(DEAD_LETTER_EXCHANGE,),
                letter_rule=LETTERS,
            )
        books = await _audit(ledger, total)
        models = await _read_models(ledger, total) if read_models else None
        return report, books, models


async def _read_models(ledger: Ledger, total: int) -> ReadModelReport:
    """The read models re-derived from the ledger and compared row by row."""
    projections = load_projections(CHECKED)
    with Progress("read models", "facts", total) as progress:
        return await check_read_models(
            ledger, open_read_models(ledger), projections, progress=progress.advance
        )


async def _audit(ledger: Ledger, total: int) -> BooksReport:
    """The books re-checked from the recorded facts (croupier.reports.audit), page by page."""
    audit, after = BooksAudit(), 0
    with Progress("books", "rows", total) as progress:
        while page := await ledger.read_all(after, BOOKS_PAGE):
            audit.read(page)
            after = page[-1].position
            progress.advance(len(page))
    return audit.report
