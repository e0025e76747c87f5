"""The reconciliation suite against the SQLite ledger (a temporary file per test)."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import subprocess
import sys
import time
import tty
from pathlib import Path

import pytest
from reconcile_suite import HoldSuite, ReconcileSuite, feed, settle_feed, write_wallet

from croupier.cli.progress import UPDATE_EVERY


class TestSqliteHold(HoldSuite):
    @pytest.fixture
    def ledger_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'ledger.db'}"


class TestSqliteReconcile(ReconcileSuite):
    @pytest.fixture
    def ledger_url(self, tmp_path: Path) -> str:
        return f"sqlite:///{tmp_path / 'ledger.db'}"


async def test_progress_is_live_on_a_terminal_a_few_times_a_second_and_quiet_off_one(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    settled = await settle_feed(url, feed(rounds=40))
    wallet = tmp_path / "wallet.csv"
    write_wallet(settled, wallet)
    header, *lines = wallet.read_text().splitlines()
    long, short = tmp_path / "long.csv", tmp_path / "short.csv"
    for path, copies in ((long, 100), (short, 3)):  # long: staged in well over 0.25 s
        with path.open("w") as out:
            out.write(header + "\n")
            for copy in range(copies):
                out.writelines(f"c{copy}-{line}\n" for line in lines)
    command = [sys.executable, "-m", "croupier.cli", "reconcile", "--ledger", url, "--wallet"]

    on_terminal, elapsed = await asyncio.to_thread(
        _run_with_stderr_on_a_terminal, [*command, str(long)]
    )
    live = re.findall(r"\r(reconcile: [^\r\n]*, [\d,]+/s[^\r\n]*)", on_terminal)
    assert any(status.startswith("reconcile: wallet rows: ") for status in live), on_terminal
    assert len(live) <= elapsed / UPDATE_EVERY + 1
    assert re.search(r"reconcile: wallet rows: [\d,]+ rows in ", on_terminal)
    assert "reconcile: comparing: 1" in on_terminal  # the steps are counted

    piped = subprocess.run([*command, str(short)], capture_output=True, text=True, check=False)
    assert piped.returncode == 1  # the copies are debited again
    assert "\r" not in piped.stderr and "\r" not in piped.stdout
    assert "reconcile: wallet rows: " in piped.stderr and "result " in piped.stdout
    assert "... (all of them" in piped.stdout and "Traceback" not in piped.stderr


def _run_with_stderr_on_a_terminal(command: list[str]) -> tuple[str, float]:
    """What ``command`` wrote to stderr, a terminal (stdout a pipe), and how long it ran."""
    leader, follower = pty.openpty()
    tty.setraw(follower)  # no newline translation: "\r" is the program's own
    start = time.monotonic()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower)
    os.close(follower)
    written = bytearray()
    while True:
        try:
            block = os.read(leader, 65536)
        except OSError:  # the terminal's other end is closed
            break
        if not block:
            break
        written += block
    assert process.stdout is not None
    out = process.stdout.read()
    assert process.wait() == 1, out
    elapsed = time.monotonic() - start
    os.close(leader)
    return written.decode(), elapsed
