"""The sink protocol and the path guard every sink uses."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO, Protocol

from cudasplit._layout import Layout, LayoutSpec
from cudasplit._model import PackageId
from cudasplit.errors import OutputError


class Sink(Protocol):
    """Receives placed members, output by output.

    ``dest`` is always a normalised relative POSIX path inside the output. A sink answers no
    questions during the run: it *declares* where its outputs end up (:attr:`layout`, read
    once before the first member) and is *told* the identity and resolved layout
    (:meth:`start`) before anything is written.
    """

    @property
    def layout(self) -> LayoutSpec:
        """Where the outputs live once :meth:`finish` has run (links, .pc, RUNPATH name it)."""
        ...

    def start(self, package: PackageId, layout: Layout) -> None:
        """Called once, before the first write, with the identity and the frozen layout."""
        ...

    def ensure_output(self, output: str) -> None: ...

    def write_file(self, output: str, dest: str, stream: BinaryIO, mode: int) -> None:
        """Write a member's bytes (streamed: members may be larger than 1 GB)."""
        ...

    def make_symlink(self, output: str, dest: str, target: str) -> None: ...

    def make_hardlink(self, output: str, dest: str, src_output: str, src_dest: str) -> None: ...

    def staged_path(self, output: str, dest: str) -> Path | None:
        """Staging, declared: where ``dest``'s bytes lie until :meth:`finish`, on this machine,
        so ELF files are patched there; None when the sink keeps no such file (no patching)."""
        ...

    def public_text(self, text: str) -> str:
        """``text`` (a problem message) naming final paths instead of staged ones."""
        ...

    def outputs(self) -> list[str]:
        """Outputs that exist so far (received a member or were ensured)."""
        ...

    def finish(self) -> None:
        """Make the result visible (move staging into place). Nothing looks finished before."""
        ...

    def abort(self) -> None:
        """Remove everything written so far that is not yet visible."""
        ...


def safe_join(root: Path, dest: str) -> Path:
    """``root/dest`` for a normalised relative ``dest``; refuses anything that would climb out."""
    parts = dest.split("/")
    bad_part = any(p in ("", ".", "..") for p in parts)
    if not dest or dest.startswith("/") or bad_part or "\x00" in dest:
        raise OutputError(f"refusing to write outside the output root: {dest!r}")
    return root.joinpath(*parts)
