"""croupier."""

from importlib.metadata import PackageNotFoundError, version


def croupier_version() -> str:
    """The installed version of Croupier."""
    try:
        return version("croupier")
    except PackageNotFoundError:
        return "unknown"
