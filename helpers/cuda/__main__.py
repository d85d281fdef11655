"""``python -m helpers.cuda``: see :mod:`helpers.cuda.cli`."""

import sys

from helpers.cuda.cli import main

sys.exit(main())
