"""The public API is the only way in: the CLI imports nothing else, every public name is
documented, and the functions a front end needs (option words, batch JSON, rules, release
tools, checks of split output) work on their own."""

from __future__ import annotations

import ast
import hashlib
import inspect
import json
import sys
from pathlib import Path
from typing import Any

import click
import pytest

import cudasplit
from cudasplit import (
    BatchResult,
    OptionsError,
    OutputError,
    PackageId,
    RulesError,
    RunpathPolicyError,
    SourceError,
    SplitOptions,
    batch_report,
    package_id,
    platform_name,
    runpath_policy,
    split_many,
    split_to_dir,
)
from cudasplit.cli import main
from cudasplit.cli._optgroups import COMMON, GROUPS, PATCH, OptionGroupError, split_options
from cudasplit.nixify import nixify_manifest
from cudasplit.outputs import closure_of, ldd
from cudasplit.releases import diff_releases, manifest_features, verify_manifest
from cudasplit.rules import check_rule_file, package_entry_lines, ruleset_for
from tests.support import public
from tests.support.tarutil import TOP, write_archive

CLI = Path(cudasplit.__file__).parent / "cli"
# In _rules.py, which is being split elsewhere: their docstrings come with that work.
UNDOCUMENTED = {"RuleSet", "load_ruleset"}
ENTRIES = [
    ("file", "lib/libdemo.so.12.9.79", b"plain"),
    ("symlink", "lib/libdemo.so.12", "libdemo.so.12.9.79"),
    ("file", "include/demo.h", b"#pragma once\n"),
]


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    return write_archive(tmp_path / f"{TOP}.tar.xz", ENTRIES)


# -- the one way in --------------------------------------------------------------------------


