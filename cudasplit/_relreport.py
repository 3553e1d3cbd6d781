"""The report without absolute store paths (``--report-relative``).

A report saved inside ``$out`` that names the source tarball's store path makes that tarball a
runtime reference of the package (Nix scans outputs for store paths). This form names each
output root as ``$<output>``, the source and the rule files by their base names, and masks
every other store path's hash the way Nixpkgs' ``remove-references-to`` does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ._report import Report

_MASK = "e" * 32


def relative_report(report: Report, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``report`` as JSON data safe to keep in ``$out``: output roots as ``$<output>``,
    source and rule files by name, other store paths' hashes masked.

    Args:
        report: a split's :class:`Report`.
        env: where ``NIX_STORE`` is read (default: ``os.environ``; else ``/nix/store``).

    Returns:
        The report's JSON data without absolute store paths.

    Raises:
        Nothing.
    """
    env = os.environ if env is None else env
    data = report.as_dict()
    roots = sorted(((rec["directory"], name) for name, rec in data["outputs"].items()),
                   key=lambda item: -len(item[0]))
    # The base name of a store path still holds its hash (what Nix scans for): drop it.
    data["source"] = re.sub(r"^[0-9a-z]{32}-", "", os.path.basename(report.source))
    data["rules_files"] = [_rules_name(f) for f in report.rules_files]
    store = re.escape(env.get("NIX_STORE", "/nix/store").rstrip("/"))
    pattern = re.compile(store + r"/[0-9a-z]{32}-")
    result: dict[str, Any] = _walk(data, roots, pattern)
    return result


def _rules_name(path: str) -> str:
    parts = path.replace("\\", "/").split("/")
    return "/".join(parts[-2:]) if len(parts) > 1 and parts[-2] == "packages" else parts[-1]


def _walk(value: Any, roots: list[tuple[str, str]], pattern: re.Pattern[str]) -> Any:
    if isinstance(value, dict):
        return {k: _walk(v, roots, pattern) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, roots, pattern) for v in value]
    if isinstance(value, str):
        for root, name in roots:
            value = value.replace(root, "$" + name)
        return pattern.sub(lambda m: m[0][: -33] + _MASK + "-", value)
    return value
