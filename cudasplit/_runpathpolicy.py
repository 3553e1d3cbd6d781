"""The run's search-path policy (:class:`RunpathPolicy`), checked when it is made.

Everything the policy puts on a search path (the driver link, cuda_compat, appended entries)
must be absolute (or ``$ORIGIN``-relative for appended entries), without ``:``, and never point
into a stubs directory.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from cudasplit._runpathentries import is_origin_relative, is_stub_entry
from cudasplit.errors import RunpathPolicyError

DEFAULT_DRIVER_LINK = "/run/opengl-driver"
_TAGS = frozenset({"RUNPATH", "RPATH"})


@dataclass(frozen=True, slots=True)
class RunpathPolicy:
    """How search paths are built; one policy serves a whole run.

    ``cuda_compat`` is the directory holding cuda_compat's ``libcuda.so*`` (``<pkg>/compat``).
    ``stub_dirs`` are absolute directories known to hold stubs, beyond any path with a
    ``stubs`` component. ``append`` entries must be absolute or ``$ORIGIN``-relative.
    """

    driver_link: str | None = DEFAULT_DRIVER_LINK
    cuda_compat: str | None = None
    library_paths: tuple[str, ...] = ()
    append: tuple[str, ...] = ()
    keep_absolute: bool = False
    tag: str = "RUNPATH"
    stub_dirs: tuple[str, ...] = ()
    # (arch, loader path): the PT_INTERP of dynamic executables of that arch ("x86_64", ...).
    interpreters: tuple[tuple[str, str], ...] = ()
    # DT_NEEDED globs that may stay unresolved (autoPatchelfIgnoreMissingDeps).
    ignore_missing: tuple[str, ...] = ()
    # An unresolved name fails the run (default in --nix mode; --strict implies it).
    fail_unresolved: bool = False
    # A file that should be patched and is not (patch-failed) fails the run (--nix; --strict
    # fails on every problem anyway).
    fail_unpatched: bool = False
    # The build's arch (--nix: the loader's). Unresolved names of files of another arch, with
    # no --interpreter for it, never fail: autoPatchelf skips such files altogether.
    target_arch: str | None = None

    def __post_init__(self) -> None:
        if self.tag not in _TAGS:
            raise RunpathPolicyError(f"tag must be RUNPATH or RPATH, not {self.tag!r}")
        if self.driver_link is not None:
            require_absolute(self.driver_link, "driver_link")
            _require_not_stub(self.driver_link, self.stub_dirs, "driver_link")
        if self.cuda_compat is not None:
            require_absolute(self.cuda_compat, "cuda_compat")
            _require_not_stub(self.cuda_compat, self.stub_dirs, "cuda_compat")
        for stub_dir in self.stub_dirs:
            require_absolute(stub_dir, "stub_dirs entry")
        for entry in self.append:
            _require_append_entry(entry, self.stub_dirs)
        for arch, loader in self.interpreters:
            if not arch or not loader.startswith("/") or "\0" in loader:
                raise RunpathPolicyError(
                    f"interpreter must be ARCH=/absolute/path, not {arch!r}={loader!r}")
        if len(dict(self.interpreters)) != len(self.interpreters):
            raise RunpathPolicyError("two interpreters for one architecture")

    def interpreter_for(self, arch: str) -> str | None:
        """The loader wanted for executables of ``arch`` (``None``: leave PT_INTERP alone)."""
        return dict(self.interpreters).get(arch)

    def driver_lib_dir(self) -> str | None:
        """``<driver_link>/lib``, or ``None`` when the driver link is off."""
        if self.driver_link is None:
            return None
        return posixpath.join(self.driver_link, "lib")


def require_absolute(path: str, what: str) -> None:
    if not path.startswith("/"):
        raise RunpathPolicyError(f"{what} must be an absolute path, not {path!r}")
    if ":" in path:
        raise RunpathPolicyError(f"{what} cannot contain ':' (search path separator): {path!r}")


def _require_not_stub(path: str, stub_dirs: Iterable[str], what: str) -> None:
    if is_stub_entry(path, stub_dirs):
        raise RunpathPolicyError(f"{what} points into a stubs directory: {path!r}")


def _require_append_entry(entry: str, stub_dirs: Iterable[str]) -> None:
    if is_origin_relative(entry):
        if ":" in entry:
            raise RunpathPolicyError(f"append entry cannot contain ':': {entry!r}")
    else:
        require_absolute(entry, "append entry")
    _require_not_stub(entry, stub_dirs, "append entry")

