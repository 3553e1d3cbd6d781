"""Shared test support: fixture builders, archive writers, real-wheel downloads, paths."""
