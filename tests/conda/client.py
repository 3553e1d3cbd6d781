"""A real conda client for the tests: py-rattler indexes a channel, solves and installs.

Offline: the local channel is the only source. The virtual packages the packages' depends name
(``__glibc``) are this machine's, as a conda client detects them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


async def index(channel: Path) -> None:
    """``repodata.json`` for every subdir of ``channel`` (rattler's indexer)."""
    import rattler

    await rattler.index.index_fs(channel, write_zst=False, write_shards=False)


async def install(channel: Path, specs: list[str], prefix: Path, cache: Path,
                  subdir: str = "linux-64") -> list[Any]:
    """Solve ``specs`` from ``channel`` alone (indexed first if it is not) and install them
    into the fresh ``prefix``; the records installed."""
    import rattler

    if not (channel / subdir / "repodata.json").exists():
        await index(channel)
    records = await rattler.solve([rattler.Channel(str(channel))], specs,
                                  platforms=[subdir, "noarch"],
                                  virtual_packages=rattler.VirtualPackage.detect())
    await rattler.install(records, prefix, cache_dir=cache, show_progress=False)
    return list(records)
