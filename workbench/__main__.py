"""`python -m workbench` runs the command line."""

import sys

from workbench.cli.main import main

sys.exit(main())
