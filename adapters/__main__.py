"""``python -m adapters``: the same command line as the ``cpsat-scheduler`` script."""

import sys

from .cli import main

sys.exit(main())
