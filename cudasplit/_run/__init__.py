"""The run's own small core, below every part that runs: jobs and cores, progress, the
defaults and accepted words the options show (driver link, bomb guards,
patchers), moving a member's bytes into a file (in the kernel where the stream can), and
the rule that what a command writes never overlaps what it reads (``overlap``).

It imports nothing of the package but the core (``errors``), so the CLI's help, the option
checks and every layer above (sources, ELF patching, splits, release tools, batches) use one
meaning of ``--jobs``, one progress voice and one patcher list.
"""

from __future__ import annotations

from cudasplit._run.defaults import (
    DEFAULT_DRIVER_LINK,
    DEFAULT_MAX_MEMBERS,
    DEFAULT_MAX_RATIO,
    DEFAULT_MAX_TOTAL_BYTES,
    PATCHERS,
)
from cudasplit._run.jobs import Cores, available_cpus, cgroup_cpu_limit, check_jobs, resolve_jobs
from cudasplit._run.overlap import refuse_overlap
from cudasplit._run.progress import (
    STEP,
    ByteGrid,
    MeteredStream,
    Progress,
    ProgressCallback,
    Tally,
    metered,
)
from cudasplit._run.transfer import copy_into, transfer, write_all

__all__ = [
    "DEFAULT_DRIVER_LINK",
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_MAX_RATIO",
    "DEFAULT_MAX_TOTAL_BYTES",
    "PATCHERS",
    "STEP",
    "ByteGrid",
    "Cores",
    "MeteredStream",
    "Progress",
    "ProgressCallback",
    "Tally",
    "available_cpus",
    "cgroup_cpu_limit",
    "check_jobs",
    "copy_into",
    "metered",
    "refuse_overlap",
    "resolve_jobs",
    "transfer",
    "write_all",
]
