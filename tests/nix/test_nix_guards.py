"""Real ``nix-build`` of the consumer guards.

libcurand (its member list, tests/data/trees/packages/) is split by a ``builtins.derivation``
with ``--nix-support --consumer-guards``, so its ``lib`` output's ``nix-support/setup-hook``
carries the consumer-guards hook. A small consumer then does what stdenv does for a dependency
(no nixpkgs here: the harness of tests/nix/test_nix.py): sources that setup hook and runs
``postFixupHooks`` after its install. Its output naming the ``static`` output -- directly, or
through another store path -- fails the build with the chain of files; naming only ``lib``
passes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from cudasplit.rules import load_ruleset
from tests.nix import test_nix
from tests.nix.test_nix import CHECKOUT, Nix
from tests.support.builders import have_compiler, tree_from_reference, write_tarball
from tests.support.paths import DATA

nix = test_nix.nix

pytestmark = [pytest.mark.nix,
              pytest.mark.skipif(not have_compiler("x86_64"), reason="needs gcc")]

LISTS = DATA / "trees" / "packages"


@pytest.fixture(scope="module")
def cudart(nix: Nix, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("cudart")
    top = tree_from_reference(LISTS / "libcurand.txt", tmp / "tree")
    (tmp / "dist").mkdir()
    src = write_tarball(top, tmp / "dist", "xz")
    outputs = load_ruleset("libcurand").package.outputs
    assert outputs is not None
    script = (f"PYTHONPATH={CHECKOUT} exec {sys.executable} -m cudasplit split \"@src@\" --nix "
              "--nix-support --consumer-guards --cuda-version 12.9 -q "
              "--report \"$NIX_BUILD_TOP/report.json\"")
    done = nix.build("cuda12.9-libcurand-guarded", script, src=src, outputs=outputs)
    assert done.returncode == 0, done.stderr[-3000:]
    paths = done.stdout.split()
    assert len(paths) == len(outputs)
    return dict(zip(outputs, map(Path, paths), strict=True))


def _consumer(nix: Nix, name: str, cudart: dict[str, Path], body: str, tmp: Path,
              guarded: bool = True) -> tuple[int, str, str]:
    hook = cudart["lib"] / "nix-support" / "setup-hook"
    src = tmp / f"{name}.txt"
    src.write_text(name + "\n")
    load = f"source {hook}\n" if guarded else ""
    script = (f"set -euo pipefail\nexport PATH=/usr/bin:/bin\npostFixupHooks=()\n{load}"
              f'mkdir -p "$out/share"\n{body}\n'
              'for hook in "${postFixupHooks[@]}"; do "$hook"; done\n')
    done = nix.build(name, script, src=src, builder="/bin/bash", outputs=("out",))
    return done.returncode, done.stdout.strip(), done.stderr


def test_lib_carries_the_guards_hook(cudart: dict[str, Path]) -> None:
    hook = (cudart["lib"] / "nix-support" / "setup-hook").read_text()
    assert "cudasplitConsumerGuards" in hook
    assert "static" in cudart and (cudart["static"] / "nix-support/cuda-component").is_file()


def test_reference_to_static_fails_with_the_chain(nix: Nix, cudart: dict[str, Path],
                                                  tmp_path: Path) -> None:
    static = cudart["static"]
    archive = next((static / "lib").glob("*.a"))
    code, _out, err = _consumer(nix, "consumer-static", cudart,
                                f'echo "{archive}" > "$out/share/ref"', tmp_path)
    assert code != 0
    assert f"forbidden static output {static}" in err, err[-3000:]
    assert "/share/ref names " + str(static) in err


def test_reference_through_another_path_fails_with_the_whole_chain(
        nix: Nix, cudart: dict[str, Path], tmp_path: Path) -> None:
    static = cudart["static"]
    code, mid, err = _consumer(nix, "middle-static", cudart,
                               f'echo "{static}/lib" > "$out/share/ref"', tmp_path,
                               guarded=False)
    assert code == 0, err[-3000:]
    code, _out, err = _consumer(nix, "consumer-via-middle", cudart,
                                f'ln -s "{mid}/share/ref" "$out/share/link"', tmp_path)
    assert code != 0
    assert f"/share/link names {mid}\n" in err, err[-3000:]
    assert f"    {mid}/share/ref names {static}\n" in err


def test_reference_to_lib_only_passes(nix: Nix, cudart: dict[str, Path], tmp_path: Path
                                      ) -> None:
    code, out, err = _consumer(nix, "consumer-lib", cudart,
                               f'echo "{cudart["lib"]}/lib" > "$out/share/ref"', tmp_path)
    assert code == 0, err[-3000:]
    assert (Path(out) / "share" / "ref").read_text().strip() == f"{cudart['lib']}/lib"


LIBFOO = "int foo(void) { return %d; }\n"
USES_FOO = "int foo(void);\nint main(void) { return foo(); }\n"


def test_ambiguous_runpath_fails_the_consumers_fixup(nix: Nix, cudart: dict[str, Path],
                                                      tmp_path: Path) -> None:
    """The fixture consumer: linked against two directories that both hold libfoo.so.1 (each
    its own build) fails; the same consumer with one directory passes."""
    import shutil

    from tests.support.builders import compile_shared

    dirs = []
    for i in range(2):
        directory = tmp_path / f"foo{i}"
        compile_shared(directory, "libfoo.so.1", LIBFOO % i, soname="libfoo.so.1")
        dirs.append(directory)
    (tmp_path / "uses_foo.c").write_text(USES_FOO)
    gcc = shutil.which("gcc")

    def link(runpath: str) -> str:
        return (f'mkdir -p "$out/bin"\n{gcc} {tmp_path}/uses_foo.c -o "$out/bin/uses-foo" '
                f"-L{dirs[0]} -l:libfoo.so.1 -Wl,--enable-new-dtags,-rpath,{runpath}")

    code, _out, err = _consumer(nix, "consumer-two-foo", cudart,
                                link(f"{dirs[0]}:{dirs[1]}"), tmp_path)
    assert code != 0
    assert (f"/bin/uses-foo: ambiguous RUNPATH: libfoo.so.1 is in {dirs[0]} and {dirs[1]}"
            in err), err[-3000:]
    code, _out, err = _consumer(nix, "consumer-one-foo", cudart, link(str(dirs[0])), tmp_path)
    assert code == 0, err[-3000:]


def test_closure_command_on_built_store_paths(nix: Nix, cudart: dict[str, Path],
                                              tmp_path: Path) -> None:
    """``cudasplit closure --consumer`` on what nix-build produced: the unguarded build that
    names the static output is reported with its chain; one naming lib only is clean."""
    from click.testing import CliRunner

    from cudasplit.cli import main

    static = cudart["static"]
    code, bad, err = _consumer(nix, "unguarded-static", cudart,
                               f'echo "{static}/lib" > "$out/share/ref"', tmp_path,
                               guarded=False)
    assert code == 0, err[-3000:]
    code, good, err = _consumer(nix, "unguarded-lib", cudart,
                                f'echo "{cudart["lib"]}/lib" > "$out/share/ref"', tmp_path,
                                guarded=False)
    assert code == 0, err[-3000:]
    runner = CliRunner()
    found = runner.invoke(main, ["closure", bad, "--consumer"])
    assert found.exit_code == 1, found.output
    assert f"violation: static output {static} is in the run-time closure" in found.output
    assert f"    {bad}/share/ref names {static}" in found.output
    clean = runner.invoke(main, ["closure", good, "--consumer"])
    assert clean.exit_code == 0, clean.output
    assert clean.output.startswith(f"{good}: 2 paths")
