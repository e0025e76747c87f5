"""Stored PAR data: one JSON document per pay table version (see holdem.odds.par)."""
