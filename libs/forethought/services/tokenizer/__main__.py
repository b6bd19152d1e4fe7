"""Runs the tokenizer service: ``python -m forethought.services.tokenizer --help``."""

import sys

from forethought.rpc.server import main
from forethought.services.tokenizer.shell import SERVICE

if __name__ == "__main__":
    sys.exit(main(SERVICE))
