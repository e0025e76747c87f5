"""Private PostgreSQL and RabbitMQ instances that a test may restart, kill and pause.

The shared services on 5432 and 5672 belong to the developer: no test stops or reconfigures
them. A test that needs a database or broker to go away starts its own here: a PostgreSQL
cluster (``initdb`` + ``pg_ctl`` in a temp dir, trust auth, loopback only) or a RabbitMQ node
(its own node name, AMQP and distribution ports, mnesia, log and cookie under a temp dir),
both on free ports. Each runs in its own process group, so ``kill()`` (SIGKILL) and
``pause()`` (SIGSTOP) reach every process of the instance and nothing else. As root the
instances run as the ``postgres`` and ``rabbitmq`` users (neither server runs as root).

A missing binary fails the test with the package to install; nothing is skipped.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest

PG_BIN: Final = Path(os.environ.get("CROUPIER_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
RABBITMQ_BIN: Final = Path(os.environ.get("CROUPIER_TEST_RABBITMQ_BIN", "/usr/lib/rabbitmq/bin"))
_START_TIMEOUT: Final = 120.0
_INITDB: Final = ("-E", "UTF8", "--no-sync", "--no-instructions")
# Loopback only; fsync off: the tests kill processes, not the machine, so the page cache
# keeps every commit.
_SETTINGS: Final = ("-c", "listen_addresses=127.0.0.1", "-c", "fsync=off")


def free_port() -> int:
    """A TCP port nothing listens on right now (127.0.0.1)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def port_open(port: int) -> bool:
    """Whether something accepts TCP connections on 127.0.0.1:``port``."""
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def _binary(directory: Path, name: str, package: str) -> str:
    path = directory / name
    if not path.is_file():
        pytest.fail(
            f"{path} not found: private test instances need the {package} package "
            f"(`apt-get install {package}`; .ci/run installs it)",
            pytrace=False,
        )
    return str(path)


def _run_as(user: str) -> dict[str, Any]:
    """Popen arguments that drop root to ``user``; nothing when not root."""
    if os.geteuid() != 0:
        return {}
    try:
        pwd.getpwnam(user)
    except KeyError:
        pytest.fail(f"user {user!r} missing: install the server package that creates it")
    return {"user": user, "group": user, "extra_groups": []}


def _own(path: Path, user: str) -> None:
    if os.geteuid() == 0:
        shutil.chown(path, user, user)


def _descendants(root: int) -> list[int]:
    """Every live process below ``root`` (from /proc), children first."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: list[int] = []
    frontier = [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


class _Instance:
    """A server in its own process group: stop, kill, pause and resume it."""

    user: str
    directory: Path
    process: subprocess.Popen[bytes] | None = None

    def _pgid(self) -> int | None:
        return self.process.pid if self.process and self.process.poll() is None else None

    def _signal(self, signum: int) -> None:
        pgid = self._pgid()
        if pgid is None:
            return
        # PostgreSQL's backends leave the postmaster's process group (setsid): reach them
        # as its descendants too.
        for pid in [pgid, *_descendants(pgid)]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signum)

    def kill(self) -> None:
        """SIGKILL every process of the instance (a crash); its files stay for a restart."""
        self._signal(signal.SIGCONT)
        self._signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait(30)
        self._after_kill()

    def _after_kill(self) -> None:
        pass

    def pause(self) -> None:
        """SIGSTOP the whole instance: it holds its sockets and answers nothing."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        self._signal(signal.SIGCONT)

    @property
    def running(self) -> bool:
        return self._pgid() is not None


