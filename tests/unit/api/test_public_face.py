"""The public face: :mod:`cudasplit` and its documented modules. Each module's ``__all__`` is
honest and agrees with where its names load from and what type checkers read; a name that moved
one level down still loads from the top, with a warning naming its module; nothing prints;
errors stay inside the tree."""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

import cudasplit
from tests.support import public
from tests.support.tarutil import write_archive


@pytest.mark.parametrize("name", public.MODULES)
def test_all_names_exist_once(name: str) -> None:
    module = public.module(name)
    for attr in module.__all__:
        assert hasattr(module, attr), attr
    assert len(set(module.__all__)) == len(module.__all__)
    assert dir(module) == sorted(module.__all__) or name == "cudasplit.errors"


def _type_checking_imports(path: Path) -> dict[str, str]:
    """name -> module of the imports under ``if TYPE_CHECKING:`` of a face."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                found.update({alias.name: stmt.module for alias in stmt.names})
    return found


@pytest.mark.parametrize("name", [m for m in public.MODULES if m != "cudasplit.errors"])
def test_every_public_name_has_one_home_and_the_three_lists_agree(name: str) -> None:
    """To add a public name: its module in the face's _HOMES, an import under TYPE_CHECKING
    (what type checkers and editors read), and its place in __all__."""
    module = public.module(name)
    homes = {attr: home for home, attrs in module._HOMES.items() for attr in attrs}
    exported = set(module.__all__) - {"__version__"}
    assert sorted(exported - homes.keys()) == [], "in __all__ but in no module of _HOMES"
    assert sorted(homes.keys() - exported) == [], "in _HOMES but not in __all__"
    assert _type_checking_imports(Path(module.__file__ or "")) == homes


def test_a_name_lives_in_one_documented_module_or_in_the_top_and_its_own() -> None:
    """Only the errors and the sinks are in two places: the top, which a split needs, and their
    own module."""
    seen: dict[str, str] = {}
    for name in public.MODULES[1:]:
        for attr in public.names_of(name):
            assert attr not in seen, f"{attr} in {seen[attr]} and {name}"
            seen[attr] = name
    both = {seen[a] for a in cudasplit.__all__ if a in seen}
    assert both == {"cudasplit.errors", "cudasplit.sinks"}


def test_a_moved_name_still_loads_from_the_top_with_a_warning() -> None:
    for attr, (where, now) in sorted(cudasplit._MOVED.items()):
        assert attr in public.names_of(now), (attr, now)
        if attr in cudasplit._SUBMODULES:
            continue  # cudasplit.sbom is the module now (next test)
        with pytest.warns(DeprecationWarning, match=f"import it from {now}"):
            old = getattr(cudasplit, attr)
        assert old is getattr(importlib.import_module(where), attr)
        assert old is getattr(public.module(now), attr)
    assert not set(cudasplit._MOVED) & set(dir(cudasplit))


def test_the_sbom_module_is_still_the_function_it_replaced(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "lib/libx.so.1", b"x")])
    with pytest.warns(DeprecationWarning, match=r"cudasplit\.sbom\.sbom"):
        old = cudasplit.sbom([archive])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert old == cudasplit.sbom.sbom([archive])


def test_the_documented_modules_are_attributes_of_the_top() -> None:
    for name in cudasplit._SUBMODULES:
        assert getattr(cudasplit, name) is public.module(f"cudasplit.{name}")


def test_public_errors_share_one_root() -> None:
    errors = [obj for attr, obj in public.public().items() if attr.endswith(("Error", "Found"))]
    assert errors and all(issubclass(e, cudasplit.CudasplitError) for e in errors)


def test_api_never_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "lib/libx.so.1", b"x"),
                                                     ("symlink", "dangling", "nowhere")])
    cudasplit.inspect(archive)
    cudasplit.split_to_dir(archive, tmp_path / "o", cudasplit.SplitOptions())
    with pytest.raises(cudasplit.CudasplitError):
        cudasplit.split_to_dir(tmp_path / "missing.tar.xz", tmp_path / "o2")
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_every_entry_point_applies_the_bomb_limits(tmp_path: Path) -> None:
    archive = write_archive(tmp_path / "a.tar.xz", [("file", "lib/big.bin", b"\0" * 4096)])
    tight = cudasplit.SplitOptions(max_total_bytes=1024)
    calls = [
        lambda: cudasplit.split_to_dir(archive, tmp_path / "o", tight),
        lambda: cudasplit.inspect(archive, tight),
        lambda: cudasplit.explain(archive, "lib/big.bin", tight),
        lambda: cudasplit.repack_to_dir(archive, tmp_path / "r", tight),
    ]
    for call in calls:
        with pytest.raises(cudasplit.LimitExceededError):
            call()
    assert not (tmp_path / "o").exists()
