"""``python -m plumb`` is the ``plumb`` command."""

import sys

from plumb import entry

sys.exit(entry.main())
