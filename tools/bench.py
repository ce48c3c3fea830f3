#!/usr/bin/env python3
"""Speed and memory figures: a thin wrapper over `ane-kdma bench` (what `make bench` runs)."""

from __future__ import annotations

import sys

from ane_kdma.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", *sys.argv[1:]]))
