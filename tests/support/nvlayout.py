"""gcc-built files with NVIDIA's layout, so the default suite catches what real wheels showed.

NVIDIA's libraries (cupti, nvperf, cudart, ...) have no ``PT_PHDR``, at most one ``PT_NOTE``
(the build-id) placed right after the program header table, ``.dynstr`` before ``.text``, and no
spare program header slot: the append tier must reuse the note or move the sections that follow
the table. ``libnvperf_host.so`` has no ``PT_NOTE`` at all. NVIDIA's executables (ptxas, nvcc)
are non-PIE ``ET_EXEC`` with ``.interp`` right after the table.

    build_nvlike(dest) -> {"note": lib, "nonote": lib, "user": lib needing "note", "exe": exe}

Each file is checked with ``readelf`` to really have the layout (a toolchain change fails loudly
instead of silently testing something else).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

LIB_C = """
#include <string.h>
static const char *names[] = {"cuptiGetVersion", "cuptiSubscribe", "nvperfInit"};
int nv_value(int i) { return (int)strlen(names[i % 3]) + 27; }
"""
USER_C = "int nv_value(int);\nint nv_user(void){ return nv_value(0) + 0; }\n"
EXE_C = """
#include <stdio.h>
#include <string.h>
int nv_value(int);
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) { printf("nvlike 1.0\\n"); return 0; }
    return nv_value(0) == 42 ? 0 : 1;
}
"""
# No CET/property notes (NVIDIA's toolchain emits none), no separate-code padding pages.
_COMMON = ("-fcf-protection=none", "-Wl,-z,noseparate-code", "-O1")


def _cc(out: Path, src: str, *flags: str) -> Path:
    c = out.with_suffix(out.suffix + ".c")
    c.write_text(src)
    subprocess.run(["gcc", str(c), "-o", str(out), *_COMMON, *flags], check=True,
                   capture_output=True)
    return out


def _segments(path: Path) -> list[str]:
    out = subprocess.run(["readelf", "-lW", str(path)], capture_output=True, text=True,
                         check=True).stdout
    rows = out.split("Program Headers:")[1].split("Section to Segment")[0].splitlines()
    return [r.split()[0] for r in rows[2:] if r.strip() and not r.strip().startswith("[")]


def _first_after_table(path: Path) -> str:
    """Name of the section that starts right after the program header table."""
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True,
                         check=True).stdout
    rows = [r.split("]", 1)[1].split() for r in out.splitlines() if r.strip().startswith("[")
            and "]" in r and not r.strip().startswith("[Nr]")]
    live = [(int(r[3], 16), r[0]) for r in rows if len(r) > 4 and r[0] and int(r[2], 16)]
    return min(live)[1]


def have_gcc() -> bool:
    return shutil.which("gcc") is not None and shutil.which("readelf") is not None


def build_nvlike(dest: Path) -> dict[str, Path]:
    dest.mkdir(parents=True, exist_ok=True)
    note = _cc(dest / "libnvnote.so.1", LIB_C, "-shared", "-fPIC", "-nostartfiles",
               "-Wl,--build-id", "-Wl,-soname,libnvnote.so.1")
    nonote = _cc(dest / "libnvnonote.so.1", LIB_C, "-shared", "-fPIC", "-nostartfiles",
                 "-Wl,--build-id=none", "-Wl,-soname,libnvnonote.so.1")
    user = _cc(dest / "libnvuser.so.1", USER_C, "-shared", "-fPIC", "-nostartfiles",
               "-Wl,--build-id", f"-L{dest}", "-l:libnvnote.so.1")
    exe = _cc(dest / "nvexe", EXE_C, "-no-pie", "-Wl,--build-id=none", f"-L{dest}",
              "-l:libnvnote.so.1")
    for lib in (note, user):
        segs = _segments(lib)
        assert "PHDR" not in segs and segs.count("NOTE") == 1, segs
        assert _first_after_table(lib) == ".note.gnu.build-id", _first_after_table(lib)
    assert "NOTE" not in _segments(nonote) and "PHDR" not in _segments(nonote)
    assert _first_after_table(exe) == ".interp"
    return {"note": note, "nonote": nonote, "user": user, "exe": exe}
