"""The Nix generator's planning stays readable: radon's cyclomatic complexity of every function
in ``cudasplit/_release/nixify/`` is at most C (20); ``_plan_set`` scored 35 before it was
split into choosing artifacts and building packages."""

from __future__ import annotations

from pathlib import Path

import pytest

NIXIFY = Path(__file__).resolve().parent.parent / "cudasplit" / "_release" / "nixify"


def test_no_function_in_nixify_above_c() -> None:
    complexity = pytest.importorskip("radon.complexity")
    over = [f"{path.name}:{block.lineno} {block.fullname} {block.complexity}"
            for path in sorted(NIXIFY.glob("*.py"))
            for block in complexity.cc_visit(path.read_text())
            if complexity.cc_rank(block.complexity) not in "ABC"]
    assert over == []
