"""Runs the worker service: ``python -m forethought.services.worker --help``."""

import sys

from forethought.rpc.server import main
from forethought.services.worker.shell import SERVICE

if __name__ == "__main__":
    sys.exit(main(SERVICE))
