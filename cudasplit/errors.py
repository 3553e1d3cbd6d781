"""The one exception tree of cudasplit.

Every error the public API raises derives from :class:`CudasplitError`. Foreign errors
(``tarfile``, ``lzma``, ``zstandard``, ``ELFError``, LIEF, ``OSError``) are translated where
they enter, so callers never need to know which library failed::

    CudasplitError
    ├── SourceError            the archive or directory cannot be read
    │   ├── SourceNotFoundError    ... it does not exist (also a FileNotFoundError)
    │   ├── SourceNotADirectoryError  ... a directory was expected (also NotADirectoryError)
    │   ├── CorruptArchiveError    truncated/corrupt compressed data or tar headers
    │   ├── UnsafeMemberError      a member that would escape the output roots
    │   └── LimitExceededError     decompression bomb guard
    ├── RulesError             a rule file is invalid (message names ``file:rule``)
    ├── ElfError               an ELF file cannot be parsed
    ├── PatchError             a RUNPATH could not be written (the file was restored)
    ├── OutputError            a sink cannot write (exists, permission, disk full)
    ├── NixEnvironmentError    the Nix builder variables are missing or inconsistent
    ├── ManifestError          an NVIDIA manifest cannot be read
    ├── ToolkitError           a toolkit view cannot be laid out (two outputs disagree)
    ├── OptionsError           SplitOptions (or a CLI option) holds an invalid value
    │   ├── OptionsTypeError       ... of the wrong type (also a TypeError)
    │   └── UnknownPatcherError    ... a patcher name that names no ELF writer
    ├── RunpathPolicyError     a RUNPATH policy or planning input is invalid (also ValueError)
    ├── NotFoundError          a report has no such member, a manifest no such package (also
    │                          a KeyError)
    └── ProblemsFound          ``strict`` mode found problems (report attached)
        ├── UnresolvedLibrariesError  DT_NEEDED names found nowhere (``nix``, ``strict``)
        └── UnpatchedFilesError    ELF files that should have been patched were not

Messages are one line and name the file (and member, where there is one).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CorruptArchiveError",
    "CudasplitError",
    "ElfError",
    "LimitExceededError",
    "ManifestError",
    "NixEnvironmentError",
    "NotFoundError",
    "OptionsError",
    "OptionsTypeError",
    "OutputError",
    "PatchError",
    "ProblemsFound",
    "RulesError",
    "RunpathPolicyError",
    "SourceError",
    "SourceNotADirectoryError",
    "SourceNotFoundError",
    "ToolkitError",
    "UnknownPatcherError",
    "UnpatchedFilesError",
    "UnresolvedLibrariesError",
    "UnsafeMemberError",
]


class CudasplitError(Exception):
    """Root of every error cudasplit raises."""

    exit_code = 2


class SourceError(CudasplitError):
    """A source (archive or directory) cannot be read."""

    def __init__(self, message: str, *, source: str = "", member: str | None = None) -> None:
        self.source = source
        self.member = member
        where = source
        if member is not None:
            where = f"{source}: member {member!r}" if source else f"member {member!r}"
        super().__init__(f"{where}: {message}" if where else message)


class SourceNotFoundError(SourceError, FileNotFoundError):
    """A source path does not exist (also a ``FileNotFoundError``)."""


class SourceNotADirectoryError(SourceError, NotADirectoryError):
    """A source that must be a directory is not one (also a ``NotADirectoryError``)."""


def source_os_error(exc: OSError, source: str) -> SourceError:
    """``exc`` (from reading ``source``) as a :class:`SourceError` that is still the same kind
    of ``OSError`` where it says "not there" or "not a directory"."""
    message = exc.strerror or str(exc)
    if isinstance(exc, FileNotFoundError):
        return SourceNotFoundError(message, source=source)
    if isinstance(exc, NotADirectoryError):
        return SourceNotADirectoryError(message, source=source)
    return SourceError(message, source=source)


class CorruptArchiveError(SourceError):
    """Compressed data or tar structure is damaged or truncated."""


class UnsafeMemberError(SourceError):
    """A member whose path or link would reach outside the output roots."""


class LimitExceededError(SourceError):
    """The archive expands beyond the configured size limits (decompression bomb guard)."""


class RulesError(CudasplitError):
    """A rule file is invalid; the message names ``file:rule``."""


class ElfError(CudasplitError):
    """An ELF file cannot be parsed (truncated, bogus offsets, ...)."""


class PatchError(CudasplitError):
    """Writing a RUNPATH failed; the file was left as it was."""


class OutputError(CudasplitError):
    """An output cannot be written (exists, permission denied, disk full, ...)."""


class NixEnvironmentError(CudasplitError):
    """The Nix builder environment lacks or contradicts output variables."""


class ManifestError(CudasplitError):
    """An NVIDIA redistrib/feature manifest cannot be read."""


class ToolkitError(CudasplitError):
    """A toolkit view cannot be laid out: no split output, or two disagree on one path."""


class OptionsError(CudasplitError, ValueError):
    """An option value is invalid (raised where the options are constructed)."""


class OptionsTypeError(OptionsError, TypeError):
    """An argument or option has the wrong type (also a ``TypeError``); names the parameter."""


class UnknownPatcherError(OptionsError):
    """A ``patcher`` name that names no backend."""


class RunpathPolicyError(CudasplitError, ValueError):
    """A RUNPATH policy or planning input is invalid (relative dir, ``:`` in a path, ...)."""


class NotFoundError(CudasplitError, KeyError):
    """A name asked for is not there: a report's member, a manifest's package (also a
    ``KeyError``, so ``except KeyError`` keeps working)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ProblemsFound(CudasplitError):
    """Strict mode found problems; ``report`` holds the full report."""

    exit_code = 1

    def __init__(self, message: str, report: Any = None) -> None:
        self.report = report
        super().__init__(message)


class UnpatchedFilesError(ProblemsFound):
    """ELF files that should have been patched were not (``--nix`` and ``--strict``)."""


class UnresolvedLibrariesError(ProblemsFound):
    """DT_NEEDED names found nowhere, in ``--nix`` mode or under ``--strict``."""
