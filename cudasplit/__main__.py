"""``python -m cudasplit``."""

from cudasplit._launch import run

run()