def _cudasplit_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every import from cudasplit outside the cli package itself."""
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.split(".")[0] == "cudasplit"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            if (node.module or "").split(".")[0] == "cudasplit":
                found += [(node.module or "", a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level >= 2:
            # ``..`` is the cudasplit package (cli is one level below it).
            module = ".".join(["cudasplit", *(node.module or "").split(".")]).rstrip(".")
            found += [(module if node.level == 2 else "<above cudasplit>", a.name)
                      for a in node.names]
    return found


def _foreign_imports(path: Path) -> list[str]:
    """Absolute imports of anything but the standard library, click and cudasplit."""
    allowed = {*sys.stdlib_module_names, "click", "cudasplit", "__future__"}
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.append(node.module or "")
    return [n for n in names if n.split(".")[0] not in allowed]


@pytest.mark.parametrize("path", sorted(CLI.glob("*.py")), ids=lambda p: p.name)
def test_the_cli_imports_only_public_names(path: Path) -> None:
    """Public names, from the module that exports them; and the loader of lazy faces (no
    logic: cli/__init__ loads click only with the first command)."""
    bad = [f"{module}:{name}" for module, name in _cudasplit_imports(path)
           if not (module in public.MODULES and name in public.names_of(module))
           and not (module == "cudasplit" and name in cudasplit._SUBMODULES)
           and not (module == "cudasplit._lazy" and name == "lazy_face")
           and module != "cudasplit.cli" and not module.startswith("cudasplit.cli.")]
    assert bad == [], f"{path.name} imports internals: {bad}"
    assert _foreign_imports(path) == []


def test_the_import_check_sees_internal_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from .. import _api\nfrom .._globs import x\nfrom cudasplit._source "
                      "import y\nimport cudasplit._model\nfrom .. import split\n")
    assert _cudasplit_imports(module) == [
        ("cudasplit", "_api"), ("cudasplit._globs", "x"), ("cudasplit._source", "y"),
        ("cudasplit._model", ""), ("cudasplit", "split")]


@pytest.mark.parametrize("name", sorted(public.public()))
def test_every_public_name_is_importable_and_documented(name: str) -> None:
    obj = public.public()[name]
    if not (inspect.isclass(obj) or inspect.isfunction(obj)) or name in UNDOCUMENTED:
        return
    doc = obj.__doc__ or ""
    # A dataclass without a docstring gets its signature as one: that documents nothing.
    assert doc.strip() and not doc.startswith(f"{name}("), f"{name} has no docstring"


def test_no_public_module_is_new() -> None:
    """Every module but __init__, __main__, cli and the documented modules one level down is
    private (``_``-prefixed); a new public module is one more in ``cudasplit._SUBMODULES``
    (and so in the reference)."""
    package = CLI.parent
    found = {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")}
    folders = {p.name for p in package.iterdir() if (p / "__init__.py").is_file()
               and not p.name.startswith("_")}
    assert found == set(cudasplit._SUBMODULES) and folders == {"cli"}
    assert all(p.stem.startswith("_") for p in CLI.glob("*.py"))


# -- option groups: declared, not guessed ----------------------------------------------------


def _commands(group: click.Group) -> list[click.Command]:
    found: list[click.Command] = []
    for command in group.commands.values():
        found += _commands(command) if isinstance(command, click.Group) else [command]
    return found


@pytest.mark.parametrize("command", _commands(main), ids=lambda c: c.name)
def test_a_command_has_a_group_whole_or_not_at_all(command: click.Command) -> None:
    for group in GROUPS:
        assert group.found_in(command) in (set(), group.names), (command.name, group.name)


def test_the_commands_that_build_options_have_their_groups() -> None:
    have = {c.name: [g.name for g in GROUPS if g.found_in(c)] for c in _commands(main)}
    assert have["split"] == have["explain"] == have["repack"] == ["common", "patch"]
    assert have["inspect"] == ["common"] and have["ldd"] == have["show"] == []


def test_groups_know_their_parameter_names() -> None:
    assert {"rules_files", "split_platform", "max_size"} <= COMMON.names
    assert {"driver_link", "rpath_alias", "package_root"} <= PATCH.names
    assert not COMMON.names & PATCH.names


def _values(*groups: Any) -> dict[str, Any]:
    """What click hands a command for ``groups`` given no option at all."""
    @click.command()
    def command(**kw: Any) -> None:
        """Collects its options."""
        seen.update(kw)

    seen: dict[str, Any] = {}
    for group in groups:
        command = group(command)
    command.main([], standalone_mode=False)
    return seen


def test_options_for_a_group_the_command_lacks_are_an_error() -> None:
    with pytest.raises(OptionGroupError, match=r"'patch'.*does not declare"):
        split_options(_values(COMMON), COMMON, PATCH)


def test_a_declared_group_nobody_builds_from_is_an_error() -> None:
    with pytest.raises(OptionGroupError, match="driver_link"):
        split_options(_values(COMMON, PATCH), COMMON)


def test_groups_without_values_give_the_library_defaults() -> None:
    built = split_options(_values(COMMON, PATCH), COMMON, PATCH, dry_run=True)
    assert built == SplitOptions(dry_run=True)


# -- option words ----------------------------------------------------------------------------


def test_runpath_policy_from_option_words() -> None:
    policy = runpath_policy(driver_link=None, tag="RPath", interpreters=["aarch64=/l/ld.so"],
                            library_paths=["/x/lib"], ignore_missing=["libcuda.so.*"])
    assert (policy.driver_link, policy.tag, policy.interpreters) == (
        None, "RPATH", (("aarch64", "/l/ld.so"),))
    assert policy.library_paths == ("/x/lib",) and policy.ignore_missing == ("libcuda.so.*",)
    assert runpath_policy() == SplitOptions().runpath
    with pytest.raises(RunpathPolicyError):
        runpath_policy(tag="runpath-please")
    with pytest.raises(RunpathPolicyError):
        runpath_policy(append=["relative/dir"])


def test_package_id_from_a_name_or_a_top_directory() -> None:
    assert package_id("cuda_cudart") == PackageId("cuda_cudart")
    full = PackageId("cuda_cudart", "linux-x86_64", "12.9.79")
    assert package_id("cuda_cudart-linux-x86_64-12.9.79") == full
    assert package_id("cuda_cudart-linux-x86_64-12.9.79-archive") == full


def test_platform_name_maps_nix_words_and_passes_nvidia_names() -> None:
    assert platform_name("x86_64-linux") == "linux-x86_64"
    assert platform_name("linux-sbsa") == "linux-sbsa"
    assert platform_name("aarch64-linux:8.7", "12.9") == "linux-aarch64"


# -- batch report ----------------------------------------------------------------------------


def test_batch_report_holds_every_run(tmp_path: Path, archive: Path) -> None:
    broken = tmp_path / "cuda_broken-linux-x86_64-1.0-archive.tar.xz"
    broken.write_bytes(b"\xfd7zXZ\x00 not really")
    results = split_many([archive, broken], tmp_path / "out", SplitOptions(patch=False))
    data = json.loads(json.dumps(batch_report(results)))
    assert data["schema"] == 1 and [r["source"] for r in data["runs"]] == [
        str(archive), str(broken)]
    good, bad = data["runs"]
    assert good["error"] is None and good["report"]["package"]["name"] == "cuda_demo"
    assert bad["report"] is None and bad["error"]
    relative = batch_report(results, relative=True)["runs"][0]["report"]
    assert relative["outputs"]["lib"]["directory"] == "$lib"
    one = BatchResult("s", "d", None, None)
    assert one.as_dict() == {"source": "s", "output_dir": "d", "error": None, "report": None}


# -- rules -----------------------------------------------------------------------------------


def test_ruleset_for_refuses_an_unknown_package_unless_default_rules() -> None:
    with pytest.raises(OptionsError, match=r"cuda_cudartt.*did you mean cuda_cudart"):
        ruleset_for("cuda_cudartt")
    assert ruleset_for("cuda_nothing_like_it", default_rules=True).rules
    shipped = ruleset_for("cuda_cudart")
    assert any(f.endswith("cuda_cudart.toml") for f in shipped.files)
    assert any(line.startswith("runpath_append = ") for line in package_entry_lines(shipped))


def test_check_rule_file(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('[[rule]]\nname = "docs"\noutput = "doc"\nmatch = ["share/doc/**"]\n')
    assert [r.output for r in check_rule_file(good).rules] == ["doc"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[[rule]]\nname = "x"\noutput = "nowhere"\nmatch = ["*"]\n')
    with pytest.raises(RulesError, match=r"bad\.toml"):
        check_rule_file(bad)


# -- split output ----------------------------------------------------------------------------


def test_closure_of_a_split_directory_and_of_roots(tmp_path: Path, archive: Path) -> None:
    out = tmp_path / "out"
    split_to_dir(archive, out, SplitOptions(patch=False))
    by_dir = closure_of(out)
    assert {"lib", "include"} <= set(by_dir.roots)
    assert closure_of(roots={"lib": str(out / "lib")}).roots == {"lib": str(out / "lib")}
    with pytest.raises(cudasplit.CudasplitError):
        closure_of(env={})  # neither a directory nor roots: the Nix builder's outputs


def test_ldd_of_a_tree_without_elf_files_and_of_nothing(tmp_path: Path, archive: Path) -> None:
    out = tmp_path / "out"
    split_to_dir(archive, out, SplitOptions(patch=False))
    assert ldd(out, driver_link="/tmp/driver", maps=[("/x", "/y")]) == []
    with pytest.raises(SourceError):
        ldd(tmp_path / "missing")


# -- release tools, by manifest path ---------------------------------------------------------


@pytest.fixture
def manifest(tmp_path: Path, archive: Path) -> Path:
    data = archive.read_bytes()
    entry = {"relative_path": f"cuda_demo/linux-x86_64/{archive.name}",
             "sha256": hashlib.sha256(data).hexdigest(), "md5": hashlib.md5(data).hexdigest(),
             "size": str(len(data))}
    path = tmp_path / "redistrib_12.9.1.json"
    path.write_text(json.dumps({"release_label": "12.9.1", "cuda_demo": {
        "name": "Demo", "license": "CUDA Toolkit", "version": "12.9.79",
        "linux-x86_64": entry}}))
    return path


def test_verify_and_features_by_manifest_path(manifest: Path, archive: Path) -> None:
    report = verify_manifest(manifest, archive.parent)
    assert report.ok and len(report.results) == 1
    elsewhere = archive.parent / "elsewhere"
    elsewhere.mkdir()
    assert not verify_manifest(manifest, elsewhere).ok  # missing: a result, not an exception
    features = manifest_features(manifest, archive.parent, platforms=["linux-x86_64"])
    assert features.complete
    assert "lib" in json.loads(features.to_feature_json())["cuda_demo"]["linux-x86_64"][
        "outputs"]


def test_nixify_and_diff_by_path(tmp_path_factory: pytest.TempPathFactory, manifest: Path,
                                 archive: Path) -> None:
    out = tmp_path_factory.mktemp("nix")  # apart from the tarball directory (its input)
    result = nixify_manifest(manifest, archive.parent, out)
    assert "default.nix" in result.files and (out / "cuda_demo.nix").is_file()
    with pytest.raises(OutputError, match="inside the input"):
        nixify_manifest(manifest, archive.parent, archive.parent / "nix")
    assert diff_releases(archive, archive).changes == ()
    assert diff_releases(manifest, manifest, tarball_dir=archive.parent).changes == ()


def test_a_split_does_not_load_the_release_tools() -> None:
    """The release tools are lazy public names: importing the CLI (every ``cudasplit split``)
    leaves them unloaded, and the first use loads them like any attribute."""
    import subprocess
    import sys
    code = (
        "import sys, cudasplit.cli, cudasplit\n"
        "lazy = ('cudasplit._api.release', 'cudasplit._api.checks', 'cudasplit._release.features',"
        " 'cudasplit._release.closure', 'cudasplit._release.diff', 'cudasplit._release.nixify')\n"
        "print(sorted(m for m in lazy if m in sys.modules))\n"
        "from cudasplit.outputs import closure_of\n"
        "from cudasplit.releases import diff_releases\n"
        "print(callable(closure_of), cudasplit.releases.diff_releases is diff_releases,"
        " 'ldd' in dir(cudasplit.outputs))\n"
        "try:\n    cudasplit.no_such_name\nexcept AttributeError as exc:\n    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["[]", "True True True",
                   "module 'cudasplit' has no attribute 'no_such_name'"]
