import sys

from dashboard.devstack.commands import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
