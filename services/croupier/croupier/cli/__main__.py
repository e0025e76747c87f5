"""``python -m croupier.cli``: the ``croupier`` command line."""

import sys

from croupier.cli import main

sys.exit(main())
