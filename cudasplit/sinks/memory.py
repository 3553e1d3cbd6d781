"""An in-memory sink: fast core tests, no filesystem, no patching."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from ..layout import Layout, LayoutSpec
from ..model import OUTPUT_NAMES, PackageId
from .base import safe_join

_VIRTUAL = Path("/cudasplit-memory")


class MemorySink:
    def __init__(self) -> None:
        self.files: dict[tuple[str, str], bytes] = {}
        self.modes: dict[tuple[str, str], int] = {}
        self.symlinks: dict[tuple[str, str], str] = {}
        self.hardlinks: dict[tuple[str, str], tuple[str, str]] = {}
        self.dirs: set[tuple[str, str]] = set()
        self._outputs: list[str] = []
        self.finished = False
        self.aborted = False
        self.layout = LayoutSpec.fixed({name: _VIRTUAL / name for name in OUTPUT_NAMES})
        self.package: PackageId | None = None

    def start(self, package: PackageId, layout: Layout) -> None:
        self.package = package

    def output_root(self, output: str) -> str:
        return str(_VIRTUAL / output)

    def ensure_output(self, output: str) -> None:
        if output not in self._outputs:
            self._outputs.append(output)

    def write_file(self, output: str, dest: str, stream: BinaryIO, mode: int) -> Path | None:
        chunks = []
        while chunk := stream.read(1 << 20):
            chunks.append(chunk)
        return self.write_bytes(output, dest, b"".join(chunks), mode)

    def write_bytes(self, output: str, dest: str, data: bytes, mode: int) -> Path | None:
        safe_join(_VIRTUAL, dest)
        self.ensure_output(output)
        self.files[(output, dest)] = data
        self.modes[(output, dest)] = mode
        return None

    def make_dir(self, output: str, dest: str, mode: int) -> None:
        safe_join(_VIRTUAL, dest)
        self.ensure_output(output)
        self.dirs.add((output, dest))

    def make_symlink(self, output: str, dest: str, target: str) -> None:
        safe_join(_VIRTUAL, dest)
        self.ensure_output(output)
        self.symlinks[(output, dest)] = target

    def make_hardlink(self, output: str, dest: str, src_output: str, src_dest: str) -> None:
        safe_join(_VIRTUAL, dest)
        self.ensure_output(output)
        self.hardlinks[(output, dest)] = (src_output, src_dest)
        self.files[(output, dest)] = self.files[(src_output, src_dest)]

    def outputs(self) -> list[str]:
        return list(self._outputs)

    def finish(self) -> None:
        self.finished = True

    def abort(self) -> None:
        self.aborted = True
