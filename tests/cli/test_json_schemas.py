"""Every JSON output is an object with a "schema" version, valid against the JSON Schema file
the package ships for it (cudasplit/schemas/*.json)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cudasplit.cli import main
from tests.support.builders import compile_shared
from tests.support.paths import REPO
from tests.support.tarutil import TOP, write_archive
from tests.unit.release.test_manifest import artifact_entry, write_manifest

jsonschema = pytest.importorskip("jsonschema")
referencing = pytest.importorskip("referencing")

NAMES = ("report", "batch", "closure", "diff", "verify", "explain", "ldd", "budget", "toolkit",
         "gpu-plan")


def _schemas() -> dict[str, dict[str, Any]]:
    folder = resources.files("cudasplit") / "schemas"
    return {name: json.loads((folder / f"{name}.json").read_text()) for name in NAMES}


def _check(name: str, data: Any) -> None:
    schemas = _schemas()
    registry = referencing.Registry().with_resources(
        (s["$id"], referencing.Resource.from_contents(s)) for s in schemas.values())
    assert isinstance(data, dict) and data["schema"] == 1
    jsonschema.Draft202012Validator(schemas[name], registry=registry).validate(data)


def _run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("schemas")
    lib = compile_shared(root, "libdemo.so.1", "int f(void){return 0;}", soname="libdemo.so.1",
                         needed_libs=["libnowhere.so.7"])
    entries = [("file", "lib/libdemo.so.1", lib.read_bytes()),
               ("symlink", "lib/libdemo.so", "libdemo.so.1"),
               ("file", "include/demo.h", b"#pragma once\n")]
    old = write_archive(root / f"{TOP}.tar.xz", entries)
    top = TOP.replace("12.9.79", "12.9.80")
    new = write_archive(root / f"{top}.tar.xz", [*entries, ("file", "bin/x", b"x")], top=top)
    out = root / "out"
    CliRunner().invoke(main, ["split", str(old), "-o", str(out)])
    return old, new, out


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [*([node["$ref"]] if "$ref" in node else []),
                *(r for value in node.values() for r in _refs(value))]
    return [r for value in node for r in _refs(value)] if isinstance(node, list) else []


def test_every_reference_resolves_to_a_shipped_schema() -> None:
    """A stock validator with a registry of the shipped schemas resolves every ``$ref``: ids
    are URNs (``urn:cudasplit:schemas:report``), not URLs a validator would try to fetch
    (``https://cudasplit/schemas/report.json`` named a host that does not exist)."""
    schemas = _schemas()
    ids = {s["$id"] for s in schemas.values()}
    assert ids == {f"urn:cudasplit:schemas:{name}" for name in NAMES}
    for name, schema in schemas.items():
        for ref in _refs(schema):
            assert ref.startswith("#") or ref.split("#")[0] in ids, (name, ref)
    registry = referencing.Registry().with_resources(
        (s["$id"], referencing.Resource.from_contents(s)) for s in schemas.values())
    resolver = registry.resolver()
    for ref in {r for s in schemas.values() for r in _refs(s) if not r.startswith("#")}:
        assert resolver.lookup(ref).contents in schemas.values()


def test_every_shipped_schema_is_checked_here() -> None:
    folder = resources.files("cudasplit") / "schemas"
    assert sorted(p.name for p in folder.iterdir() if p.name.endswith(".json")) == sorted(
        f"{name}.json" for name in NAMES)


def test_every_schema_is_valid_and_shipped() -> None:
    for schema in _schemas().values():
        jsonschema.Draft202012Validator.check_schema(schema)
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'packages = ["cudasplit"]' in pyproject  # the wheel takes the whole package dir


def test_split_report_and_inspect(archives: tuple[Path, Path, Path], tmp_path: Path) -> None:
    old, _, _ = archives
    _check("report", _run("split", str(old), "-o", str(tmp_path / "o"), "--report", "-"))
    _check("report", _run("inspect", str(old), "--json"))


def test_batch_report(archives: tuple[Path, Path, Path], tmp_path: Path) -> None:
    old, new, _ = archives
    _check("batch", _run("split", str(old), str(new), "-o", str(tmp_path / "o"),
                         "--report", "-", "-q"))


def test_closure_ldd_explain_diff(archives: tuple[Path, Path, Path]) -> None:
    old, new, out = archives
    _check("closure", _run("closure", str(out), "--json"))
    _check("ldd", _run("ldd", str(out), "--json", code=1))  # libnowhere.so.7: not found
    _check("explain", _run("explain", str(old), "lib/libdemo.so.1", "--json"))
    _check("diff", _run("diff", str(old), str(new), "--json", code=1))


def test_verify(tmp_path: Path) -> None:
    rel = "cuda_demo/linux-x86_64/cuda_demo-linux-x86_64-1.0-archive.tar.xz"
    manifest = write_manifest(tmp_path / "redistrib_1.0.json", {
        "release_date": "2026-01-01", "release_label": "1.0", "release_product": "cuda",
        "cuda_demo": {"name": "demo", "license": "x", "version": "1.0",
                      "linux-x86_64": artifact_entry(rel, b"abc")}})
    tarballs = tmp_path / "t"
    tarballs.mkdir()
    (tarballs / Path(rel).name).write_bytes(b"abc")
    _check("verify", _run("verify", str(manifest), "--tarballs", str(tarballs), "--json"))


def test_consumer_budget(archives: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """A consumer naming a store path of a forbidden output: the violation and its chain."""
    store = tmp_path / "store"
    static = store / ("0" * 32 + "-cuda_demo-12.9.79-static")
    (static / "lib").mkdir(parents=True)
    (static / "lib" / "libdemo_static.a").write_bytes(b"!<arch>\n")
    consumer = store / ("1" * 32 + "-consumer")
    (consumer / "share").mkdir(parents=True)
    (consumer / "share" / "ref").write_text(f"{static}/lib\n")
    data = _run("closure", str(consumer), "--consumer", "--store-dir", str(store), "--json",
                code=1)
    _check("budget", data)
    assert [v["category"] for v in data["violations"]] == ["static"]


def test_toolkit_view(archives: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _old, _new, out = archives
    _check("toolkit", _run("toolkit", str(out), "-o", str(tmp_path / "prefix"), "--dry-run",
                           "--json"))


def test_gpu_plan(archives: tuple[Path, Path, Path]) -> None:
    old, _, out = archives
    _check("gpu-plan", _run("gpu-plan", str(old), "--gpu-archs", "8.0;9.0", "--json"))
    _check("gpu-plan", _run("gpu-plan", str(out), "--gpu-archs", "9.0", "--json"))
