"""``python -m helpers.doctor``: see :mod:`helpers.doctor.cli`."""

import sys

from helpers.doctor.cli import main

sys.exit(main())
