"""``lib/<cudaMajor>/`` replaces ``lib/`` (Nixpkgs' ``unpackCudaLibSubdir``).

When the archive has ``lib/<cudaMajor>/``, Nixpkgs moves it into the place of ``lib/`` and
deletes everything else that was in ``lib/``: the other majors' directories and any file
directly in ``lib/``. A stream cannot take back what it already wrote, so :class:`LibMajor`
decides per member, in arrival order:

* ``lib/<cudaMajor>/x`` becomes ``lib/x``; ``lib/<other>/x`` is dropped (also when no
  ``lib/<cudaMajor>/`` exists, where Nixpkgs would ship a ``lib/<other>/`` nothing finds);
* any other ``lib/`` member that arrives after the first ``lib/<cudaMajor>/`` member is dropped;
* one that arrives before is *held* (its bytes spooled) when the package may carry several
  CUDA majors in one archive -- the redists outside the CUDA release itself (cuTENSOR,
  cuSPARSELt, cuDNN, ...) whose archive name has no ``_cudaNN`` suffix. Held members are placed
  when the stream ends without a ``lib/<cudaMajor>/``, dropped when one arrives;
* otherwise (CUDA release components, per-major ``_cudaNN`` archives: one layout, no
  ``lib/<major>/``) it is placed at once. If a ``lib/<cudaMajor>/`` still follows, the files
  already placed cannot be taken back: :meth:`late` names them and the run reports a problem.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from typing import BinaryIO, cast

from cudasplit._model import Member, MemberType

__all__ = ["Held", "LibMajor"]

_MAJOR_DIR = re.compile(r"^lib/(\d{2})/")
_MAJOR_DIR_ITSELF = re.compile(r"^lib/\d{2}/?$")
_SPOOL_IN_MEMORY = 1 << 20


def _in_lib(path: str) -> bool:
    """A member under ``lib/`` that is not itself in a ``lib/<NN>/`` directory."""
    return (path.startswith("lib/") and _MAJOR_DIR.match(path) is None
            and _MAJOR_DIR_ITSELF.match(path) is None)


@dataclass(slots=True)
class Held:
    """A member waiting for the end of the stream; ``spool`` holds a regular file's bytes."""

    member: Member
    spool: BinaryIO | None


@dataclass(slots=True)
class LibMajor:
    """The ``lib/<cudaMajor>/`` decisions of one run (see the module docstring). ``major``
    None: unknown, no lifting at all."""

    major: str | None = None
    hold: bool = False
    seen: bool = False                       # a lib/<major>/ member has arrived
    held: list[Held] = field(default_factory=list)
    placed: list[str] = field(default_factory=list)  # lib/ members placed before `seen`
    _late: list[str] = field(default_factory=list)
    # major unknown: the lib/<NN>/ directories kept as they are (first member of each)
    unlifted: dict[str, str] = field(default_factory=dict)

    def should_hold(self, member: Member, path: str) -> bool:
        if not self.hold or self.major is None or self.seen:
            return False
        if member.type is MemberType.HARDLINK and any(
                h.member.path == member.link for h in self.held):
            return True  # tar links name an earlier member: keep the order on replay
        return _in_lib(path) and member.type is not MemberType.DIR

    def keep(self, member: Member, stream: BinaryIO | None) -> None:
        """Hold ``member``: its bytes are read now, the stream moves on."""
        spool: BinaryIO | None = None
        if stream is not None:
            # Outlives this call: closed by the pipeline once the member is replayed.
            spool = cast(BinaryIO, tempfile.SpooledTemporaryFile(  # noqa: SIM115
                max_size=_SPOOL_IN_MEMORY))
            shutil.copyfileobj(stream, spool)
            spool.seek(0)
        self.held.append(Held(member, spool))

    def release(self) -> list[Held]:
        """The held members, in arrival order; later calls hold nothing more."""
        held, self.held, self.hold = self.held, [], False
        return held

    def arrive(self, member: Member, path: str) -> None:
        """Note a member that is not held (``path``: its lifted archive path)."""
        match = _MAJOR_DIR.match(path)
        if self.major is None:
            if match is not None:
                self.unlifted.setdefault(match[1], path)
            return
        if match is not None and match[1] == self.major and not self.seen:
            self.seen = True
            self._late = list(self.placed)
        elif _in_lib(path) and not self.seen and member.type is not MemberType.DIR:
            self.placed.append(path)

    def route(self, path: str) -> tuple[str, str | None]:
        """``(path to place, reason to drop it or None)`` for a lifted archive path; pure."""
        if self.major is None:
            return path, None
        match = _MAJOR_DIR.match(path)
        if match is not None:
            if match[1] != self.major:
                return path, f"built for CUDA {match[1]}, not {self.major}"
            return "lib/" + path[match.end():], None
        if _in_lib(path) and self.seen:
            return path, f"lib/{self.major}/ replaces lib/ (as Nixpkgs)"
        return path, None

    def unlifted_warning(self) -> tuple[str, str] | None:
        """(first member, message) when ``lib/<NN>/`` directories stayed where they were
        because the CUDA major is unknown: nothing finds ``lib/12/libx.so``."""
        if not self.unlifted:
            return None
        majors = sorted(self.unlifted)
        dirs = " and ".join(f"lib/{m}/" for m in majors)
        return (self.unlifted[majors[0]],
                f"{dirs} kept as they are: the CUDA major is unknown (no _cudaNN archive "
                f"suffix, cuda_version or cuda_major); Nixpkgs lifts lib/<cudaMajor>/ "
                f"into lib/ and drops the others: give it (cuda_major "
                f"{'|'.join(majors)})")

    def late(self) -> list[str]:
        """``lib/`` members placed before a ``lib/<major>/`` arrived (reported once)."""
        late, self._late = self._late, []
        return late
