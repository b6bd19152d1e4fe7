import sys

from forethought.rpc.server import main

if __name__ == "__main__":
    sys.exit(main("worker"))
