"""Runs the predictor service: ``python -m forethought.services.predictor --help``."""

import sys

from forethought.rpc.server import main
from forethought.services.predictor.shell import SERVICE

if __name__ == "__main__":
    sys.exit(main(SERVICE))
