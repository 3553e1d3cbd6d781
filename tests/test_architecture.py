"""The house, checked on the code itself (read with ``ast``; nothing is imported or executed).

The package is folders by part of the job, and imports run one way, top to bottom::

    cli/  ->  cudasplit, cudasplit.sinks, ... (the public API)  ->  _api/  ->  _release/
          ->  _split/  ->  _nix/  ->  _sinks/  ->  _source/ | _rulebook/
          ->  _elf/ (patch -> plan -> read)  ->  _run/  ->  core

``_run/`` is the run's own small core (jobs and cores, progress, the overlap of outputs and
inputs, the defaults the help shows), below every part that runs. The core is a few root modules every part may use
(``errors``, ``_model``, ``_report``, ``_layout``, ``_globs``, ``_argcheck``, ``_words``,
``_searchpath``, ``_lazy``). Every import counts: module level, inside functions (lazy), and
under ``if TYPE_CHECKING:`` (a typing-only import still ties the two modules together).

The house is drawn room by room (a room: a top folder, each of ``_elf``'s three folders, each
public module, each core module), imports as arrows; a room's floor is 0 when it imports no
other room, else one above the highest room it imports. The house may be at most
:data:`MAX_FLOORS` floors high: each floor is one more layer a reader has to hold in mind.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "cudasplit"

# Layers, top first. A module may import its own folder and any layer below its own; two
# folders on one layer (``_source`` and ``_rulebook``) may not import each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__main__",),
    ("_launch",),
    ("cli",),
    # The public face: the top and the documented modules one level down (cudasplit.rules ...),
    # each a face of its own over the layers below (never over each other).
    ("__init__", "sinks", "rules", "releases", "nixify", "outputs", "guards", "elf", "sbom"),
    ("_api",),
    ("_release",),
    ("_split",),
    ("_nix",),
    ("_sinks",),
    ("_source", "_rulebook"),
    ("_elf.patch",),
    ("_elf.plan",),
    ("_elf.read", "_elf"),
    ("_run",),
    ("errors", "_model", "_report", "_layout", "_globs", "_argcheck", "_words", "_searchpath",
     "_lazy"),
)
# The only names allowed at the top of the package: the public face, the folders, the core.
TOP = {"__init__", "__main__", "_launch", "errors", "cli", "sinks", "rules", "releases", "nixify",
       "outputs", "guards", "elf", "sbom", "_api", "_release", "_split", "_nix", "_sinks",
       "_source", "_rulebook", "_elf", "_run", "_model", "_report", "_layout", "_globs",
       "_argcheck", "_words", "_searchpath", "_lazy"}
# The house's height: 10 floors (13 before the RUNPATH predicates, the plural and the
# nix-support writer moved down, and the conda channel up).
MAX_FLOORS = 10


@dataclass(frozen=True)
class Module:
    name: str                      # dotted, without "cudasplit."; a package is its folder's name
    path: Path
    is_package: bool


def modules() -> list[Module]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found.append(Module(".".join(parts) or "__init__", path, is_package))
    return found


def imports(module: Module, known: set[str]) -> Iterator[tuple[str, int]]:
    """Every package module ``module`` imports (with the line), wherever the import stands."""
    tree = ast.parse(module.path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("cudasplit."):
                    yield _known(alias.name.removeprefix("cudasplit."), known), node.lineno
        elif isinstance(node, ast.ImportFrom):
            for target in _from_targets(module, node, known):
                yield target, node.lineno


def _from_targets(module: Module, node: ast.ImportFrom, known: set[str]) -> list[str]:
    if node.level:
        here = [] if module.name == "__init__" else module.name.split(".")
        base = here if module.is_package else here[:-1]
        base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
        parts = [*base, *(node.module.split(".") if node.module else [])]
    elif node.module == "cudasplit" or (node.module or "").startswith("cudasplit."):
        parts = (node.module or "").split(".")[1:]
    else:
        return []
    where = ".".join(parts) or "__init__"
    # ``from X import Y`` where Y is itself a module names that module.
    subs = [f"{where}.{a.name}" if where != "__init__" else a.name for a in node.names]
    named = [s for s in subs if s in known]
    return named or [_known(where, known)]


def _known(name: str, known: set[str]) -> str:
    return name if name in known else name.rsplit(".", 1)[0]


def layer_of(name: str) -> tuple[int, str]:
    """(rank, folder): rank 0 is the top layer."""
    for rank, folders in enumerate(LAYERS):
        for folder in sorted(folders, key=len, reverse=True):
            if name == folder or name.startswith(folder + "."):
                return rank, folder
    raise AssertionError(f"cudasplit.{name} belongs to no layer")


def graph() -> dict[str, set[tuple[str, int]]]:
    mods = modules()
    known = {m.name for m in mods}
    return {m.name: set(imports(m, known)) for m in mods}


def upward_imports(edges: dict[str, set[tuple[str, int]]]) -> list[str]:
    bad = []
    for name, targets in sorted(edges.items()):
        rank, folder = layer_of(name)
        for target, line in sorted(targets):
            t_rank, t_folder = layer_of(target)
            sideways = t_folder != folder and rank != len(LAYERS) - 1  # the core is one room
            if t_rank < rank or (t_rank == rank and sideways):
                bad.append(f"{name}:{line} imports {target}")
    return bad


def cycles(edges: dict[str, set[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative enough)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target, _ in edges.get(node, ()):
            if target == node:
                continue
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_module_is_in_a_layer_and_the_top_is_tidy() -> None:
    names = [m.name for m in modules()]
    for name in names:
        layer_of(name)
    assert sorted({n.split(".")[0] for n in names} - TOP) == []


def test_imports_run_one_way() -> None:
    assert upward_imports(graph()) == []


def test_no_import_cycles_not_even_typing_only_or_lazy() -> None:
    assert cycles(graph()) == []


def rooms(edges: dict[str, set[tuple[str, int]]]) -> dict[str, set[str]]:
    """The house room by room: each room and the other rooms it imports."""
    drawn: dict[str, set[str]] = {}
    for name, targets in edges.items():
        room = layer_of(name)[1]
        drawn.setdefault(room, set()).update(
            layer_of(t)[1] for t, _ in targets if layer_of(t)[1] != room)
    return drawn


def floors(drawn: dict[str, set[str]]) -> dict[str, int]:
    """Each room's floor: 0 when it imports no other room, else one above the highest room it
    imports (the rooms form no circle: the test above)."""
    floor: dict[str, int] = {}

    def visit(room: str, path: tuple[str, ...]) -> int:
        assert room not in path, f"a circle of rooms: {' -> '.join((*path, room))}"
        if room not in floor:
            floor[room] = max((1 + visit(t, (*path, room)) for t in drawn.get(room, ())),
                              default=0)
        return floor[room]

    for room in sorted(drawn):
        visit(room, ())
    return floor


def test_the_house_is_at_most_ten_floors_high() -> None:
    floor = floors(rooms(graph()))
    tallest = max(floor.values())
    top = sorted(room for room, f in floor.items() if f == tallest)
    assert tallest <= MAX_FLOORS, f"{tallest} floors (top: {', '.join(top)}): {floor}"


def test_the_floor_count_sees_a_tower() -> None:
    drawn = {"cli": {"_api"}, "_api": {"_split", "errors"}, "_split": {"errors"}, "errors": set(),
             "_globs": set()}
    assert floors(drawn) == {"cli": 3, "_api": 2, "_split": 1, "errors": 0, "_globs": 0}
    assert rooms({"_elf.plan.runpath": {("_elf.read.raw", 1), ("_elf.plan.policy", 2)},
                  "_elf.read.raw": {("errors", 3)}}) == {"_elf.plan": {"_elf.read"},
                                                          "_elf.read": {"errors"}}


# Folders that are collections: each module is its own piece (a stage, a tool, a command) and
# is imported by name; their ``__init__`` says what the folder holds and exports nothing.
COLLECTIONS = ("_api", "_release", "_split", "cli")


def folders() -> list[str]:
    """Every folder of the package (its dotted name), the root aside."""
    return [m.name for m in modules() if m.is_package and m.name != "__init__"]


def has_exports(folder: str) -> bool:
    return bool(face_exports(folder))


# Folders whose ``__init__`` is their face: code outside such a folder imports the face, never
# a leaf module (a test may still import a leaf module whole, to replace one of its seams).
# Every folder that exports names is one; a folder that exports none belongs to the room of
# the folder around it (``_rulebook/package``) or only says what it holds (``_elf``).
def faces() -> tuple[str, ...]:
    return tuple(f for f in folders() if f not in COLLECTIONS and has_exports(f))


def test_every_folder_is_a_collection_a_face_or_part_of_one() -> None:
    """A folder's ``__init__`` either exports names (a face: checked below), or is a
    collection's, or holds no code: nothing exported escapes the face checks."""
    quiet = [f for f in folders() if f not in COLLECTIONS and not has_exports(f)]
    for folder in quiet:
        tree = ast.parse((PACKAGE / folder.replace(".", "/") / "__init__.py").read_text())
        code = [n for n in tree.body if not (isinstance(n, ast.Expr)
                                              and isinstance(n.value, ast.Constant))]
        assert code == [], f"{folder}/__init__.py has code but no __all__"
    assert "_sinks" in faces() and "_release.conda" in faces()


