"""``python -m cudasplit``."""

from cudasplit.cli import run

run()
