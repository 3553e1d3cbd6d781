"""``python -m cudasplit``."""

from .cli import run

run()
