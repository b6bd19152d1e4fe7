"""Runs the planner service: ``python -m forethought.services.planner --help``."""

import sys

from forethought.rpc.server import main
from forethought.services.planner.shell import SERVICE

if __name__ == "__main__":
    sys.exit(main(SERVICE))
