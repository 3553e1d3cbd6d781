"""``closure`` and ``diff`` draw (issue 26): ``--format dot`` (Graphviz) and ``--format
mermaid``. Checked by ``dot`` itself where Graphviz is installed."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from cudasplit._release.diff import Change, ReleaseDiff
from cudasplit.cli import main
from tests.support.builders import compile_executable, compile_shared
from tests.support.tarutil import TOP, write_archive


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("graphs")
    dep = compile_shared(root, "libdep.so.1", "int dep(void){return 0;}", soname="libdep.so.1")
    tool = compile_executable(root, "tool", "int dep(void);\nint main(void){return dep();}",
                              needed_libs=[dep])
    entries = [("file", "bin/tool", tool.read_bytes()), ("file", "lib/libdep.so.1",
                                                          dep.read_bytes()),
               ("file", "include/dep.h", b"int dep(void);\n")]
    old = write_archive(root / f"{TOP}.tar.xz", entries)
    top = TOP.replace("12.9.79", "12.9.80")
    new = write_archive(root / f"{top}.tar.xz", [*entries[:2], ("file", "include/new.h", b"")],
                        top=top)
    out = root / "out"
    assert CliRunner().invoke(main, ["split", str(old), "-o", str(out)]).exit_code == 0
    return old, new, out


def _run(*args: str, code: int = 0) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == code, result.output
    return result.stdout


def _dot_parses(text: str) -> None:
    if shutil.which("dot") is None:
        return
    done = subprocess.run(["dot", "-Tsvg"], input=text, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_closure_dot(release: tuple[Path, Path, Path]) -> None:
    text = _run("closure", str(release[2]), "--format", "dot")
    assert text.startswith('digraph "closure" {')
    assert re.search(r'"bin" -> "lib" \[label="[^"]*runpath', text), text
    assert '"lib" [label="lib\\n1 file, ' in text
    _dot_parses(text)


def test_closure_mermaid(release: tuple[Path, Path, Path]) -> None:
    text = _run("closure", str(release[2]), "--format", "mermaid")
    lines = text.splitlines()
    assert lines[1] == "flowchart LR"
    ids = {m[2]: m[1] for m in (re.match(r'\s+(n\d+)\["(\w+)<br/>', line) for line in lines)
           if m}
    assert any(re.fullmatch(rf"\s+{ids['bin']} -->\|[^|]*runpath[^|]*\| {ids['lib']}", line)
               for line in lines), text


def test_diff_draws_added_removed_and_moved(release: tuple[Path, Path, Path]) -> None:
    old, new, _ = release
    text = _run("diff", str(old), str(new), "--format", "dot", code=1)
    assert "+1 member" in text and "-1 member" in text
    _dot_parses(text)
    assert "flowchart LR" in _run("diff", str(old), str(new), "--format", "mermaid", code=1)


def test_diff_graph_edges_count_moves() -> None:
    diff = ReleaseDiff("12.9", "13.0", (
        Change("member-moved", "cuda_nvcc", "bin/a", "cuda_nvcc:bin", "cuda_nvcc:out"),
        Change("member-moved", "cuda_nvcc", "bin/b", "cuda_nvcc:bin", "cuda_nvcc:out"),
        Change("package-moved", "cuda_crt", "include/crt/x.h", "cuda_nvcc:include",
               "cuda_crt:include"),
        Change("output-added", "cuda_crt", "include"),
        Change("output-removed", "cuda_nvcc", "bin"),
        Change("relocated", "cuda_cccl", "include/cub/x.h", "cuda_cccl:include",
               'cuda_cccl:include:include/cccl/cub/x.h')), {})
    dot = diff.draw("dot")
    assert '"cuda_nvcc:bin" -> "cuda_nvcc:out" [label="2 members"];' in dot
    assert '"cuda_nvcc:include" -> "cuda_crt:include" [label="1 member"];' in dot
    assert '"cuda_cccl:include" -> "cuda_cccl:include" [label="1 member"];' in dot
    assert re.search(r'"cuda_crt:include" \[label="[^"]*output added", color="#1a7f37"', dot)
    mermaid = diff.draw("mermaid")
    assert "classDef added" in mermaid and "classDef removed" in mermaid
    assert '"' not in "".join(re.findall(r'\["(.*?)"\]', mermaid))  # quotes escaped
    with pytest.raises(ValueError, match="unknown graph format"):
        diff.draw("svg")
    _dot_parses(dot)
