"""The sink protocol and the path guard every sink uses."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO, Protocol

from ..errors import OutputError


class Sink(Protocol):
    """Receives placed members, output by output.

    ``dest`` is always a normalised relative POSIX path inside the output. ``output_root``
    is the *final* absolute location of an output (after any staging), used for links that
    cross outputs, ``.pc`` rewrites and RUNPATH entries.
    """

    def output_root(self, output: str) -> str: ...

    def ensure_output(self, output: str) -> None: ...

    def write_file(self, output: str, dest: str, stream: BinaryIO, mode: int) -> Path | None:
        """Write a member's bytes; returns a local path that may be patched, if the sink has one."""
        ...

    def write_bytes(self, output: str, dest: str, data: bytes, mode: int) -> Path | None: ...

    def make_dir(self, output: str, dest: str, mode: int) -> None: ...

    def make_symlink(self, output: str, dest: str, target: str) -> None: ...

    def make_hardlink(self, output: str, dest: str, src_output: str, src_dest: str) -> None: ...

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
