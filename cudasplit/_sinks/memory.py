"""An in-memory result: every output as dicts, after the same staging and patching as a split.

Members are staged on disk like in every sink (a member may be larger than memory, and ELF
files are patched in place), then :meth:`MemorySink.finish` reads the stage into
:attr:`files` / :attr:`symlinks` and removes it.
"""

from __future__ import annotations

import os
from pathlib import Path

from cudasplit._argcheck import checked
from cudasplit._layout import LayoutSpec
from cudasplit._model import OUTPUT_NAMES
from cudasplit._sinks.staged import StagedSink

_VIRTUAL = Path("/cudasplit-memory")


class MemorySink(StagedSink):
    """Every output of a split in memory, as dicts keyed by ``(output, path)``: the files as a
    split writes them (ELF files patched, ``.pc`` files rewritten), read back from a staging
    directory when the split finishes (so a member may be larger than memory while it is
    split). ``layout`` defaults to ``/cudasplit-memory/<output>`` (nothing is ever written
    there; RUNPATHs and ``.pc`` files name those roots).

    Args:
        layout: the declared roots (default ``/cudasplit-memory/<output>``).

    Attributes:
        files: ``(output, path)`` -> the file's bytes, path relative to the output's root
            (``("lib", "lib/libcudart.so.12.9.79")``); set by :meth:`finish`.
        modes: ``(output, path)`` -> the file's permission bits (``0o755``).
        symlinks: ``(output, path)`` -> the link's target as written (``libcudart.so.12``).
        hardlinks: ``(output, path)`` -> ``(output, path)`` of the file it is a hard link to
            (both names are in ``files`` too, with the same bytes).
        finished: ``True`` once :meth:`finish` has read the outputs (a successful split).
        aborted: ``True`` when the split failed; the other attributes are then incomplete.

    Raises:
        Nothing.
    """

    stage_prefix = "cudasplit-memory-"

    @checked
    def __init__(self, layout: LayoutSpec | None = None) -> None:
        super().__init__(layout or LayoutSpec.fixed({n: _VIRTUAL / n for n in OUTPUT_NAMES},
                                                    _VIRTUAL))
        self.files: dict[tuple[str, str], bytes] = {}
        self.modes: dict[tuple[str, str], int] = {}
        self.symlinks: dict[tuple[str, str], str] = {}
        self.hardlinks: dict[tuple[str, str], tuple[str, str]] = {}
        self.finished = False
        self.aborted = False
        self._final_outputs: list[str] = []

    def make_hardlink(self, output: str, dest: str, src_output: str, src_dest: str) -> None:
        super().make_hardlink(output, dest, src_output, src_dest)
        self.hardlinks[(output, dest)] = (src_output, src_dest)

    def outputs(self) -> list[str]:
        return super().outputs() if self.staged else list(self._final_outputs)

    def finish(self) -> None:
        for output in self.outputs():
            self._read_output(output, self.stage_root(output))
        self._final_outputs = self.outputs()
        self.discard_stage()
        self.finished = True

    def abort(self) -> None:
        super().abort()
        self.aborted = True

    def _read_output(self, output: str, root: Path) -> None:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in sorted(dirnames + filenames):
                path = Path(dirpath, name)
                dest = path.relative_to(root).as_posix()
                if path.is_symlink():
                    self.symlinks[(output, dest)] = os.readlink(path)
                elif path.is_file():
                    self.files[(output, dest)] = path.read_bytes()
                    self.modes[(output, dest)] = path.stat().st_mode & 0o7777
