"""The ``croupier`` command line: one sub-command per module, croupier's own in
:mod:`croupier.cli.commands`; the program installed as ``croupier`` adds the floor's (``demo``,
``simulate``: :mod:`floor.cli`).

Every command: configuration read and validated first, one-line errors (a traceback only with
``--debug``), passwords masked, the exit codes of :mod:`croupier.errors`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from croupier import croupier_version
from croupier.cli.console import ArgumentParser
from croupier.config import Settings, help_table, load_settings, use_settings
from croupier.errors import CommandError, ExitCode
from croupier.scheduling import answer_round_trips_promptly
from croupier.urls import mask_secrets

#: Each command: its module and its one-line summary. A module defines
#: ``register(subparsers) -> None``, which adds its parser with ``set_defaults(run=...)``;
#: ``run(args) -> int`` returns the exit status. Only the module of the command being run is
#: imported, so ``--help`` and ``--version`` answer at once.
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": (
        "croupier.cli.commands.serve",
        "consume the studio feed, settle into the ledger, publish results",
    ),
    "replay": (
        "croupier.cli.commands.replay",
        "settle a recorded feed (JSONL) and write results and rejections",
    ),
    "migrate": (
        "croupier.cli.commands.migrate",
        "apply pending ledger migrations and set up the read models",
    ),
    "keygen": (
        "croupier.cli.commands.keygen",
        "make the ledger signing key pair (private key for the service, public for audits)",
    ),
    "rotate-key": (
        "croupier.cli.commands.rotate_key",
        "hand the ledger over to a new signing key and keep the keyring (docs/keys.md)",
    ),
    "revoke-key": (
        "croupier.cli.commands.revoke_key",
        "mark a compromised signing key revoked from a position on, in the keyring",
    ),
    "verify": (
        "croupier.cli.commands.verify",
        "check the ledger's hash chain, outbox and signed heads",
    ),
    "redrive": ("croupier.cli.commands.redrive", "re-publish parked messages to the feed"),
    "rounds": (
        "croupier.cli.commands.rounds",
        "list the ledger's open rounds and what each waits for",
    ),
    "partitions": (
        "croupier.cli.commands.partitions",
        "list each partition's owner, epoch and lease expiry, and the instances",
    ),
    "topology": (
        "croupier.cli.commands.topology",
        "print a feed mode's broker topology, or switch a vhost to it (single or routed)",
    ),
    "project": (
        "croupier.cli.commands.project",
        "project the ledger into the read models (checkpointed, resumable)",
    ),
    "reconcile": (
        "croupier.cli.commands.reconcile",
        "reconcile a wallet's transaction log against the ledger",
    ),
    "report": ("croupier.cli.commands.report", "finance reports from the ledger"),
    "integrity": (
        "croupier.cli.commands.integrity",
        "is the game fair? deal value and play residual z-scores of a period",
    ),
    "par": (
        "croupier.cli.commands.par",
        "print a pay table's PAR sheet (exact RTP, house edge, outcome table)",
    ),
    "odds": (
        "croupier.cli.commands.odds",
        "exact EV of each action at a decision, by full enumeration",
    ),
    "contracts": (
        "croupier.cli.commands.contracts",
        "generate the JSON Schemas of every message from the models",
    ),
    "web": (
        "croupier.cli.commands.web",
        "serve game history and round recall over HTTP (read-only)",
    ),
    "token": ("croupier.cli.commands.token", "make a player's token for the history API"),
}

EPILOG = """\
exit codes: 0 done; 1 a finding (broken chain, discrepancy, unpaid round, stale file);
  2 a usage or configuration error; 3 an internal error (rerun with --debug); 130 interrupted

