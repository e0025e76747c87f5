"""The ``croupier`` command line: one sub-command per module, croupier's own in
:mod:`croupier.commands`; the program installed as ``croupier`` adds the floor's (``demo``,
``simulate``: :mod:`floor.cli`).

Every command: configuration read and validated first, one-line errors (a traceback only with
``--debug``), passwords masked, the exit codes of :mod:`croupier.errors`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence

from croupier import croupier_version
from croupier.config import Settings, help_table, load_settings, use_settings
from croupier.console import ArgumentParser
from croupier.errors import CommandError, ExitCode
from croupier.logs import configure_logging
from croupier.urls import mask_secrets

# Each module defines ``register(subparsers) -> None``, which adds its parser with
# ``set_defaults(run=...)``; ``run(args) -> int`` returns the exit status.
COMMANDS = tuple(
    f"croupier.commands.{name}"
    for name in (
        "serve",
        "replay",
        "migrate",
        "keygen",
        "verify",
        "redrive",
        "rounds",
        "project",
        "reconcile",
        "report",
        "integrity",
        "par",
        "odds",
        "contracts",
        "web",
    )
)

EPILOG = """\
exit codes: 0 done; 1 a finding (broken chain, discrepancy, unpaid round, stale file);
  2 a usage or configuration error; 3 an internal error (rerun with --debug); 130 interrupted

environment (or a .env file in the working directory):
{variables}
"""

DEBUG_HELP = "show the traceback of an error"

#: Commands that log at INFO unless CROUPIER_LOG_LEVEL says otherwise; the others at WARNING.
SERVICES = frozenset({"serve", "web"})


def build_parser(commands: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    """The argument parser with a sub-command for each module named in ``commands``."""
    parser = ArgumentParser(
        prog="croupier",
        description="Round settlement for live Casino Hold'em and Texas Hold'em Plus tables.",
        epilog=EPILOG.format(variables=help_table()),
    )
    parser.add_argument("--version", action="version", version=f"croupier {croupier_version()}")
    parser.add_argument(
        "--debug", action="store_true", help=DEBUG_HELP + " (here or after the command)"
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in commands:
        importlib.import_module(module).register(subparsers)
    for sub in subparsers.choices.values():
        sub.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
    return parser


def main(argv: Sequence[str] | None = None, commands: Sequence[str] = COMMANDS) -> int:
    """Run one command of ``commands`` as ``argv`` asks; returns the exit status."""
    try:
        settings: Settings = load_settings()
        problem: CommandError | None = None
    except CommandError as error:  # still give --help and --version, on the defaults
        settings, problem = Settings.model_construct(), error
    use_settings(settings)
    try:
        args = build_parser(commands).parse_args(argv)
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
        configure_logging(level)
        return int(args.run(args))
    except CommandError as error:
        if args.debug:
            traceback.print_exc()
        print(f"{command}: {error.line()}", file=sys.stderr)
        return error.code
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as error:
        if args.debug:
            traceback.print_exc()
        print(
            f"{command}: internal error: {type(error).__name__}: {mask_secrets(str(error))}; "
            "rerun with --debug for the traceback and report it",
            file=sys.stderr,
        )
        return ExitCode.INTERNAL
    finally:
        use_settings(None)


if __name__ == "__main__":
    sys.exit(main())
