"""``python -m agentkit``: the ``agentkit`` command (:mod:`agentkit.cli`), for when the
console script is not on ``PATH`` (a virtualenv not activated, ``pip install --user``)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
