"""`python -m attentionspan_datasets COMMAND`: the data commands alone (see cli.py)."""

import sys

from attentionspan_datasets.cli import main

sys.exit(main())
