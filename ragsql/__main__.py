"""`python -m ragsql` runs the command line."""

import sys

from ragsql.cli import main

sys.exit(main())
