"""Where the integration tests find PostgreSQL and RabbitMQ.

In order: ``CROUPIER_TEST_DATABASE_URL`` / ``CROUPIER_TEST_AMQP_URL`` when set; the local
services on 127.0.0.1:5432 and :5672 when they answer; otherwise, where Docker runs and the
``containers`` extra is installed (``pip install -e '.[containers]'``), throwaway
containers started with testcontainers for this test session and removed after it.
Nothing here starts, stops or reconfigures a service the developer runs.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import subprocess
import time
from typing import Any

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"
POSTGRES_IMAGE = "postgres:16-alpine"
RABBITMQ_IMAGE = "rabbitmq:3.13-management-alpine"

_started: list[Any] = []


def answers(host: str, port: int) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    try:
        with socket.create_connection((host, port), 1):
            return True
    except OSError:
        return False


def docker_runs() -> bool:
    """Whether a Docker daemon answers and testcontainers is installed."""
    if shutil.which("docker") is None:
        return False
    try:
        import testcontainers  # noqa: F401
    except ImportError:
        return False
    try:
        done = subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def postgres_url() -> str:
    """The test server's URL: configured, local, or a container started now."""
    configured = os.environ.get("CROUPIER_TEST_DATABASE_URL")
    if configured or answers("127.0.0.1", 5432) or not docker_runs():
        return configured or DEFAULT_POSTGRES
    return _postgres_container()


def rabbitmq_url() -> str:
    """The test broker's URL: configured, local, or a container started now."""
    configured = os.environ.get("CROUPIER_TEST_AMQP_URL")
    if configured or answers("127.0.0.1", 5672) or not docker_runs():
        return configured or DEFAULT_RABBITMQ
    return _rabbitmq_container()


def management_url(amqp_url: str) -> str | None:
    """The HTTP management API next to a broker started here (None for other brokers)."""
    return os.environ.get("CROUPIER_TEST_RABBITMQ_API") or _management.get(amqp_url)


_management: dict[str, str] = {}


def _postgres_container() -> str:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    container = (
        DockerContainer(POSTGRES_IMAGE)
        .with_env("POSTGRES_HOST_AUTH_METHOD", "trust")
        .with_env("POSTGRES_DB", "test")
        .with_exposed_ports(5432)
    )
    _start(container)
    # The image's first start runs a temporary server, then the real one: wait for both.
    wait_for_logs(container, lambda logs: logs.count("ready to accept connections") >= 2, 120)
    host, port = container.get_container_host_ip(), container.get_exposed_port(5432)
    _wait_for_port(host, int(port))
    return f"postgresql://postgres@{host}:{port}/test"


def _rabbitmq_container() -> str:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.waiting_utils import wait_for_logs

    container = DockerContainer(RABBITMQ_IMAGE).with_exposed_ports(5672, 15672)
    _start(container)
    wait_for_logs(container, "Server startup complete", 180)
    host = container.get_container_host_ip()
    port, api = container.get_exposed_port(5672), container.get_exposed_port(15672)
    _wait_for_port(host, int(port))
    url = f"amqp://guest:guest@{host}:{port}/"
    _management[url] = f"http://guest:guest@{host}:{api}/api"
    return url


def _start(container: Any) -> None:
    container.start()
    _started.append(container)
    atexit.register(container.stop)


def _wait_for_port(host: str, port: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not answers(host, port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"container port {host}:{port} did not open in {seconds}s")
        time.sleep(0.5)
