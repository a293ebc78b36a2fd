"""`python -m tallyboard` is the `tallyboard` command."""

import sys

from tallyboard.cli import main

sys.exit(main())
