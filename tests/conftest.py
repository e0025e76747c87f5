"""Shared test configuration.

This file's directory is put on ``sys.path`` by pytest (rootdir-relative conftest, no
``__init__.py``), which lets test modules import shared suites such as ``ledger_suite``.
"""
