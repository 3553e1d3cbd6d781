"""Nix: the builder's environment (outputs, loader, library dirs) and the ``nix-support/``
files a split writes for stdenv."""
