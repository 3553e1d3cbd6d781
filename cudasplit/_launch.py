"""The ``cudasplit`` program's first step: a split's decoder starts before the CLI loads.

From the moment the interpreter runs the entry point to the moment the CLI would start the
decoder, click, the command's module, the API and the sources load (tens of milliseconds; on
the 16-core host as much as a tenth of a zstd split of libcublas). ``tar`` starts its decoder in
a millisecond. So for ``cudasplit split TARBALL [options]`` the command line is read here,
without click, only as far as it must be: the one source and ``-j``. Anything unusual (several
sources, a directory, ``-``, a memory limit, an option this table does not know) starts
nothing, and the split starts its decoder itself, as it always does; a decoder started here
that the split would not run exactly so (other bomb limits, say) is killed and replaced
(:func:`~cudasplit._source.codecs.start_early`). Parsing is still click's, in full, after.

``tests/cli/test_launch.py`` checks :data:`VALUE_OPTIONS` against the ``split`` command's own
options, so the two cannot drift apart.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys

__all__ = ["VALUE_OPTIONS", "early_split_source", "run"]

# The options of ``cudasplit split`` that take a value (every other option is a flag).
VALUE_OPTIONS = frozenset({
    "--append-runpath", "--cuda-compat", "--cuda-component-hook", "--cuda-major",
    "--cuda-version", "--driver-link", "--glibc-version", "--ignore-missing", "--interpreter",
    "--jobs", "--library-path", "--max-glibc", "--max-members", "--max-ratio", "--max-size",
    "--memory-limit", "--output-dir", "--outputs", "--package", "--package-root", "--patcher",
    "--platform", "--profile", "--python-version", "--report", "--rules", "--strip-components",
    "--tag", "--target-platform", "-j", "-o",
})
# Options after which the split's decoder is not the default one: nothing is started early.
_NOT_DEFAULT = frozenset({"--memory-limit", "--max-size", "--max-ratio", "--max-members"})


def early_split_source(args: list[str]) -> tuple[str, int | None] | None:
    """``(tarball, jobs)`` of a ``split`` command line with one regular file as its source
    (``jobs`` None: not given), or None for any other command line."""
    if not args or args[0] != "split":
        return None
    sources: list[str] = []
    jobs: str | None = None
    rest = iter(args[1:])
    for arg in rest:
        if arg == "--":
            sources.extend(rest)
            break
        if arg.startswith("--"):
            name, has_value, value = arg.partition("=")
            if name in _NOT_DEFAULT:
                return None
            if name in VALUE_OPTIONS and not has_value:
                value = next(rest, "")
            if name == "--jobs":
                jobs = value
        elif arg.startswith("-") and len(arg) > 1:
            name, value = arg[:2], arg[2:]
            if name in VALUE_OPTIONS:
                if not value:
                    value = next(rest, "")
                if name == "-j":
                    jobs = value
            elif len(arg) > 2:
                return None   # clustered short flags: left to click
        else:
            sources.append(arg)
    if len(sources) != 1 or (jobs is not None and not jobs.isdigit()):
        return None
    try:
        if not stat.S_ISREG(os.stat(sources[0]).st_mode):
            return None
    except (OSError, ValueError):
        return None
    return sources[0], None if jobs is None else int(jobs)


def run() -> None:
    """Console entry point: a split's decoder started early, then the CLI."""
    early = early_split_source(sys.argv[1:])
    if early is not None:
        from cudasplit._run import resolve_jobs
        from cudasplit._source import start_decoding

        path, jobs = early
        # Whatever goes wrong here, the split starts its own decoder and says why.
        with contextlib.suppress(Exception):
            start_decoding(path, jobs=resolve_jobs(jobs or None))
    from cudasplit.cli import run as cli_run

    cli_run()
