"""``python -m llm_anchors.cli``: the command line."""

import sys

from . import main

sys.exit(main())
