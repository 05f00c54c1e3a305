"""Evaluate base rankers (and, later, the correction) on candidate banks: ``fincrowd evaluate``."""

import sys

from fincrowd_ltr.cli import main

if __name__ == "__main__":
    sys.exit(main(["evaluate", *sys.argv[1:]]))
