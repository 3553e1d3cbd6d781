"""A sink that stages every member in a private directory; subclasses only implement finish().

Placement, link and hostile-input rules are the :class:`DirectorySink`'s (it writes into the
private stage, with no second staging level), so ELF files can be patched in the stage like in
any split. A subclass turns the finished stage into its result in :meth:`StagedSink.finish`
(pack archives, read into memory, upload, ...) and reads it with :meth:`stage_root`.
"""

from __future__ import annotations

import tempfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import BinaryIO

from cudasplit._argcheck import checked
from cudasplit._layout import Layout, LayoutSpec
from cudasplit._model import OUTPUT_NAMES, PackageId
from cudasplit._sinks.directory import DirectorySink
from cudasplit._sinks.staging import record_owner, remove_dir
from cudasplit.errors import OutputError

__all__ = ["StagedSink"]


class StagedSink(ABC):
    """The whole :class:`~cudasplit.sinks.Sink` protocol but :meth:`finish`.

    Args:
        layout: where the outputs will live.
        staging_parent: where the staging directory is made (default: a temporary directory).

    Raises:
        OutputError: the staging directory cannot be made or written.
    """

    stage_prefix = ".cudasplit-stage-"

    @checked
    def __init__(self, layout: LayoutSpec, staging_parent: Path | None = None) -> None:
        self.layout = layout
        self.package: PackageId | None = None
        self._staging_parent = staging_parent
        self._stage_dir: Path | None = None
        self._inner_sink: DirectorySink | None = None
        self._final: Layout | None = None   # told by start()

    # -- what subclasses use -------------------------------------------------------------------

    @abstractmethod
    def finish(self) -> None:
        """Turn the staged outputs into the result, then :meth:`discard_stage`."""

    def stage_parent(self) -> Path | None:
        """Where the stage is made (None: the system temp dir); may create it."""
        return self._staging_parent

    @property
    def staged(self) -> bool:
        """True once anything was written (the stage exists)."""
        return self._inner_sink is not None

    def stage_root(self, output: str) -> Path:
        return self._stage / output

    def discard_stage(self) -> None:
        if self._stage_dir is not None:
            remove_dir(self._stage_dir)  # renamed to trash first: a kill leaves only trash
            self._stage_dir, self._inner_sink = None, None

    # -- protocol ------------------------------------------------------------------------------

    def start(self, package: PackageId, layout: Layout) -> None:
        self.package = package
        self._final = layout

    def ensure_output(self, output: str) -> None:
        self._inner.ensure_output(output)

    def write_file(self, output: str, dest: str, stream: BinaryIO, mode: int) -> None:
        self._inner.write_file(output, dest, stream, mode)

    def make_symlink(self, output: str, dest: str, target: str) -> None:
        self._inner.make_symlink(output, dest, target)

    def make_hardlink(self, output: str, dest: str, src_output: str, src_dest: str) -> None:
        self._inner.make_hardlink(output, dest, src_output, src_dest)

    def outputs(self) -> list[str]:
        return self._inner.outputs() if self.staged else []

    def staged_path(self, output: str, dest: str) -> Path | None:
        return self._inner.staged_path(output, dest)

    def public_text(self, text: str) -> str:
        """Staged paths in ``text`` named as where the output will live (the stage is gone
        when a problem message is read)."""
        if self._stage_dir is None or self._final is None:
            return text
        for output in self.outputs():
            text = text.replace(f"{self.stage_root(output)}/", f"{self._final.root(output)}/")
        return text

    def abort(self) -> None:
        self.discard_stage()

    # -- the stage -----------------------------------------------------------------------------

    @property
    def _stage(self) -> Path:
        # Created on the first write: a source that cannot be read leaves nothing behind.
        if self._stage_dir is None:
            parent = self.stage_parent()
            try:
                self._stage_dir = Path(tempfile.mkdtemp(prefix=self.stage_prefix, dir=parent))
            except OSError as exc:
                raise OutputError(f"{parent or tempfile.gettempdir()}: cannot create staging "
                                  f"directory ({exc.strerror})") from exc
            if parent is not None:  # a later run there removes it if this one is killed
                record_owner(self._stage_dir)
        return self._stage_dir

    @property
    def _inner(self) -> DirectorySink:
        if self._inner_sink is None:
            stage = self._stage
            self._inner_sink = DirectorySink({name: stage / name for name in OUTPUT_NAMES},
                                             base=stage)
        return self._inner_sink
