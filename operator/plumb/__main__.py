"""``python -m plumb`` is the ``plumb`` command."""

import sys

from plumb import cli

sys.exit(cli.main())
