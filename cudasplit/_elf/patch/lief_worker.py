"""Run LIEF in a child process with a memory cap: its aborts and segfaults cannot kill us.

LIEF (a C++ library) aborts or segfaults on some hostile inputs (``e_type = 7``, odd i386 files)
and needs about 3x the file size in memory. The parent validates the file first, then runs
``python -m cudasplit._elf.patch.lief_worker IN OUT CAP`` with the edit as JSON on stdin; the child
sets ``RLIMIT_AS`` to CAP before importing LIEF, and the parent enforces a time limit; a crash, a
limit or a LIEF error becomes one :class:`~cudasplit.errors.PatchError` line naming the file.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from typing import Any

from cudasplit._elf.patch.want import Want
from cudasplit.errors import PatchError

_BASE_MEMORY = 1 << 30  # interpreter + LIEF itself
_MEMORY_PER_BYTE = 4  # LIEF peaks near 3x the file (2.3 GB for the 749 MB cublasLt)
_BASE_SECONDS = 60
_SECONDS_PER_MB = 0.1


def memory_cap(size: int) -> int:
    return _BASE_MEMORY + _MEMORY_PER_BYTE * size


def run(src: str, dst: str, want: Want, size: int) -> None:
    """Write `src` with `want` applied to `dst` through LIEF in a capped child process."""
    spec = json.dumps({
        "runpath": _text(want.runpath), "tag": "RUNPATH" if want.path_tag == 29 else "RPATH",
        "interp": _text(want.interp), "renames": [[_text(o), _text(n)] for o, n in want.renames],
        "adds": [_text(a) for a in want.adds],
    })
    cap = memory_cap(size)
    timeout = _BASE_SECONDS + _SECONDS_PER_MB * size / 1e6
    try:
        # The child caps itself before importing LIEF (preexec_fn is unsafe with threads, and
        # the writer runs in threads).
        done = subprocess.run([sys.executable, "-m", "cudasplit._elf.patch.lief_worker", src, dst,
                               str(cap)], input=spec, capture_output=True, text=True,
                              timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise PatchError(f"{src}: LIEF did not finish within {timeout:.0f} s") from exc
    if done.returncode != 0:
        raise PatchError(f"{src}: LIEF failed ({_why(done.returncode, done.stderr, cap)})")


def _text(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "surrogateescape")


def _why(code: int, stderr: str, cap: int) -> str:
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    if code < 0:
        sig = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else code
        return f"killed by {sig}; memory cap {cap >> 20} MiB"
    return lines[-1][:300] if lines else f"exit {code}"


def _apply(src: str, dst: str, spec: dict[str, Any]) -> None:
    import lief  # slow to import and only needed for the odd file

    lief.logging.disable()
    binary = lief.ELF.parse(src)  # default ParserConfig: anything else loses data
    if binary is None:
        raise SystemExit("LIEF cannot parse the file")
    tag = lief.ELF.DynamicEntry.TAG
    if spec["runpath"] is not None:
        binary.remove(tag.RUNPATH)
        binary.remove(tag.RPATH)
        entry = (lief.ELF.DynamicEntryRunPath(spec["runpath"]) if spec["tag"] == "RUNPATH"
                 else lief.ELF.DynamicEntryRpath(spec["runpath"]))
        binary.add(entry)
    for old, new in spec["renames"]:
        lib = binary.get_library(old)
        if lib is not None:
            lib.name = new
    for name in spec["adds"]:
        binary.add_library(name)
    if spec["interp"] is not None:
        binary.interpreter = spec["interp"]
    binary.write(dst)  # default Builder config: partial configs corrupt symbol versions


def main(argv: list[str]) -> int:
    src, dst, cap = argv
    resource.setrlimit(resource.RLIMIT_AS, (int(cap), int(cap)))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a LIEF abort leaves no core file
    try:
        _apply(src, dst, json.loads(sys.stdin.read()))
    except MemoryError:
        print("out of memory (cap)", file=sys.stderr)
        return 3
    except Exception as exc:  # LIEF raises assorted native errors
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 3
    return 0 if os.path.exists(dst) else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
