import sys

from fincrowd_ltr.cli import main

sys.exit(main())
