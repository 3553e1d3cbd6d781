"""Closure sizes of ``out`` and ``lib``: cudasplit's package table vs buildRedist's outputs.

Each package is laid out from NVIDIA's PyPI wheel in the redist layout with real bytes
(tests/wheeltrees.py, every ELF file kept), split by a real ``nix-build`` of a
``builtins.derivation`` with the outputs the package table declares and ``--nix-support``
(the harness of tests/test_nix.py: private nix.conf, no sandbox, no nixpkgs), and measured with
``nix-store -q --requisites`` + ``--size`` (what ``nix path-info -S`` sums).

Columns:

* ``cudasplit out`` / ``cudasplit lib``: the closures as built;
* ``buildRedist out``: what ``out``'s closure holds in Nixpkgs, where ``out`` propagates bin,
  include, lib *and* the package's extra ``propagatedBuildOutputs`` (cudart: static + stubs;
  nvml: stubs) -- computed from the same store paths' sizes;
* ``every output``: what ``out`` held before the package table (cudasplit propagated every
  output, static and stubs included).

Static archives the wheels do not ship (cuBLAS's ``libcublas_static.a`` is ~0.8 GB in the redist
archive) are absent here, so the buildRedist column *understates* the difference for packages
whose extras include them.

    python3 benchmarks/bench_closure.py [PNAME ...]   # default: the five below; writes closure.md
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from cudasplit._rulebook import load_ruleset  # noqa: E402
from tests.nix.test_nix import DRV_NIX  # noqa: E402
from tests.support.wheeltrees import WHEELS, redist_tarball  # noqa: E402

DEFAULT = ("cuda_cudart", "cuda_nvml_dev", "cuda_cupti", "cuda_nvrtc", "libcublas")


class Store:
    def __init__(self, workdir: Path) -> None:
        conf = workdir / "conf"
        conf.mkdir()
        (conf / "nix.conf").write_text("sandbox = false\nbuild-users-group =\nsubstituters =\n")
        (workdir / "drv.nix").write_text(DRV_NIX)
        self.env = {**os.environ, "NIX_CONF_DIR": str(conf)}
        self.workdir = workdir
        self.nonce = uuid.uuid4().hex

    def build(self, name: str, src: Path, outputs: tuple[str, ...], cuda: str) -> dict[str, str]:
        script = (f"PYTHONPATH={ROOT} exec {sys.executable} -m cudasplit split \"@src@\" --nix "
                  f"--nix-support --cuda-version {cuda} -q")
        params = {"name": name, "script": script, "src": str(src), "builder": "/bin/sh",
                  "outputs": list(outputs), "nonce": self.nonce, "extra": {}}
        params_file = self.workdir / f"{name}.json"
        params_file.write_text(json.dumps(params))
        done = subprocess.run(["nix-build", str(self.workdir / "drv.nix"), "--arg", "paramsFile",
                               str(params_file), "--no-out-link"], env=self.env,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"{name}: nix-build failed\n{done.stderr[-2000:]}")
        return dict(zip(outputs, done.stdout.split(), strict=True))

    def _query(self, *args: str) -> list[str]:
        return subprocess.run(["nix-store", "-q", *args], env=self.env, capture_output=True,
                              text=True, check=True).stdout.split()

    def size(self, path: str) -> int:
        return int(self._query("--size", path)[0])

    def closure(self, path: str) -> int:
        return sum(self.size(p) for p in self._query("--requisites", path))

    def delete(self, paths: list[str]) -> None:
        subprocess.run(["nix-store", "--delete", *paths], env=self.env, capture_output=True,
                       check=False)


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f}"


def measure(store: Store, pname: str) -> dict[str, int | str]:
    wheel = WHEELS[pname]
    package = load_ruleset(pname).package
    outputs = package.outputs or ("out",)
    paths = store.build(f"cuda{wheel.cuda}-{pname}-{wheel.version}", redist_tarball(pname, wheel),
                        outputs, wheel.cuda)
    own = {name: store.size(path) for name, path in paths.items()}
    propagated = package.propagated(outputs)
    row: dict[str, int | str] = {"package": pname, "outputs": " ".join(outputs)}
    row["cudasplit out"] = store.closure(paths["out"])
    row["cudasplit lib"] = store.closure(paths["lib"]) if "lib" in paths else 0
    row["buildRedist out"] = own["out"] + sum(own[o] for o in propagated if o != "out")
    row["every output"] = sum(own.values())
    row["static"] = own.get("static", 0)
    row["stubs"] = own.get("stubs", 0)
    store.delete(list(paths.values()))
    return row


def table(rows: list[dict[str, int | str]]) -> str:
    head = ["package", "outputs", "cudasplit out", "cudasplit lib", "buildRedist out",
            "every output", "static", "stubs"]
    lines = ["| " + " | ".join(head[:2] + [h + " (MiB)" for h in head[2:]]) + " |",
             "|" + "---|" * len(head)]
    for row in rows:
        cells = [str(row[h]) if h in ("package", "outputs") else mib(int(row[h])) for h in head]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    names = argv or list(DEFAULT)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp))
        rows = [measure(store, name) for name in names]
    text = table(rows)
    sys.stdout.write(text)
    (Path(__file__).parent / "closure.md").write_text(
        "# Closure sizes (benchmarks/bench_closure.py)\n\nReal bytes from NVIDIA's wheels, "
        "split by nix-build; sizes as nix-store --size/--requisites report them.\n\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
