"""``croupier revoke-key``: mark a compromised signing key revoked from a position on.

Edits the keyring file only (docs/keys.md): nothing the key signed at or above the
position counts any more, for the service and for ``verify``.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import Any

from croupier.cli.commands.rotate_key import keyring_argument, keyring_path, load_keyring
from croupier.errors import CommandError


def register(subparsers: Any) -> None:
    """Add the ``revoke-key`` sub-command."""
    revoke = subparsers.add_parser(
        "revoke-key",
        description="Nothing a revoked key signed at or above POSITION counts any more: "
        "its heads there are refused by the service and `verify`, and its publish marks and "
        "set-aside rows of messages reporting an event there no longer count. Edits the "
        "keyring file only.",
    )
    revoke.add_argument("key_id", help="the key's id (16 hex digits, as `verify` names it)")
    revoke.add_argument(
        "--from",
        dest="position",
        type=int,
        required=True,
        help="the first position at which the key's signatures no longer count",
    )
    keyring_argument(revoke)
    revoke.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Mark the key revoked in the keyring file."""
    path = keyring_path(args)
    keyring = load_keyring(path)
    entry = keyring.get(args.key_id)
    if entry is None:
        raise CommandError(
            f"key {args.key_id} is not in the keyring {path}",
            "name a key id the keyring lists (`croupier verify` names the key of each head)",
        )
    if args.position < 1:
        raise CommandError("--from must be a position (1 or more)")
    earliest = min(args.position, entry.revoked_from or args.position)
    keyring = keyring.with_entry(replace(entry, revoked_from=earliest))
    keyring.save(path)
    print(f"key {entry.key_id} revoked from position {earliest} in {path}")
    return 0
