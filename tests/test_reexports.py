"""The modules split by job keep their old import paths: every name they list is still there,
and it is the very object its new home module defines (no copies that could drift)."""

from __future__ import annotations

import importlib

import pytest

# old module -> the modules its names moved to
SPLITS = {
    "_rules": ("_pkgload", "_pkgsettings", "_rulematch", "_ruleset", "_ruleshow"),
    "_pkgtable": ("_gates",),
    "_manifest": ("_manifestparse", "_manifestselect", "_manifestverify"),
    "_diff": ("_snapshot",),
    "_features": ("_featurescan",),
    "_closure": ("_closurescan",),
    "_nixify": ("_nixplan", "_nixrender"),
}


@pytest.mark.parametrize("old", sorted(SPLITS))
def test_old_module_still_exports_every_name(old: str) -> None:
    module = importlib.import_module(f"cudasplit.{old}")
    homes = [importlib.import_module(f"cudasplit.{new}") for new in SPLITS[old]]
    for name in module.__all__:
        value = getattr(module, name)
        for home in homes:
            if name in getattr(home, "__all__", ()):
                assert getattr(home, name) is value, (old, name, home.__name__)


@pytest.mark.parametrize("name", ["RuleSet", "PackageSettings", "Rule", "Rename", "Decision",
                                  "load_ruleset", "build_ruleset", "read_rule_file",
                                  "describe_package", "default_rules_dir"])
def test_rules_names_the_package_imports(name: str) -> None:
    import cudasplit._rulebook as _rules
    assert name in _rules.__all__ and getattr(_rules, name) is not None


def test_every_gated_entry_defaults_to_no_gate() -> None:
    from cudasplit._rulebook.gates import UNGATED, Where
    from cudasplit._rulebook.pkgtable import DropEdit, LinkInto, PcEdit, RunpathPackage, TextEdit

    assert RunpathPackage("libnvvm").gate is UNGATED
    assert all(entry.gate is UNGATED for entry in (
        PcEdit(()), DropEdit(()), LinkInto((), "include"), TextEdit(())))
    assert UNGATED.applies(Where()) and UNGATED.applies(Where("1.0", "12.0", "linux-sbsa"))
    assert UNGATED.describe() == ""
