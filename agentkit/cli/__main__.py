"""``python -m agentkit.cli``: the ``agentkit`` command."""

from __future__ import annotations

import sys

from . import main

sys.exit(main())