def leaf_imports_from_outside(paths: list[tuple[str, Path]]) -> list[str]:
    face_names = faces()
    bad = []
    for name, path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom) or node.level:
                continue
            target = (node.module or "").removeprefix("cudasplit.")
            if target in face_names:
                continue  # a face (a folder's own, or one nested in another) is a way in
            around = [f for f in face_names if target.startswith(f + ".")]
            face = max(around, key=len, default=None)
            inside = face is not None and (name == face or name.startswith(face + "."))
            if face is not None and not inside:
                bad.append(f"{name}:{node.lineno} imports {target}, not {face}")
    return bad


def test_outside_a_folder_code_and_tests_import_its_face() -> None:
    paths = [(m.name, m.path) for m in modules()]
    paths += [("tests", p) for p in sorted(PACKAGE.parent.joinpath("tests").rglob("*.py"))]
    assert leaf_imports_from_outside(paths) == []


def face_exports(face: str) -> list[str]:
    """The names in a face's ``__all__``."""
    tree = ast.parse((PACKAGE / face.replace(".", "/") / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "__all__":
            assert isinstance(node.value, ast.List | ast.Tuple)
            return [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return []


def exports_nobody_outside_uses(exported: list[str], outside: str) -> list[str]:
    """Names a face exports that no file outside its folder so much as mentions (a word
    anywhere: imports, attribute uses, strings such as ``_HOMES`` and patched seams)."""
    words = set(re.findall(r"\w+", outside))
    return [name for name in exported if name not in words]


def test_a_face_exports_what_callers_outside_its_folder_use() -> None:
    """A face is the way in, not a list of everything inside: a name only its own folder uses
    stays in its module."""
    root = PACKAGE.parent
    files = [p for folder in (PACKAGE, root / "tests", root / "benchmarks", root / "scripts")
             for p in sorted(folder.rglob("*.py"))]
    texts = {p: p.read_text() for p in files}
    unused = []
    for face in faces():
        folder = PACKAGE / face.replace(".", "/")
        outside = "\n".join(text for p, text in texts.items() if folder not in p.parents)
        unused += [f"{face}.{n}" for n in exports_nobody_outside_uses(face_exports(face), outside)]
    assert unused == []


def test_the_face_check_sees_an_export_nobody_uses() -> None:
    outside = 'from cudasplit._elf.read import RawElf\nmonkeypatch.setattr(face, "seam", x)\n'
    assert exports_nobody_outside_uses(["RawElf", "seam", "VersionRef"], outside) == ["VersionRef"]


def test_every_module_says_its_job() -> None:
    missing = [m.name for m in modules()
               if not (ast.get_docstring(ast.parse(m.path.read_text())) or "").strip()]
    assert missing == []


def test_the_writer_never_imports_the_backends() -> None:
    """The backends call the byte-level writer; the writer sees only the edit values, so the
    two never import each other (not even lazily)."""
    edges = graph()
    writer = [n for n in edges if n.startswith("_elf.patch.")
              and n != "_elf.patch.backends"]
    assert [n for n in writer if any(t == "_elf.patch.backends" for t, _ in edges[n])] == []


def test_internal_imports_name_a_module_not_a_copy() -> None:
    """No module keeps an old import path alive: nothing in the package is a bare re-export
    module except a folder's face (its ``__init__``)."""
    stubs = []
    for m in modules():
        if m.is_package or m.name in ("__main__",):
            continue
        tree = ast.parse(m.path.read_text())
        body = [n for n in tree.body if not (isinstance(n, ast.Expr)
                                             and isinstance(n.value, ast.Constant))]
        own = [n for n in body if not isinstance(n, ast.ImportFrom | ast.Import)
               and not (isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "__all__")]
        if body and not own:
            stubs.append(m.name)
    assert stubs == []


@pytest.mark.parametrize(("source", "expected"), [
    ("from cudasplit._split.pipeline import x\n", ["_split.pipeline"]),
    ("from cudasplit._api.entry import entry\n", ["_api.entry"]),
    ("if TYPE_CHECKING:\n    from cudasplit._split.pipeline import x\n", ["_split.pipeline"]),
    ("def f():\n    from .pipeline import x\n", ["_split.pipeline"]),
])
def test_the_checks_see_every_kind_of_import(tmp_path: Path, source: str,
                                             expected: list[str]) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    known = {"_split.pipeline", "_api", "_api.entry", "_split"}
    got = [t for t, _ in imports(Module("_split.m", path, False), known)]
    assert got == expected


def test_the_checks_catch_an_upward_import_and_a_cycle() -> None:
    edges = {"_elf.read.raw": {("_split.pipeline", 3)}, "_split.pipeline": {("_elf.read.raw", 1)},
             "_source.tar": {("_rulebook", 2)}, "_rulebook": set()}
    assert upward_imports(edges) == ["_elf.read.raw:3 imports _split.pipeline",
                                     "_source.tar:2 imports _rulebook"]
    assert cycles(edges) == [["_elf.read.raw", "_split.pipeline"]]


def test_no_design_labels_in_code_or_rules() -> None:
    """Design notes' labels (D3, D9, ...) mean nothing to a reader of the code or of a message:
    a comment or message says what it means instead."""
    label = re.compile(r"\(D[0-9]{1,2}[,)]|\bD[0-9]{1,2}:")
    rules = PACKAGE.parent / "rules"
    found = [f"{path.relative_to(PACKAGE.parent)}:{number}"
             for path in [*PACKAGE.rglob("*.py"), *PACKAGE.rglob("*.sh"), *rules.rglob("*.toml")]
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if label.search(line)]
    assert found == []
