"""Runs the HTTP front door: ``python -m forethought.services.http --help``."""

import sys

from forethought.rpc.server import main
from forethought.services.http.shell import SERVICE

if __name__ == "__main__":
    sys.exit(main(SERVICE))
