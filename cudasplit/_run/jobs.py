"""Jobs and cores: the one meaning of ``--jobs`` for every command, the CPUs a process may use,
and a budget of cores that several sources share in a fixed order.

``-j N`` (``jobs=N`` in the API) is the most workers a command runs at once: decoder threads
(``xz -TN``'s N), ELF patch workers, hashing threads, scanning processes. The one thread that
reads the tar stream and writes the files runs beside them, as ``tar`` runs beside
``xz -TN``. ``0`` or unset means every CPU this process may use (:func:`available_cpus`):
the smallest of

* the affinity mask (``taskset``, a container's cpuset), ``os.sched_getaffinity``;
* the cgroup CPU quota (``docker --cpus``, systemd's ``CPUQuota``): ``cpu.max`` of the
  process' cgroup and its parents (cgroup v2), or ``cpu.cfs_quota_us`` (v1), rounded up;
* ``NIX_BUILD_CORES`` inside a Nix build, when it is above 0 (0 there means "all").

A command may use fewer than N where more would not help (a tarball of two xz blocks has two
decoder threads), never more. A batch shares N as a budget of cores (:class:`Cores`), each
source counting its writer.
"""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from cudasplit.errors import OptionsError, OptionsTypeError

__all__ = ["Cores", "available_cpus", "cgroup_cpu_limit", "check_jobs", "resolve_jobs"]

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")


def check_jobs(value: object, name: str = "jobs") -> None:
    """``None``, ``0`` (every available CPU) or a positive count; else the error naming
    ``name`` (``--jobs`` on the command line)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionsTypeError(f"{name} must be an integer, not {type(value).__name__} "
                               f"{value!r}")
    if value < 0:
        raise OptionsError(f"{name} must be 0 (every available CPU) or a positive count, "
                           f"not {value}")


def resolve_jobs(jobs: int | None, env: Mapping[str, str] | None = None) -> int:
    """The cores ``jobs`` stands for: itself when positive, else :func:`available_cpus`."""
    check_jobs(jobs)
    return jobs if jobs else available_cpus(env)


def available_cpus(env: Mapping[str, str] | None = None, *,
                   cgroup_root: Path = CGROUP_ROOT,
                   self_cgroup: Path = PROC_SELF_CGROUP) -> int:
    """CPUs this process may use: the smallest of its affinity mask, its cgroup CPU quota and
    ``NIX_BUILD_CORES`` (when above 0); at least 1."""
    env = os.environ if env is None else env
    cpus = _affinity()
    quota = cgroup_cpu_limit(cgroup_root, self_cgroup)
    if quota is not None:
        cpus = min(cpus, quota)
    cores = env.get("NIX_BUILD_CORES", "").strip()
    # ASCII digits only ("²".isdigit() is true and int() refuses it), at most 6 of them.
    if cores.isascii() and cores.isdigit() and len(cores) <= 6 and int(cores) > 0:
        cpus = min(cpus, int(cores))
    return max(1, cpus)


def _affinity() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not Linux
        return max(1, os.cpu_count() or 1)


def cgroup_cpu_limit(cgroup_root: Path = CGROUP_ROOT,
                     self_cgroup: Path = PROC_SELF_CGROUP) -> int | None:
    """CPUs the cgroup quota allows (rounded up), or ``None`` without a quota.

    cgroup v2: the tightest ``cpu.max`` (``QUOTA PERIOD`` or ``max PERIOD``) of the process'
    cgroup and every parent, as ``/proc/self/cgroup`` names it (``0::/PATH``). cgroup v1:
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us`` of the ``cpu`` controller (-1: none).
    Anything unreadable or malformed is no quota: a hint never fails a run.
    """
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    limits: list[int] = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            limits += _v2_limits(cgroup_root, path)
        elif "cpu" in controllers.split(","):
            limits += _v1_limits(cgroup_root / controllers, path)
    if not lines:  # no /proc (a sandbox): the root's own file, if any
        limits += _v2_limits(cgroup_root, "/")
    return min(limits) if limits else None


def _v2_limits(root: Path, path: str) -> list[int]:
    found = []
    directory = root / path.strip("/")
    while True:
        limit = _quota(_read(directory / "cpu.max"))
        if limit is not None:
            found.append(limit)
        if directory == root or root not in directory.parents:
            return found
        directory = directory.parent


def _v1_limits(controller_root: Path, path: str) -> list[int]:
    # A container sees its own cgroup as the controller's root; a host process its full path.
    for directory in (controller_root / path.strip("/"), controller_root):
        quota, period = (_read(directory / "cpu.cfs_quota_us"),
                         _read(directory / "cpu.cfs_period_us"))
        if quota and period:
            return [n] if (n := _quota(f"{quota} {period}")) is not None else []
    return []


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except (OSError, ValueError):
        return ""


def _quota(text: str) -> int | None:
    """``"150000 100000"`` -> 2; ``"max 100000"``, ``"-1 100000"``, garbage -> None."""
    parts = text.split()
    if len(parts) != 2:
        return None
    quota, period = parts
    if not (quota.isdigit() and period.isdigit()) or int(period) == 0 or int(quota) == 0:
        return None
    return max(1, math.ceil(int(quota) / int(period)))


class Cores:
    """A budget of ``total`` cores that several sources share, started in a fixed order.

    :meth:`take` waits for the caller's turn (``turn``: 0, 1, 2, ... in the order the caller
    decided, e.g. largest source first) and then for its cores: a turn starts once the cores
    it wants are free, or when nothing else runs (so one wanting more than there are still
    starts). Turns never overtake each other, so which source starts when does not depend on
    which worker thread happened to ask first.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self._free = total
        self._running = 0
        self._next_turn = 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def take(self, want: int, turn: int | None = None) -> Iterator[Callable[[], None]]:
        """Hold ``want`` cores (in ``turn``, or whenever they are free when ``turn`` is None)
        until the block ends, or until the ``release()`` it is given is called (a source whose
        decoder has finished: what is left of its split is a short tail, overlapped with the
        next source's decoding)."""
        with self._changed:
            self._changed.wait_for(lambda: (turn is None or turn == self._next_turn)
                                   and (self._free >= want or self._running == 0))
            self._free -= want
            self._running += 1
            if turn is not None:
                self._next_turn += 1
                self._changed.notify_all()  # the next turn may fit beside this one
        held = [True]

        def release() -> None:
            with self._changed:
                if held[0]:
                    held[0] = False
                    self._free += want
                    self._running -= 1
                    # Waiters want different numbers of cores: each checks for itself.
                    self._changed.notify_all()
        try:
            yield release
        finally:
            release()
