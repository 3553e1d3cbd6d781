"""The public entry points behind :mod:`cudasplit`: one source (``entry``), many (``batch``),
command-line words to option values (``options``), rules, checks and release tools."""
