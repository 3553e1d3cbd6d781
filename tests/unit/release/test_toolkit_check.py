"""``scripts/toolkit-check`` end to end on a tiny installed "toolkit" (no GPU needed).

The tree holds a library linked by lld (page-padded RELRO, TLS), one by bfd, and an executable
in ``bin/`` that needs the bfd one through ``$ORIGIN/../lib``: all are split, none refused,
each loads/answers before, after the split and after ``strip --strip-debug``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import REPO

ROOT = REPO

pytestmark = pytest.mark.skipif(shutil.which("ld.lld") is None or shutil.which("strip") is None,
                                reason="needs lld and strip")


def _cc(*args: str) -> None:
    subprocess.run(["gcc", *args], check=True)


def test_toolkit_check_on_a_tiny_tree(tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.c").write_text("__thread int t = 1; __thread int z; int g;\n"
                             "int *const p = &g;\nint a(void){return t + z + *p;}\n")
    (src / "b.c").write_text("int b(void){return 2;}\n")
    (src / "m.c").write_text('#include <stdio.h>\nint b(void);\n'
                             'int main(void){printf("tool %d\\n", b()); return 0;}\n')
    kit = tmp_path / "cuda"
    (kit / "lib").mkdir(parents=True)
    (kit / "bin").mkdir()
    _cc("-shared", "-fPIC", "-fuse-ld=lld", "-Wl,-z,relro,-z,now", "-g", "-o",
        str(kit / "lib/liba.so.1"), str(src / "a.c"))
    _cc("-shared", "-fPIC", "-g", "-Wl,-soname,libb.so.1", "-o", str(kit / "lib/libb.so.1"),
        str(src / "b.c"))
    _cc("-o", str(kit / "bin/tool"), str(src / "m.c"), str(kit / "lib/libb.so.1"),
        "-Wl,-rpath,$ORIGIN/../lib")
    out = tmp_path / "summary.json"
    done = subprocess.run([sys.executable, str(ROOT / "scripts/toolkit-check"), "--root",
                           str(kit), "--work", str(tmp_path / "work"), "--jobs", "2",
                           "--json", str(out)], capture_output=True, text=True, check=False,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    summary = json.loads(out.read_text())
    assert summary["refused"] == [] and summary["broken"] == {}
    assert summary["libraries"] == summary["libraries_loading_before"] == 2
    assert summary["executables"] == summary["executables_answering_before"] == 1
    assert summary["kernel"] in ("no GPU here (not run)", "no split libcudart or no nvcc")
