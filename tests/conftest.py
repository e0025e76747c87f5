"""Shared test configuration.

This file's directory is put on ``sys.path`` by pytest (rootdir-relative conftest, no
``__init__.py``), which lets test modules import shared suites such as ``ledger_suite``.
"""

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``long`` run first: on ``make test``'s workers each starts at once, beside
    the short ones, instead of being dealt last and ending the run alone."""
    items.sort(key=lambda item: item.get_closest_marker("long") is None)
