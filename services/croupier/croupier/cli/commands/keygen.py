"""``croupier keygen``: make the Ed25519 key pair the service signs the ledger's heads with."""

from __future__ import annotations

import argparse
from typing import Any

from croupier.cli.console import output_folder
from croupier.errors import CommandError
from croupier.ledger.signing import LedgerKey, SigningKeyError


def register(subparsers: argparse._SubParsersAction[Any]) -> None:
    """Add the ``keygen`` sub-command."""
    parser = subparsers.add_parser("keygen")
    parser.add_argument(
        "--out",
        type=output_folder,
        required=True,
        help="folder for ledger-signing.key and .pub (made if its parent exists)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Write the pair; never overwrites an existing key."""
    try:
        private, public = LedgerKey.generate().write(args.out)
    except SigningKeyError as error:
        raise CommandError(str(error)) from None
    print(f"signing key (service only, mode 0600): {private}")
    print(f"public key (for `croupier verify --public-key`): {public}")
    print(f"for the service: CROUPIER_LEDGER_SIGNING_KEY={private}")
    print(
        "for a ledger another key signs now: hand it over first with "
        f"`croupier rotate-key --to {public}` (docs/keys.md)"
    )
    return 0
