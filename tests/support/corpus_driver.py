"""Runs the cudasplit CLI once per input, each in its own forked process, and measures it.

Started by tests/test_hostile_corpus.py as a fresh interpreter (so the measured memory is the
CLI's, not pytest's). Reads one JSON list of runs on stdin: ``{"argv": [...], "stderr": path}``;
prints one JSON line per run: ``{"rc": exit status or -signal, "wall": seconds, "maxrss":
bytes}``. Each run forks after ``cudasplit.cli`` is imported (a fresh ``python -m cudasplit``
per input would cost ~0.2 s of CPU each, for 150+ inputs), then calls the console entry point
``cudasplit.cli.run`` with ``sys.argv`` set, as the installed ``cudasplit`` command does. A
native crash kills only that child; a hang is killed by SIGALRM after ``HARD_LIMIT_S``.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sys
import time

HARD_LIMIT_S = 60


def _child(argv: list[str], stderr_path: str) -> None:
    from cudasplit.cli import run
    err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(err, 2)
    sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115 - lives as long as the process
    sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
    sys.argv = ["cudasplit", *argv]
    signal.alarm(HARD_LIMIT_S)
    code = 0
    try:
        run()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        import traceback
        traceback.print_exc()
        code = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main() -> None:
    import cudasplit.cli  # noqa: F401 - imported once, before the forks
    runs = json.load(sys.stdin)
    for spec in runs:
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _child(spec["argv"], spec["stderr"])
        _, status, usage = os.wait4(pid, 0)
        wall = time.monotonic() - start
        rc = os.waitstatus_to_exitcode(status)
        print(json.dumps({"rc": rc, "wall": wall, "maxrss": usage.ru_maxrss * 1024}),
              flush=True)


if __name__ == "__main__":
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a crash must not leave core files
    main()
