"""`python -m ane_kdma.cli`: the same entry point as the `ane-kdma` script."""

import sys

from ane_kdma.cli import main

sys.exit(main())
