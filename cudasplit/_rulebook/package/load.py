"""The ``[package]`` tables of the rule files merged into one :class:`PackageSettings`.

The first file (in precedence order, see :mod:`cudasplit._rulebook`) that sets a key wins; each
key's value is checked by the parsers in :mod:`cudasplit._rulebook.package.parse`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cudasplit._globs import Glob
from cudasplit._model import OUTPUT_NAMES
from cudasplit._rulebook.package.parse import (
    check_keys,
    glob_list,
    parse_add_needed,
    parse_dlopen_key,
    parse_drops,
    parse_link_edges,
    parse_link_into,
    parse_output_when,
    parse_package_links,
    parse_package_refs,
    parse_pc_edits,
    parse_text_edits,
    parse_text_edits_from,
    string_list,
    table_of,
)
from cudasplit._rulebook.package.settings import PackageSettings
from cudasplit.errors import RulesError

__all__ = ["PACKAGE_KEYS", "load_package"]

PACKAGE_KEYS = frozenset(
    {"outputs", "cuda_compat", "runpath_append", "lift", "description", "stub_links",
     "pkgconfig_driver_rpath", "pkgconfig_stubs_libdir", "optional_outputs",
     "replace_needed", "dlopen", "propagated_outputs", "pkgconfig_edits",
     "allow_fhs_references", "output_when", "drop", "compiler", "redist",
     "nvcc_includes", "nvcc_libraries", "copy_packages", "add_needed",
     "link_into", "text_edits", "text_edits_from", "link_edges", "links"}
)


def load_package(tables: Sequence[tuple[str, Mapping[str, Any]]],
                 known: Sequence[str] = OUTPUT_NAMES) -> PackageSettings:
    """The settings of ``tables`` (highest precedence first): the first that sets a key wins.
    ``known``: the outputs the profile allows (a profile with per-package outputs adds the
    package's own)."""
    merged = _merge(tables)
    # Checked in this order, so a file with several mistakes always reports the same one first.
    outputs, lift = _outputs(merged, known), _lift(merged)
    stubs_libdir = _stubs_libdir(merged)
    replace_needed, stub_links = _replace_needed(merged), _stub_links(merged)
    return PackageSettings(
        outputs=outputs,
        cuda_compat=bool(merged.get("cuda_compat", (None, False))[1]),
        runpath_append=string_list(merged.get("runpath_append", (None, []))[1], "[package]",
                                 "runpath_append"),
        lift=lift,
        stub_links=stub_links,
        pkgconfig_driver_rpath=bool(merged.get("pkgconfig_driver_rpath", (None, False))[1]),
        pkgconfig_stubs_libdir=stubs_libdir,
        optional_outputs=string_list(merged.get("optional_outputs", (None, []))[1], "[package]",
                                   "optional_outputs"),
        replace_needed=replace_needed,
        dlopen=parse_dlopen_key(merged.get("dlopen", (None, []))[1], "[package] dlopen"),
        **_load_table_entries(merged, known),
        **_link_keys(merged, known),
    )


def _merge(tables: Sequence[tuple[str, Mapping[str, Any]]]) -> dict[str, tuple[str, Any]]:
    """key -> (the file that set it first, its value)."""
    merged: dict[str, tuple[str, Any]] = {}
    for filename, table in tables:
        check_keys(table, PACKAGE_KEYS, filename, "[package]")
        for key, value in table.items():
            merged.setdefault(key, (filename, value))
    return merged


def _outputs(merged: Mapping[str, tuple[str, Any]],
             known: Sequence[str]) -> tuple[str, ...] | None:
    if "outputs" not in merged:
        return None
    filename, value = merged["outputs"]
    outputs = string_list(value, f"{filename}:[package]", "outputs")
    bad = sorted(set(outputs) - set(known))
    if bad:
        raise RulesError(f"{filename}:[package]: unknown output(s) {', '.join(bad)}")
    return outputs


def _lift(merged: Mapping[str, tuple[str, Any]]) -> tuple[Glob, ...]:
    if "lift" not in merged:
        return ()
    filename, value = merged["lift"]
    # A lift names directories: "nsight-systems/*/" and "nsight-systems/*" mean the same.
    patterns = [p.rstrip("/") for p in string_list(value, f"{filename}:[package]", "lift")]
    return glob_list(patterns, f"{filename}:[package].lift", "match")


def _stubs_libdir(merged: Mapping[str, tuple[str, Any]]) -> tuple[Glob, ...]:
    if "pkgconfig_stubs_libdir" not in merged:
        return ()
    filename, value = merged["pkgconfig_stubs_libdir"]
    return glob_list(value, f"{filename}:[package].pkgconfig_stubs_libdir", "match")


def _replace_needed(merged: Mapping[str, tuple[str, Any]]) -> dict[str, str]:
    if "replace_needed" not in merged:
        return {}
    filename, value = merged["replace_needed"]
    table = table_of(value, filename, "replace_needed")
    if not all(isinstance(v, str) and v and "/" not in v and k and "\0" not in k + v
               for k, v in table.items()):
        raise RulesError(f"{filename}:[package].replace_needed: values must be library names")
    return {str(k): str(v) for k, v in table.items()}


def _stub_links(merged: Mapping[str, tuple[str, Any]]) -> dict[str, str]:
    if "stub_links" not in merged:
        return {}
    filename, value = merged["stub_links"]
    return {str(k): str(v) for k, v in table_of(value, filename, "stub_links").items()}


def _load_table_entries(merged: Mapping[str, tuple[str, Any]],
                        known: Sequence[str]) -> dict[str, Any]:
    """The structured package-table keys (see table.py)."""
    def get(key: str) -> tuple[str, Any]:
        return merged.get(key, ("[package]", None))

    values: dict[str, Any] = {}
    filename, value = get("propagated_outputs")
    outputs = string_list(value, f"{filename}:[package]", "propagated_outputs")
    if set(outputs) - set(known):
        raise RulesError(f"{filename}:[package]: unknown propagated output(s)")
    values["propagated_outputs"] = outputs
    parsers = {"copy_packages": parse_package_refs,
               "pkgconfig_edits": parse_pc_edits,
               "output_when": lambda value, name: parse_output_when(value, name, known),
               "drop": parse_drops, "add_needed": parse_add_needed,
               "link_into": parse_link_into, "text_edits": parse_text_edits,
               "text_edits_from": parse_text_edits_from}
    for key, parse in parsers.items():
        filename, value = get(key)
        if value is not None:
            values["drops" if key == "drop" else key] = parse(value, filename)
    for key in ("nvcc_includes", "nvcc_libraries"):
        filename, value = get(key)
        values[key] = string_list(value, f"{filename}:[package]", key)
    for key in ("allow_fhs_references",):
        filename, value = get(key)
        if value is not None and not isinstance(value, bool):
            raise RulesError(f"{filename}:[package].{key}: must be true or false")
        values[key] = bool(value)
    for key in ("compiler", "redist"):
        filename, value = get(key)
        if value is not None:
            if not isinstance(value, str):
                raise RulesError(f"{filename}:[package].{key}: must be a string")
            values[key] = value
    return values


def _link_keys(merged: Mapping[str, tuple[str, Any]], known: Sequence[str]) -> dict[str, Any]:
    """``link_edges`` and ``links`` (profiles whose outputs share one prefix)."""
    values: dict[str, Any] = {}
    if "link_edges" in merged:
        values["link_edges"] = parse_link_edges(*merged["link_edges"][::-1], known)
    if "links" in merged:
        values["links"] = parse_package_links(*merged["links"][::-1], known)
    return values
