"""Closure budgets (issue 28) on a stand-in store: a consumer directory naming a lib output
whose file names a ``static`` output is a violation with the chain of files; the API, the
``closure --consumer`` command and the consumer-guards hook agree. The real ``nix-build`` of the
same is tests/test_nix_guards.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit._release.budget import output_words
from cudasplit.cli import main
from cudasplit.guards import closure_budget, consumer_guards_hook

HASHES = ("a" * 32, "b" * 32, "c" * 32, "d" * 32, "f" * 32)


def _component(path: Path, output: str, compiler: bool = False) -> None:
    meta = path / "nix-support" / "cuda-component"
    meta.parent.mkdir(parents=True)
    extra = ' [compiler]="bin/nvcc"' if compiler else ""
    meta.write_text(f'declare -A cudaComponentMetadata=([format]="3" [component]="x" '
                    f'[output]="{output}"{extra} )\n')


@pytest.fixture
def store(tmp_path: Path) -> dict[str, Path]:
    """lib (names static in a library's bytes), static (metadata), include (by name only),
    nvcc (a compiler), glibc (harmless)."""
    root = tmp_path / "store"
    paths = {
        "lib": root / f"{HASHES[0]}-cuda_cudart-12.9.79-lib",
        "static": root / f"{HASHES[1]}-cuda_cudart-12.9.79-static",
        "include": root / f"{HASHES[2]}-cuda_cudart-12.9.79-include",
        "nvcc": root / f"{HASHES[3]}-cuda_nvcc-12.9.86",
        "glibc": root / f"{HASHES[4]}-glibc-2.40",
    }
    for path in paths.values():
        (path / "lib").mkdir(parents=True)
    _component(paths["lib"], "lib")
    _component(paths["static"], "static")
    _component(paths["nvcc"], "out", compiler=True)
    (paths["static"] / "lib" / "libcudart_static.a").write_bytes(b"!<arch>\n" + b"\0" * 1000)
    (paths["include"] / "include").mkdir()
    (paths["include"] / "include" / "cuda.h").write_text("/* header */\n")
    (paths["glibc"] / "lib" / "libc.so.6").write_bytes(b"\x7fELF" + b"\0" * 100)
    lib = paths["lib"] / "lib" / "libcudart.so.12"
    lib.write_bytes(b"\x7fELF\0\0" + f"{paths['static']}/lib/libcudart_static.a\0".encode()
                    + f"{paths['glibc']}/lib\0".encode())
    paths["root"] = root
    return paths


def _consumer(tmp_path: Path, *names: Path, link: Path | None = None) -> Path:
    out = tmp_path / "consumer"
    (out / "bin").mkdir(parents=True)
    (out / "bin" / "app").write_bytes(b"\x7fELF\0" + b"".join(
        str(n).encode() + b"/lib\0" for n in names))
    if link is not None:
        os.symlink(link, out / "bin" / "link")
    return out


def test_output_words() -> None:
    assert output_words("/nix/store/" + "a" * 32 + "-cuda_cudart-12.9.79-include") == {
        "include", "headers"}
    assert output_words("/nix/store/" + "a" * 32 + "-glibc-2.40") == set()


def test_static_reached_through_lib_is_a_violation_with_the_chain(store: dict[str, Path],
                                                                  tmp_path: Path) -> None:
    consumer = _consumer(tmp_path, store["lib"])
    report = closure_budget(consumer, store_dir=str(store["root"]))
    assert report.closure[0] == str(consumer)
    assert str(store["glibc"]) in report.closure
    [violation] = report.violations
    assert (violation.kind, violation.category, violation.target) == (
        "forbidden", "static", str(store["static"]))
    assert [(link.file, link.names) for link in violation.chain] == [
        (str(consumer / "bin/app"), str(store["lib"])),
        (str(store["lib"] / "lib/libcudart.so.12"), str(store["static"]))]


def test_without_the_reference_it_passes(store: dict[str, Path], tmp_path: Path) -> None:
    consumer = _consumer(tmp_path, store["glibc"])
    report = closure_budget(consumer, store_dir=str(store["root"]))
    assert report.violations == ()
    assert report.closure == (str(consumer), str(store["glibc"]))


def test_headers_compiler_symlinks_and_allowing(store: dict[str, Path], tmp_path: Path) -> None:
    consumer = _consumer(tmp_path, store["nvcc"], link=store["include"] / "include" / "cuda.h")
    report = closure_budget(consumer, store_dir=str(store["root"]))
    got = {(v.category, v.target, v.chain[-1].file) for v in report.violations}
    assert got == {("compiler", str(store["nvcc"]), str(consumer / "bin/app")),
                   ("headers", str(store["include"]), str(consumer / "bin/link"))}
    assert closure_budget(consumer, forbid=("static",), store_dir=str(store["root"])
                          ).violations == ()


def test_byte_budget(store: dict[str, Path], tmp_path: Path) -> None:
    consumer = _consumer(tmp_path, store["glibc"])
    report = closure_budget(consumer, max_bytes=50, store_dir=str(store["root"]))
    assert [v.kind for v in report.violations] == ["bytes"]
    assert "over the budget of 50" in report.violations[0].message
    assert closure_budget(consumer, max_bytes=report.closure_bytes,
                          store_dir=str(store["root"])).violations == ()


def test_a_path_inside_a_store_path_means_the_whole_store_path(store: dict[str, Path]) -> None:
    report = closure_budget(store["lib"] / "lib" / "libcudart.so.12", forbid=(),
                            store_dir=str(store["root"]))
    assert report.root == str(store["lib"])


def test_cli(store: dict[str, Path], tmp_path: Path) -> None:
    consumer = _consumer(tmp_path, store["lib"])
    runner = CliRunner()
    args = ["closure", str(consumer), "--consumer", "--store-dir", str(store["root"])]
    bad = runner.invoke(main, args)
    assert bad.exit_code == 1, bad.output
    assert f"violation: static output {store['static']} is in the run-time closure" in bad.output
    assert f"{store['lib']}/lib/libcudart.so.12 names {store['static']}" in bad.output
    as_json = json.loads(runner.invoke(main, [*args, "--json"]).output)
    assert as_json["violations"][0]["chain"][0]["names"] == str(store["lib"])
    assert runner.invoke(main, [*args, "--forbid", "none"]).exit_code == 0
    assert runner.invoke(main, [*args, "--forbid", "stubs"]).exit_code == 0
    assert runner.invoke(main, [*args, "--forbid", "none", "--max-bytes", "10"]).exit_code == 1


def _hook(out: Path, store: Path, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    script = (f"set -euo pipefail\npostFixupHooks=()\nsource {consumer_guards_hook()}\n"
              'for hook in "${postFixupHooks[@]}"; do "$hook"; done\n')
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                          env={**os.environ, "out": str(out), "outputs": "out",
                               "NIX_STORE": str(store), **(env or {})})


def test_hook_fails_with_the_chain_and_passes_without(store: dict[str, Path],
                                                      tmp_path: Path) -> None:
    consumer = _consumer(tmp_path, store["lib"])
    done = _hook(consumer, store["root"])
    assert done.returncode != 0
    assert f"forbidden static output {store['static']}" in done.stderr, done.stderr
    assert (f"    {consumer}/bin/app names {store['lib']}\n"
            f"    {store['lib']}/lib/libcudart.so.12 names {store['static']}\n") in done.stderr
    allowed = _hook(consumer, store["root"], {"cudasplitForbiddenOutputs": "stubs"})
    assert allowed.returncode == 0, allowed.stderr
    over = _hook(consumer, store["root"], {"cudasplitForbiddenOutputs": "",
                                           "cudasplitClosureBudget": "10"})
    assert over.returncode != 0 and "over cudasplitClosureBudget=10" in over.stderr
    clean = _consumer(tmp_path / "other", store["glibc"])
    assert _hook(clean, store["root"]).returncode == 0


def test_hook_headers_by_name_and_symlink(store: dict[str, Path], tmp_path: Path) -> None:
    consumer = _consumer(tmp_path, link=store["include"] / "include" / "cuda.h")
    done = _hook(consumer, store["root"])
    assert done.returncode != 0
    assert f"forbidden headers output {store['include']}" in done.stderr or \
        f"forbidden include output {store['include']}" in done.stderr, done.stderr
    assert f"    {consumer}/bin/link names {store['include']}" in done.stderr


def test_hook_checks_run_time_outputs_not_dev(store: dict[str, Path], tmp_path: Path) -> None:
    """A consumer's dev output naming CUDA headers (its .pc file) is fine; out reaching dev
    brings dev into the run-time closure, and the chain says so."""
    out, dev = tmp_path / "out", tmp_path / "store-like" / (HASHES[0][:31] + "z-app-1.0-dev")
    (out / "bin").mkdir(parents=True)
    (out / "bin" / "app").write_bytes(b"\x7fELF\0")
    (dev / "lib" / "pkgconfig").mkdir(parents=True)
    (dev / "lib" / "pkgconfig" / "app.pc").write_text(f"Cflags: -I{store['include']}/include\n")

    def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        script = (f"set -euo pipefail\npostFixupHooks=()\nsource {consumer_guards_hook()}\n"
                  'for hook in "${postFixupHooks[@]}"; do "$hook"; done\n')
        return subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                              env={**os.environ, "out": str(out), "dev": str(dev),
                                   "outputs": "out dev", "NIX_STORE": str(store["root"]),
                                   **env})

    assert run({}).returncode == 0
    checked = run({"cudasplitClosureOutputs": "out dev"})
    assert checked.returncode != 0 and f"forbidden headers output {store['include']}" in \
        checked.stderr
    # out naming dev: dev (not a root any more) is followed into the headers.
    dev_in_store = store["root"] / dev.name
    shutil.copytree(dev, dev_in_store)
    (out / "bin" / "app").write_bytes(b"\x7fELF\0" + f"{dev_in_store}/lib\0".encode())
    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\npostFixupHooks=()\nsource {consumer_guards_hook()}\n"
                       'for hook in "${postFixupHooks[@]}"; do "$hook"; done\n'],
        capture_output=True, text=True,
        env={**os.environ, "out": str(out), "dev": str(dev_in_store), "outputs": "out dev",
             "NIX_STORE": str(store["root"])})
    assert done.returncode != 0
    assert (f"    {out}/bin/app names {dev_in_store}\n"
            f"    {dev_in_store}/lib/pkgconfig/app.pc names {store['include']}\n") in done.stderr
