"""Runs the scheduler service: ``python -m forethought.services.scheduler --help``."""

import sys

from forethought.rpc.server import main
from forethought.services.scheduler.shell import SERVICE

if __name__ == "__main__":
    sys.exit(main(SERVICE))