class PrivatePostgres(_Instance):
    """A throw-away PostgreSQL 15 cluster on a free port; ``url`` is its ``postgres`` DB."""

    def __init__(self, directory: Path) -> None:
        self.user = "postgres"
        self.directory = directory
        self.data = directory / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._log = directory / "postgres.log"
        self._socket = ("-k", str(directory))
        self._postgres = _binary(PG_BIN, "postgres", "postgresql-15")
        initdb = _binary(PG_BIN, "initdb", "postgresql-15")
        _own(directory, self.user)
        done = subprocess.run(
            [initdb, "-D", str(self.data), "-A", "trust", "-U", "postgres", *_INITDB],
            capture_output=True,
            cwd=directory,
            check=False,
            **_run_as(self.user),
        )
        if done.returncode != 0:
            pytest.fail(f"initdb failed: {done.stderr.decode(errors='replace')}", pytrace=False)

    def start(self) -> None:
        """Start the server (after a stop or a kill: crash recovery runs) and wait for it."""
        assert not self.running, "the private PostgreSQL is already running"
        out = self._log.open("ab")
        self.process = subprocess.Popen(
            [self._postgres, "-D", str(self.data), "-p", str(self.port), *self._socket, *_SETTINGS],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.directory,
            process_group=0,
            **_run_as(self.user),
        )
        out.close()
        self._wait(lambda: port_open(self.port) and self._accepts(), "accept connections")

    def _accepts(self) -> bool:
        done = subprocess.run(
            [str(PG_BIN / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(self.port)],
            check=False,
        )
        return done.returncode == 0

    def _wait(self, ready: Any, what: str) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        while not ready():
            if self.process is not None and self.process.poll() is not None:
                pytest.fail(f"private PostgreSQL exited:\n{self.log_tail()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"private PostgreSQL did not {what}:\n{self.log_tail()}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Fast shutdown (SIGINT): sessions are cut, the cluster stays consistent."""
        self.resume()
        self._signal(signal.SIGINT)
        if self.process is not None:
            self.process.wait(60)

    def restart(self) -> None:
        self.stop()
        self.start()

    def database_url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def log_tail(self, lines: int = 30) -> str:
        text = self._log.read_text(errors="replace") if self._log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class PrivateRabbitMQ(_Instance):
    """A RabbitMQ node of its own (``croupier-test-<hex>@localhost``) on free ports.

    Quorum queues, the only kind the service declares, need no plugin; none is enabled.
    ``url`` is its default vhost, guest/guest (allowed from loopback only, as by default).
    """

    def __init__(self, directory: Path, config: str = "") -> None:
        """``config``: more ``rabbitmq.conf`` lines (``key = value``)."""
        self.user = "rabbitmq"
        self.directory = directory
        self.node = f"croupier-test-{secrets.token_hex(4)}@localhost"
        self.port = free_port()
        self.dist_port = free_port()
        self.url = f"amqp://guest:guest@127.0.0.1:{self.port}/"
        self._server = _binary(RABBITMQ_BIN, "rabbitmq-server", "rabbitmq-server")
        self._ctl = _binary(RABBITMQ_BIN, "rabbitmqctl", "rabbitmq-server")
        (directory / "rabbitmq.conf").write_text(
            f"listeners.tcp.local = 127.0.0.1:{self.port}\n{config}"
        )
        (directory / "enabled_plugins").write_text("[].\n")
        (directory / "rabbitmq-env.conf").write_text("")
        cookie = directory / ".erlang.cookie"
        cookie.write_text(secrets.token_hex(16).upper())
        cookie.chmod(0o400)
        for path in (directory, cookie):
            _own(path, self.user)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": str(directory),  # where Erlang finds the node's own cookie
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONF_ENV_FILE": str(directory / "rabbitmq-env.conf"),
            "RABBITMQ_CONFIG_FILE": str(directory / "rabbitmq.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(directory / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(directory / "mnesia"),
            "RABBITMQ_LOG_BASE": str(directory / "log"),
            "RABBITMQ_PID_FILE": str(directory / "rabbitmq.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }
        self._log = directory / "server.out"

    def start(self) -> None:
        """Start the node (its queues and messages survive a stop or a kill) and wait."""
        assert not self.running, "the private RabbitMQ is already running"
        out = self._log.open("ab")
        self.process = subprocess.Popen(
            [self._server],
            env=self.env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.directory,
            process_group=0,
            **_run_as(self.user),
        )
        out.close()
        deadline = time.monotonic() + _START_TIMEOUT
        while not port_open(self.port):
            if self.process.poll() is not None:
                pytest.fail(f"private RabbitMQ exited:\n{self.log_tail()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"private RabbitMQ did not start:\n{self.log_tail()}", pytrace=False)
            time.sleep(0.2)
        self.ctl("await_startup")

    def ctl(self, *args: str, timeout: float = 120) -> str:
        """``rabbitmqctl -n <node> args``; fails the test with its output on error."""
        done = subprocess.run(
            [self._ctl, "-n", self.node, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.directory,
            check=False,
            **_run_as(self.user),
        )
        if done.returncode != 0:
            pytest.fail(
                f"rabbitmqctl {' '.join(args)} on {self.node} failed ({done.returncode}): "
                f"{done.stderr.strip() or done.stdout.strip()}",
                pytrace=False,
            )
        return done.stdout

    def stop(self) -> None:
        """A clean node shutdown (``rabbitmqctl stop``)."""
        self.resume()
        if self.running:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.ctl("stop", timeout=60)
        if self.process is not None:
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self) -> None:
        self.stop()
        self.start()

    def _after_kill(self) -> None:
        # A killed node leaves its name registered with epmd until the socket closes.
        deadline = time.monotonic() + 10
        while port_open(self.port) and time.monotonic() < deadline:
            time.sleep(0.1)

    def log_tail(self, lines: int = 30) -> str:
        text = self._log.read_text(errors="replace") if self._log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def _scratch(prefix: str) -> Path:
    directory = Path(tempfile.mkdtemp(prefix=prefix))
    directory.chmod(0o755)
    return directory


@contextlib.contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A started private cluster; killed and deleted on the way out."""
    directory = _scratch("croupier-pg-")
    instance = PrivatePostgres(directory)
    try:
        instance.start()
        yield instance
    finally:
        instance.kill()
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def private_rabbitmq(config: str = "") -> Iterator[PrivateRabbitMQ]:
    """A started private node (``config``: more ``rabbitmq.conf`` lines); killed and deleted
    on the way out."""
    directory = _scratch("croupier-rabbitmq-")
    instance = PrivateRabbitMQ(directory, config)
    try:
        instance.start()
        yield instance
    finally:
        instance.kill()
        shutil.rmtree(directory, ignore_errors=True)
