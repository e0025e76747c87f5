"""Sub-commands of the ``croupier`` command line, one module each."""
