"""Load never fails the suite: no property test has a wall-clock deadline.

``tests/conftest.py`` loads a Hypothesis profile without one before any test module is
imported; every ``settings(...)`` a test builds inherits it. A test that set ``deadline=`` to
anything but ``None`` would bring back the failure a loaded machine gave
(``test_property_shape``: 364 ms against the default 200 ms).
"""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import settings

TESTS = Path(__file__).resolve().parent


def test_the_loaded_profile_has_no_deadline() -> None:
    assert settings.default.deadline is None
    assert settings().deadline is None   # what a test's own settings(...) inherits


def test_no_test_sets_a_deadline() -> None:
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "deadline" and not (
                    isinstance(node.value, ast.Constant) and node.value.value is None):
                found.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert found == []


def test_settings_made_by_a_test_module_inherit_it() -> None:
    from tests.unit.elf import test_runpath

    # Where Hypothesis keeps a test's own settings (the test's @settings(max_examples=400)).
    own = test_runpath.test_property_shape._hypothesis_internal_use_settings  # type: ignore[attr-defined]
    assert own.max_examples == 400 and own.deadline is None
