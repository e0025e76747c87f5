"""Reports read from the ledger: the books re-checked (audit), the hold, integrity terms."""
