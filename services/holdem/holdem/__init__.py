"""holdem."""
