"""`python -m tuner`: see tuner/cli.py."""

import sys

from .cli import main

sys.exit(main())
