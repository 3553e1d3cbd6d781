"""``rules show`` prints real TOML that reads back into the same rules (issue 26)."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit._rulebook import build_ruleset, default_rules_dir
from cudasplit.cli import main
from cudasplit.rules import RuleSet, load_ruleset, ruleset_toml

PACKAGES = sorted(p.stem for p in (default_rules_dir() / "packages").glob("*.toml"))


def _rules(ruleset: RuleSet) -> list[tuple[object, ...]]:
    """Every rule's fields but the file it came from."""
    return [(r.ref.name.split(":")[-1], *(getattr(r, f.name) for f in dataclasses.fields(r)
                                          if f.name != "ref")) for r in ruleset.rules]


def _same(ruleset: RuleSet, text: str) -> None:
    again = build_ruleset([("shown.toml", tomllib.loads(text))])
    assert again.package == ruleset.package
    assert [(r.source, r.target, r.link_back) for r in again.renames] == \
        [(r.source, r.target, r.link_back) for r in ruleset.renames]
    assert _rules(again) == _rules(ruleset)


@pytest.mark.parametrize("package", [None, *PACKAGES])
def test_every_package_round_trips(package: str | None) -> None:
    ruleset = load_ruleset(package)
    _same(ruleset, ruleset_toml(ruleset))


def test_cli_output_round_trips_with_extra_files_and_odd_strings(tmp_path: Path) -> None:
    extra = tmp_path / "mine.toml"
    extra.write_text('schema = 1\n[package]\noutputs = ["out", "lib"]\ncuda_compat = true\n'
                     '[[rule]]\nname = "samples"\ndescription = "quote \\" backslash \\\\ tab \\t"'
                     '\nmatch = ["we ird/**"]\noutput = "lib"\n')
    result = CliRunner().invoke(main, ["rules", "show", str(extra), "--package", "cuda_cupti"])
    assert result.exit_code == 0, result.output
    ruleset = load_ruleset("cuda_cupti", [extra])
    _same(ruleset, result.stdout)
    # "samples" is in both files: qualified by file so the document stays valid.
    assert 'name = "mine.toml:samples"' in result.stdout
    assert 'name = "default.toml:samples"' in result.stdout
