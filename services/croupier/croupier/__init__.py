"""croupier."""
