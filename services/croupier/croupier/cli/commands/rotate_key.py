"""``croupier rotate-key``: hand the ledger over from the signing key in use to a new one.

A handover fact in the chain under the outgoing key, and the keyring file (the keys, the
positions each may sign) brought up to date; nothing in the database beyond what the
service's role may append. The procedure is in docs/keys.md.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

from croupier.cli.console import add_ledger_argument, ledger_at, ledger_of, signing_key
from croupier.config import settings
from croupier.errors import CommandError
from croupier.ledger import HeadNotSigned
from croupier.ledger.keyring import KeyEntry, Keyring, KeyringError
from croupier.ledger.signing import LedgerKey, LedgerPublicKey, SigningKeyError


def register(subparsers: Any) -> None:
    """Add the ``rotate-key`` sub-command."""
    rotate = subparsers.add_parser(
        "rotate-key",
        description="Signed with the key in use (CROUPIER_LEDGER_SIGNING_KEY), append the "
        "handover 'this key hands over to NEW after this position' to the ledger, and write "
        "the keyring: the key in use signs up to that position, the new one from the next. "
        "Stop every instance of the service first; then start them with the new key and "
        "CROUPIER_LEDGER_KEYRING set to the keyring. Running it again is harmless. See "
        "docs/keys.md.",
    )
    rotate.add_argument(
        "--to",
        type=_public_key,
        required=True,
        metavar="NEW.pub",
        help="the new key's public half (keygen's .pub)",
    )
    keyring_argument(rotate)
    add_ledger_argument(rotate)
    rotate.set_defaults(run=run)


def keyring_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--keyring",
        type=Path,
        default=None,
        metavar="FILE",
        help="the keyring file to read and write (default: CROUPIER_LEDGER_KEYRING)",
    )


def _public_key(text: str) -> LedgerPublicKey:
    try:
        return LedgerPublicKey.from_file(text)
    except SigningKeyError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def keyring_path(args: argparse.Namespace) -> Path:
    chosen = args.keyring or settings().ledger_keyring
    if not chosen:
        raise CommandError(
            "no keyring file named", "give --keyring FILE or set CROUPIER_LEDGER_KEYRING"
        )
    return Path(chosen)


def load_keyring(path: Path) -> Keyring:
    try:
        return Keyring.load(path)
    except KeyringError as error:
        raise CommandError(str(error), "fix the keyring file or name another") from None


def run(args: argparse.Namespace) -> int:
    """Append the handover and write the keyring; print what to do next."""
    key = signing_key(settings().ledger_signing_key, required=True)
    assert key is not None
    path = keyring_path(args)
    keyring = load_keyring(path) if path.exists() else Keyring.of(key.public)
    own = keyring.get(key.public.key_id)
    if own is None:
        raise CommandError(
            f"the signing key {key.public.key_id} is not in the keyring {path}",
            "set CROUPIER_LEDGER_SIGNING_KEY to the key in use",
        )
    incoming: LedgerPublicKey = args.to
    known = keyring.get(incoming.key_id)
    if known is not None and known.first <= own.first:
        raise CommandError(
            f"key {incoming.key_id} signed this ledger before", "hand over to a new key (keygen)"
        )
    position = asyncio.run(_hand_over(ledger_of(args), key, keyring, incoming))
    keyring = keyring.with_entry(replace(own, last=position))
    keyring = keyring.with_entry(KeyEntry(incoming, position + 1))
    try:
        keyring.save(path)
    except OSError as error:
        raise CommandError(
            f"cannot write the keyring {path} ({error.strerror})",
            "run rotate-key again with a --keyring it can write: the handover is recorded",
        ) from None
    print(
        f"handed over at position {position}: key {key.public.key_id} signs up to it, "
        f"key {incoming.key_id} from {position + 1}"
    )
    print(f"keyring: {path}")
    print(
        "next: start the service with CROUPIER_LEDGER_SIGNING_KEY set to the new key and "
        f"CROUPIER_LEDGER_KEYRING={path}; audit with `croupier verify --keyring {path}`"
    )
    return 0


async def _hand_over(url: str, key: LedgerKey, keyring: Keyring, incoming: LedgerPublicKey) -> int:
    async with ledger_at(url, key=key, keyring=keyring) as ledger:
        try:
            return await ledger.rotate_key(incoming)
        except HeadNotSigned as error:
            raise CommandError(str(error)) from None
