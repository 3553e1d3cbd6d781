"""``python -m cudasplit``."""

from .cli import main

main()
