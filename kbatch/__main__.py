"""``python -m kbatch``: the command line (kbatch.tools.cli)."""

import sys

from kbatch.tools.cli import main

sys.exit(main())
