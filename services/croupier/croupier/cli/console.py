"""What every ``croupier`` command shares: its parser, option types, the ledger option,
``--json`` output, and opening a ledger with errors an operator can act on.

Usage errors are one line (``croupier replay: ...; see `croupier replay --help```) and exit
2; help texts show each option's default.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from croupier.config import settings
from croupier.errors import CommandError, ExitCode, reaching
from croupier.urls import mask_url, parse_ledger_url

if TYPE_CHECKING:  # the ledger and the rules core load when a command uses them, not for --help
    from croupier.ledger import Ledger
    from croupier.ledger.keyring import Keyring
    from croupier.ledger.signing import LedgerKey

LEDGER_HELP = (
    "ledger URL: postgresql://USER@HOST:PORT/DATABASE, sqlite:///RELATIVE/FILE or "
    "sqlite:////ABSOLUTE/FILE (default: CROUPIER_DATABASE_URL, now {current})"
)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option that has a default says it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "default" in text
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or not action.option_strings
            or isinstance(action, argparse._StoreConstAction)
        ):
            return text
        return f"{text} (default: %(default)s)"


class ArgumentParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line, exit 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message}; see `{self.prog} --help`", file=sys.stderr)
        raise SystemExit(ExitCode.USAGE)


def program() -> str:
    """How to run ``croupier`` again from the working directory, as a shell word: the script
    beside this Python (``.venv/bin/croupier`` in a checkout), or ``croupier`` when that is
    what the shell's PATH finds."""
    script = Path(sys.executable).parent / "croupier"
    if not script.is_file():
        return "croupier"
    found = shutil.which("croupier")
    if found is not None and Path(found).resolve() == script.resolve():
        return "croupier"
    try:
        return shlex.quote(str(script.absolute().relative_to(Path.cwd())))
    except ValueError:
        return shlex.quote(str(script.absolute()))


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An option type: an integer from ``low`` to ``high``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is outside {low}..{high}")
        return value

    parse.__name__ = "number"
    return parse


def input_file(text: str) -> Path:
    """An option type: a file that exists and can be read."""
    path = Path(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(f"no such file: {path}")
    if not path.is_file() or not os.access(path, os.R_OK):
        raise argparse.ArgumentTypeError(f"{path} is not a readable file")
    return path


def output_file(text: str) -> Path:
    """An option type: a file that can be written (its folder must exist)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a directory: name a file in it")
    existed = path.exists()
    try:
        path.open("a").close()
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot write {path}: {error.strerror}") from None
    if not existed:
        path.unlink()
    return path


def output_folder(text: str) -> Path:
    """An option type: a folder to write in, which exists or can be made in one that does
    (so a mistyped path writes nothing anywhere)."""
    path = Path(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is not a folder")
    where = path if path.is_dir() else path.absolute().parent
    if not where.is_dir():
        raise argparse.ArgumentTypeError(
            f"{where} {'is not a folder' if where.exists() else 'does not exist'}: "
            f"{path} cannot be made in it"
        )
    if not os.access(where, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write in {where}: permission denied")
    return path


def ledger_url(text: str) -> str:
    """An option type: a ledger URL (see :mod:`croupier.urls`)."""
    try:
        parse_ledger_url(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def paytable_id(text: str) -> str:
    """An option type: a pay table id (``casino-holdem/classic``) or its short name."""
    from holdem.paytable import PayTableError, resolve_paytable

    try:
        return resolve_paytable(text)
    except PayTableError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_ledger_argument(parser: argparse.ArgumentParser) -> None:
    """``--ledger URL``, defaulting to ``CROUPIER_DATABASE_URL`` (see :func:`ledger_of`)."""
    current = mask_url(settings().database_url)
    parser.add_argument(
        "--ledger",
        type=ledger_url,
        metavar="URL",
        help=LEDGER_HELP.format(current=current).replace("%", "%%"),
    )


def ledger_of(args: argparse.Namespace) -> str:
    """The ledger URL a command was given, or the configured one."""
    chosen: str | None = args.ledger
    return chosen or settings().database_url


def add_json_argument(parser: argparse.ArgumentParser) -> None:
    """``--json``: output for programs."""
    parser.add_argument(
        "--json", action="store_true", help="print one JSON document (for programs) on stdout"
    )


def age_text(seconds: float) -> str:
    """A duration for people: seconds up to two minutes, minutes up to two hours, hours."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def print_json(document: Any) -> None:
    """Print ``document`` as JSON on stdout."""
    print(json.dumps(document, indent=1, sort_keys=False, default=str))


@asynccontextmanager
async def ledger_at(
    url: str, *, create: bool = False, key: LedgerKey | None = None, keyring: Keyring | None = None
) -> AsyncIterator[Ledger]:
    """The ledger at ``url``, opened (signing with ``key``, if given, under ``keyring``);
    failures to reach it become :class:`CommandError`.

    A SQLite file must exist unless ``create`` (then its folder is made as needed).
    """
    path = parse_ledger_url(url).path
    if path is not None and create:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise CommandError(
                f"cannot create the folder of the SQLite ledger {path}: {error.strerror}",
                "choose another --ledger",
            ) from None
    elif path is not None and not path.is_file():
        raise CommandError(f"no SQLite ledger at {path}", _missing_file_hint(url))
    from croupier.ledger import open_ledger

    with reaching(ledger=url):
        async with open_ledger(url, key, keyring) as ledger:
            yield ledger


def signing_key(path: str | None, *, required: bool) -> LedgerKey | None:
    """The ledger signing key at ``path`` (``CROUPIER_LEDGER_SIGNING_KEY``); a
    :class:`CommandError` when it is required and missing, or unusable."""
    from croupier.ledger.signing import LedgerKey, SigningKeyError

    if not path:  # unset, or set to nothing
        if required:
            raise CommandError(
                "CROUPIER_LEDGER_SIGNING_KEY is not set",
                "make a key pair with `croupier keygen --out DIR` and set it to "
                "DIR/ledger-signing.key",
            )
        return None
    try:
        return LedgerKey.from_file(path)
    except SigningKeyError as error:
        raise CommandError(str(error), "set CROUPIER_LEDGER_SIGNING_KEY to the key file") from None


def signing_keyring(path: str | None, key: LedgerKey | None) -> Keyring | None:
    """The keyring at ``path`` (``CROUPIER_LEDGER_KEYRING``) that ``key`` signs under, or
    None when unset (the key alone); a :class:`CommandError` when unusable or without
    ``key``."""
    from croupier.ledger.keyring import Keyring, KeyringError

    if not path:
        return None
    fix = "set CROUPIER_LEDGER_KEYRING to the keyring `croupier rotate-key` keeps (docs/keys.md)"
    try:
        keyring = Keyring.load(path)
    except KeyringError as error:
        raise CommandError(str(error), fix) from None
    if key is not None and key.public.key_id not in keyring:
        raise CommandError(
            f"the signing key {key.public.key_id} is not in the keyring {path}",
            "hand the ledger over to it with `croupier rotate-key --to`, or "
            + fix[0].lower()
            + fix[1:],
        )
    return keyring


def _missing_file_hint(url: str) -> str:
    rest = url.removeprefix("sqlite:///")
    if not rest.startswith("/") and Path("/" + rest).is_file():
        return (
            f"sqlite:/// takes a path relative to the working directory; for /{rest} write "
            f"sqlite:////{rest} (four slashes)"
        )
    return "check --ledger (sqlite:///RELATIVE/FILE or sqlite:////ABSOLUTE/FILE)"
