"""The defaults and accepted words of a run's options that the help shows: the driver link,
the bomb guards, the ELF writers (``--patcher``).

They live here, at the bottom of the house, so that ``cudasplit split --help`` and the option
checks need nothing of the ELF planner, the sources or the patcher to say them; the parts that
use them (``_elf.plan``, ``_source.limits``, ``_elf.patch``) import them from here.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_DRIVER_LINK",
    "DEFAULT_MAX_MEMBERS",
    "DEFAULT_MAX_RATIO",
    "DEFAULT_MAX_TOTAL_BYTES",
    "PATCHERS",
]

# Where NixOS (and Nixpkgs' addDriverRunpath) puts the driver: <link>/lib joins every RUNPATH.
DEFAULT_DRIVER_LINK = "/run/opengl-driver"

# Decompression bomb guard defaults (``--max-size`` / ``--max-ratio`` raise them).
DEFAULT_MAX_TOTAL_BYTES = 64 << 30
DEFAULT_MAX_RATIO = 200.0
# Member count guard (``--max-members``). The largest redistributables hold a few thousand
# members (cuda_cccl 13.0: 1,845 entries; nsight's Qt and Python trees fewer than 10,000);
# every member costs a report record, a file and ~1.1 KB of memory in the pipeline, so a
# million empty ones (3.5 MB of .tar.zst) is a bomb of its own.
DEFAULT_MAX_MEMBERS = 100_000

# The ELF writers a split accepts (``--patcher``, ``SplitOptions.patcher``): the fast tiers with
# the LIEF fallback, the fast tiers alone, or LIEF alone.
PATCHERS = ("auto", "native", "lief")
