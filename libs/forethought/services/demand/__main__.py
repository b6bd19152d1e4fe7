"""Runs the demand service: ``python -m forethought.services.demand --help``."""

import sys

from forethought.rpc.server import main
from forethought.services.demand.shell import SERVICE

if __name__ == "__main__":
    sys.exit(main(SERVICE))
