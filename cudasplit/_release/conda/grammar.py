"""conda's grammar for what a package's metadata says: names, versions, build strings, match specs.

Everything that reaches ``index.json``, a ``.conda`` file name or a ``depends``/``constrains``
entry passes through here first. The archive's top directory, ``--package`` and a profile's
recipe data all feed those fields, and conda reads them by their syntax. A version
``13.0.96 *|<0`` would make ``libcublas >=13.0.96 *|<0,<14.0a0`` in ``depends``, where the
part after the space reads as a build string. So a value that is not a plain conda value is
refused, never escaped.

The grammar is a strict subset of what conda and rattler accept (the tests check that rattler
parses everything accepted here):

* a package name: lower-case letters, digits, ``_``, ``-``, ``.``, starting with a letter, a
  digit or ``_`` (virtual packages: ``__glibc``);
* a version: an optional epoch ``N!``, then segments of letters and digits joined by ``.`` or
  ``_``, an optional local part ``+segments``; no ``-`` (file names split on it), no spaces;
* a build string: letters, digits, ``_``, ``.``, ``+``;
* a match spec, as ``index.json`` writes them: ``name``, ``name version-spec`` or ``name
  version-spec build-spec``, one space between. A version spec is constraints joined by ``,``
  (and) and ``|`` (or); a constraint is an optional operator (``==`` ``!=`` ``>=`` ``<=`` ``>``
  ``<`` ``~=`` ``=``) and a version, or a version ending ``.*``, or ``*``. A build spec is a
  build string that may hold ``*`` (never two in a row).

Lengths have stated maxima (:data:`MAX_NAME`, :data:`MAX_VERSION`, :data:`MAX_BUILD`,
:data:`MAX_SPEC`), so that a file name stays under the 255 bytes file systems allow. Each
check returns why a value fails (one phrase), or ``None``.
"""

from __future__ import annotations

import re

__all__ = ["MAX_BUILD", "MAX_NAME", "MAX_SPEC", "MAX_VERSION", "build_problem", "name_problem",
           "spec_problem", "version_problem"]

MAX_NAME = 100       # name + version + build + "--.conda" < 255 bytes
MAX_VERSION = 64
MAX_BUILD = 64
MAX_SPEC = 400

_NAME = re.compile(r"[a-z0-9_][a-z0-9_.-]*")
_SEGMENTS = r"[0-9A-Za-z]+(?:[._][0-9A-Za-z]+)*"
_VERSION = re.compile(rf"(?:[0-9]+!)?{_SEGMENTS}(?:\+{_SEGMENTS})?")
_BUILD = re.compile(r"[0-9A-Za-z_.+]+")
_BUILD_SPEC = re.compile(r"(?=.)[0-9A-Za-z_.+]*(?:\*[0-9A-Za-z_.+]+)*\*?")   # no "**"
_OPERATOR = re.compile(r"(==|!=|>=|<=|~=|>|<|=)?(.*)", re.DOTALL)


def name_problem(name: str) -> str | None:
    """Why ``name`` is not a conda package name (``None``: it is one)."""
    if len(name) > MAX_NAME:
        return f"longer than {MAX_NAME} characters"
    if not _NAME.fullmatch(name):
        return ("not a conda package name (lower-case letters, digits, '_', '-', '.'; "
                "starting with a letter, a digit or '_')")
    return None


def version_problem(version: str) -> str | None:
    """Why ``version`` is not a conda package version (``None``: it is one)."""
    if len(version) > MAX_VERSION:
        return f"longer than {MAX_VERSION} characters"
    if not _VERSION.fullmatch(version):
        return ("not a conda version (letters and digits in segments joined by '.' or '_'; "
                "no '-', spaces or operators)")
    return None


def build_problem(build: str) -> str | None:
    """Why ``build`` is not a conda build string (``None``: it is one)."""
    if len(build) > MAX_BUILD:
        return f"longer than {MAX_BUILD} characters"
    if not _BUILD.fullmatch(build):
        return "not a conda build string (letters, digits, '_', '.', '+')"
    return None


def spec_problem(spec: str) -> str | None:
    """Why ``spec`` is not a match spec as ``index.json`` writes one (``None``: it is one)."""
    if len(spec) > MAX_SPEC:
        return f"longer than {MAX_SPEC} characters"
    words = spec.split(" ")
    if not 1 <= len(words) <= 3:
        return "not 'name [version [build]]' with one space between the parts"
    problem = name_problem(words[0])
    if problem is not None:
        return f"package {words[0]!r}: {problem}"
    if len(words) >= 2 and not _version_spec(words[1]):
        return f"version {words[1]!r} is not a conda version spec"
    if len(words) == 3 and not _BUILD_SPEC.fullmatch(words[2]):
        return f"build {words[2]!r} is not a conda build spec"
    return None


def _version_spec(text: str) -> bool:
    """Constraints joined by ``,`` and ``|``, each one :func:`_constraint`."""
    return all(_constraint(part) for alternative in text.split("|")
               for part in alternative.split(","))


def _constraint(text: str) -> bool:
    if text == "*":
        return True
    match = _OPERATOR.fullmatch(text)
    assert match is not None  # the pattern matches any text
    operator, version = match[1], match[2]
    if version.endswith(".*") and operator in (None, "==", "="):
        version = version[:-2]
    return _VERSION.fullmatch(version) is not None
