"""Moving staged outputs into place, all or nothing.

--overwrite moves the old outputs aside first; a failure rolls back and restores them; after
success what was replaced is removed.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from cudasplit._sinks.placement import translate
from cudasplit._sinks.staging import PREVIOUS_DIR, STAGING_PREFIX, remove_dir

__all__ = ["Promotion"]

log = logging.getLogger("cudasplit")


class Promotion:
    """The renames of one :meth:`DirectorySink.finish`, remembered so they can be undone.

    ``final`` maps every configured output to its final root; the new outputs are
    ``staging/<output>``. Old outputs wait in ``staging/.previous`` until the run succeeded.
    """

    def __init__(self, staging: Path, final: Mapping[str, Path]) -> None:
        self._staging = staging
        self._final = final
        self._previous = staging / PREVIOUS_DIR
        self._aside: list[tuple[Path, Path]] = []   # (old final, where it waits in staging)
        self._moved: list[tuple[Path, Path]] = []   # (new final, its staging path)

    def move_aside(self) -> None:
        """--overwrite: every existing output directory (also those this run does not
        produce) is renamed into staging first, so a failure can put it back untouched."""
        previous = self._previous
        for name, final in self._final.items():
            if not os.path.lexists(final):
                continue
            with translate(previous):
                previous.mkdir(exist_ok=True)
            with translate(final):
                os.rename(final, previous / name)
            self._aside.append((final, previous / name))

    def move_in(self, output: str) -> None:
        final, work = self._final[output], self._staging / output
        with translate(final):
            os.rename(work, final)
        self._moved.append((final, work))

    def roll_back(self) -> bool:
        """New outputs back to staging, old ones back into place. False when an old output
        could not be put back: then the staging dir holding it must be kept (it is named)."""
        lost = []
        for final, work in reversed(self._moved):
            try:
                os.rename(final, work)
            except OSError:
                shutil.rmtree(final, ignore_errors=True)
        for final, waiting in reversed(self._aside):
            try:
                os.rename(waiting, final)
            except OSError:
                lost.append(str(waiting))
        if lost:
            # Never delete what we could not put back: keep the staging dir and say where.
            log.error("previous outputs could not be moved back; they are in %s",
                      ", ".join(lost))
        return not lost

    def discard(self) -> None:
        """After success: delete the replaced outputs and the staging dir."""
        _remove_previous(self._previous, self._staging)
        remove_dir(self._staging)


def _remove_previous(previous: Path, staging: Path) -> None:
    """Delete the outputs --overwrite replaced. What cannot be deleted (an immutable file) is
    moved out of the staging dir, so the finished run leaves no staging dir behind."""
    shutil.rmtree(previous, ignore_errors=True)
    if not os.path.lexists(previous):
        return
    leftover = staging.parent / (".cudasplit-previous-" + staging.name[len(STAGING_PREFIX):])
    try:
        os.rename(previous, leftover)
    except OSError:
        leftover = previous
    log.warning("%s: could not remove all of the previous outputs this run replaced "
                "(overwrite); remove it by hand", leftover)

