"""``python -m plumb_dev cluster|demo|bench ...`` is ``plumb cluster|demo|bench ...``."""

import sys

from plumb_dev import commands

sys.exit(commands.main())