environment (or a .env file in the working directory):
{variables}
"""

DEBUG_HELP = "show the traceback of an error"

#: Commands that log at INFO unless CROUPIER_LOG_LEVEL says otherwise; the others at WARNING.
SERVICES = frozenset({"serve", "web"})


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Sub-commands whose summaries come from the command table."""

    summaries: Mapping[str, str] = {}

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        kwargs.setdefault("help", self.summaries[name])
        parser: argparse.ArgumentParser = super().add_parser(name, **kwargs)
        parser.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP
        )
        return parser


def build_parser(
    commands: Mapping[str, tuple[str, str]] = COMMANDS, chosen: str | None = None
) -> argparse.ArgumentParser:
    """The argument parser with a sub-command for each of ``commands``; only the ``chosen``
    one's module is imported (all of them when None), the others are listed by name."""
    parser = ArgumentParser(
        prog="croupier",
        description="Round settlement for live Casino Hold'em and Texas Hold'em Plus tables.",
        epilog=EPILOG.format(variables=help_table()),
    )
    parser.add_argument("--version", action="version", version=f"croupier {croupier_version()}")
    parser.add_argument(
        "--debug", action="store_true", help=DEBUG_HELP + " (here or after the command)"
    )
    parser.register("action", "commands", _Commands)
    subparsers = parser.add_subparsers(
        dest="command", required=True, metavar="COMMAND", action="commands"
    )
    subparsers.summaries = {name: summary for name, (_, summary) in commands.items()}  # type: ignore[attr-defined]
    for name, (module, _) in commands.items():
        if chosen is None or name == chosen:
            importlib.import_module(module).register(subparsers)
        else:
            subparsers.add_parser(name)
    return parser


def chosen_command(argv: Sequence[str], commands: Iterable[str]) -> str:
    """The command ``argv`` names (its first word that is not an option), or ``""``."""
    word = next((word for word in argv if not word.startswith("-")), "")
    return word if word in set(commands) else ""


def main(
    argv: Sequence[str] | None = None, commands: Mapping[str, tuple[str, str]] = COMMANDS
) -> int:
    """Run one command of ``commands`` as ``argv`` asks; returns the exit status."""
    try:
        settings: Settings = load_settings()
        problem: CommandError | None = None
    except CommandError as error:  # still give --help and --version, on the defaults
        settings, problem = Settings.model_construct(), error
    use_settings(settings)
    try:
        words = sys.argv[1:] if argv is None else list(argv)
        args = build_parser(commands, chosen_command(words, commands)).parse_args(words)
    except SystemExit as done:  # --help, --version, or a usage error already printed
        return int(done.code or 0)
    except KeyboardInterrupt:
        print("croupier: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    command = f"croupier {args.command}"
    try:
        if problem is not None:
            raise problem
        level = settings.log_level or ("INFO" if args.command in SERVICES else "WARNING")
        from croupier.logs import configure_logging

        # a command's own error line says what a driver would log; a service logs it all
        configure_logging(
            level, libraries=settings.log_level is not None or args.command in SERVICES
        )
        answer_round_trips_promptly()
        return int(args.run(args))
    except CommandError as error:
        if args.debug:
            traceback.print_exc()
        print(f"{command}: {error.line()}", file=sys.stderr)
        return error.code
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except OSError as error:
        if error.filename is None:
            return _internal(command, error, args.debug)
        if args.debug:
            traceback.print_exc()
        path = error.filename2 or error.filename
        print(f"{command}: cannot use {path}: {error.strerror}; check the path", file=sys.stderr)
        return ExitCode.USAGE
    except Exception as error:
        return _internal(command, error, args.debug)
    finally:
        use_settings(None)


def _internal(command: str, error: Exception, debug: bool) -> int:
    """A bug: its one line (the traceback with ``--debug``), exit 3."""
    if debug:
        traceback.print_exc()
    print(
        f"{command}: internal error: {type(error).__name__}: {mask_secrets(str(error))}; "
        "rerun with --debug for the traceback and report it",
        file=sys.stderr,
    )
    return ExitCode.INTERNAL
