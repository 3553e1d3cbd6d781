"""``package_table``: one package's ``[package]`` table without building its rule set, the way
``nixify`` reads it for every package of several sets."""

from __future__ import annotations

from pathlib import Path

import pytest

from cudasplit._rulebook import default_rules_dir, load_ruleset, package_table
from cudasplit.errors import RulesError

SHIPPED = sorted(p.stem for p in (default_rules_dir() / "packages").glob("*.toml"))


@pytest.mark.parametrize("pname", SHIPPED)
def test_the_table_is_the_rule_sets(pname: str) -> None:
    assert package_table(pname) == load_ruleset(pname).package


def test_no_file_is_none_and_answers_are_cached() -> None:
    assert package_table("no_such_package") is None
    assert package_table("cuda_cudart") is package_table("cuda_cudart")


def test_a_bad_table_is_refused_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "packages").mkdir()
    (tmp_path / "packages" / "broken.toml").write_text('[package]\noutputs = ["out", "nope"]\n')
    with pytest.raises(RulesError, match=r"broken\.toml"):
        package_table("broken", tmp_path)
    (tmp_path / "packages" / "schema.toml").write_text("schema = 2\n[package]\n")
    with pytest.raises(RulesError, match="unsupported schema"):
        package_table("schema", tmp_path)
