"""The run's search-path policy (:class:`RunpathPolicy`), checked when it is made.

Everything the policy puts on a search path (the driver link, cuda_compat, appended entries)
must be absolute (or ``$ORIGIN``-relative for appended entries), without ``:``, and never point
into a stubs directory.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

from cudasplit._argcheck import check_fields, checked
from cudasplit._run import DEFAULT_DRIVER_LINK
from cudasplit._searchpath import is_origin_relative, is_stub_entry
from cudasplit.errors import RunpathPolicyError

# The arch names an ELF file's machine maps to (``resolve.arch_of``): an interpreter for any
# other name would never be used (``--interpreter sparc=...`` was silently ignored).
INTERPRETER_ARCHES = ("x86_64", "aarch64", "ppc64le", "ppc64", "i686", "armv7l", "riscv64")
_TAGS = frozenset({"RUNPATH", "RPATH"})


@checked
@dataclass(frozen=True, slots=True)
class RunpathPolicy:
    """How search paths are built; one policy serves a whole run.

    ``cuda_compat`` is the directory holding cuda_compat's ``libcuda.so*`` (``<pkg>/compat``).
    ``stub_dirs`` are absolute directories known to hold stubs, beyond any path with a
    ``stubs`` component. ``append`` entries must be absolute or ``$ORIGIN``-relative.

    Attributes:
        driver_link: the driver link directory; ``<driver_link>/lib`` leads every RUNPATH
            (``None``: left out).
        cuda_compat: the directory holding cuda_compat's ``libcuda.so*``, searched first.
        library_paths: directories where DT_NEEDED names outside the package are found.
        append: entries appended to every RUNPATH (absolute or ``$ORIGIN``-relative).
        keep_absolute: keep the absolute entries a file already has.
        tag: ``RUNPATH`` or ``RPATH``.
        stub_dirs: absolute directories known to hold stubs (never on a RUNPATH).
        interpreters: (arch, loader path) pairs: the PT_INTERP of executables of that arch.
        ignore_missing: DT_NEEDED globs that may stay unresolved (autoPatchelfIgnoreMissingDeps).
        fail_unresolved: an unresolved name fails the run (``--nix``; ``--strict`` too).
        fail_unpatched: a file that should be patched and is not fails the run (``--nix``;
            ``--strict`` too).
        target_arch: the build's arch; unresolved names of files of another arch never fail.
        host_loader: names this machine's loader finds (``ld.so.cache``, the default directories)
            count as resolved; off in ``--nix`` mode.

    Raises:
        RunpathPolicyError: a directory is relative, holds ``:``, or is a stubs directory; an
            unknown tag; an interpreter that is not an absolute path.
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
    # Names this machine's loader finds (ld.so.cache, default dirs) count as resolved: the
    # output of a plain split runs here. Off in --nix mode, where the sandbox has none.
    host_loader: bool = True

    def __post_init__(self) -> None:
        check_fields(self)  # a wrong type is an OptionsTypeError naming the field
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
                    f"interpreters must name absolute paths ([ARCH=]/absolute/path), not "
                    f"{loader!r} (for {arch or 'no architecture'})")
            if arch not in INTERPRETER_ARCHES:
                raise RunpathPolicyError(f"interpreter arch {arch!r} is unknown (known: "
                                         f"{', '.join(INTERPRETER_ARCHES)})")
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
            raise RunpathPolicyError(f"append cannot contain ':' (search path separator): "
                                     f"{entry!r}")
    else:
        require_absolute(entry, "append")
    _require_not_stub(entry, stub_dirs, "append")

