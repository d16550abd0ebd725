"""`python -m digest` runs the command line."""

import sys

from digest.cli import main

sys.exit(main())
