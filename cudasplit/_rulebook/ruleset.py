"""A loaded rule set's decisions: path renames, then the first matching rule names the output.

The :class:`RuleSet` is frozen and pure: the same path and kind always get the same
:class:`Decision`, which names the rule that made it (see :mod:`cudasplit._rulebook` for the
precedence of the files the rules come from).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cudasplit._globs import Glob
from cudasplit._model import Kind
from cudasplit._rulebook.package.settings import PackageSettings
from cudasplit._rulebook.profile import Profile

__all__ = ["Decision", "RuleSet"]



@dataclass(frozen=True, slots=True)
class Decision:
    """Where one member goes and why. ``output`` is None for dropped members."""

    output: str | None
    rule: RuleRef
    rule_obj: Rule | None = None


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The rules of a split (:func:`load_ruleset`, :func:`ruleset_for`): rules,
    renames and the package table, merged from the rule files.

    Attributes:
        rules: every rule, in precedence order (the first that matches wins).
        renames: path renames applied before the rules.
        package: the merged package-table settings.
        files: the rule files read, highest precedence first.
        profile: the :class:`Profile` the files describe (default: Nixpkgs' outputs).

    Raises:
        Nothing: a value.
    """

    rules: tuple[Rule, ...]
    renames: tuple[Rename, ...]
    package: PackageSettings
    files: tuple[str, ...]
    profile: Profile = field(default_factory=Profile)

    def normalise(self, path: str) -> tuple[str, Rename | None]:
        for rename in self.renames:
            new = rename.apply(path)
            if new is not None:
                return new, rename
        return path, None

    def classify(self, path: str, kind: Kind | str,
                 allowed: frozenset[str] | None = None) -> Decision:
        """Pure: the first rule matching ``path`` (already normalised) and ``kind`` whose output
        the package has (``allowed``; None: all).

        A rule naming a missing output passes the member on to the next matching rule: this is
        Nixpkgs' positional ``moveToOutput`` -- with no ``static`` output a ``.a`` stays
        where the ``lib`` move put it. ``include`` alone falls back to ``dev`` first
        (``outputInclude``'s fallback). A drop rule wins when it is the first match.
        """
        kind = Kind(kind)  # the report's strings ("elf-shared") work as well as Kind members
        first: Rule | None = None
        for rule in self.rules:
            if not rule.matches(path, kind):
                continue
            if rule.action == "drop" and first is None:
                return Decision(None, rule.ref, rule)
            first = first or rule
            output = _present(rule.output, allowed) or _present(rule.fallback, allowed)
            if output is not None:
                # The first matching rule still names the decision and decides transforms
                # and patching (nvcc.profile is rewritten wherever it lands).
                return Decision(output, first.ref, first)
        base = self.profile.base_output
        if first is not None:
            return Decision(base, first.ref, first)
        return Decision(base, RuleRef("<builtin>", "unclaimed"), None)

    def explain(self, path: str, kind: Kind,
                allowed: frozenset[str] | None = None) -> list[tuple[Rule, bool]]:
        """Each rule tried, in order, with whether it matched, up to the one that decides as
        :meth:`classify` decides: a match whose output (and fallback) the package does not
        have (``allowed``) passes the member on, so the list goes on past it."""
        tried: list[tuple[Rule, bool]] = []
        first = True
        for rule in self.rules:
            hit = rule.matches(path, kind)
            tried.append((rule, hit))
            if not hit:
                continue
            if rule.action == "drop" and first:
                break
            first = False
            if (_present(rule.output, allowed) or _present(rule.fallback, allowed)) is not None:
                break
        return tried


def _present(output: str | None, allowed: frozenset[str] | None) -> str | None:
    if output is None or allowed is None or output in allowed:
        return output
    if output == "include" and "dev" in allowed:
        return "dev"
    return None

# "file" matches every regular file whatever its content; "elf" every ELF kind.
KIND_NAMES = frozenset({k.value for k in Kind} | {"elf"})


@dataclass(frozen=True, slots=True)
class RuleRef:
    """Where a rule comes from: ``file:name`` (``default.toml:libraries``).

    Attributes:
        file: the rules file.
        name: the rule's name in it.

    Raises:
        Nothing: a value.
    """

    file: str
    name: str

    def __str__(self) -> str:
        return f"{self.file}:{self.name}"


@dataclass(frozen=True, slots=True)
class Rule:
    """One placement rule of a rules file (docs/reference/rules.md).

    Attributes:
        ref: where it comes from.
        globs: the paths it matches.
        kinds: the member kinds it matches (None: any).
        output: the output it sends them to (None: dropped).
        action: ``place`` or ``drop``.
        patch: whether its ELF files are patched (None: the default).
        keep_runpath: whether their RUNPATH is kept as it is (None: the default).
        runpath_append: entries appended to their RUNPATH (``@pname@/lib``).
        transform: the text rewrite its files get (``pkgconfig``, ``nvcc-profile``).
        description: what it is for.
        fallback: the output to use where ``output`` is not produced.
        relocate: (profiles) the member lands at ``relocate + path``
            (``targets/x86_64-linux/``).
        link_in: (profiles) another output that gets a relative link to the member.
        link_under: where that link goes: ``link_under + path``.
        runpath: exactly this search path for its ELF files (no resolution, no driver link).
        runpath_tag: the tag that search path is written as (``RPATH`` or ``RUNPATH``).
        every_output: the member is also copied into every other output of the run.

    Raises:
        Nothing: a value.
    """

    ref: RuleRef
    globs: tuple[Glob, ...]
    kinds: frozenset[str] | None
    output: str | None
    action: str = "place"
    patch: bool | None = None
    keep_runpath: bool | None = None
    runpath_append: tuple[str, ...] = ()
    transform: str | None = None
    description: str = ""
    # Where the member goes when ``output`` is missing, instead of the next matching rule.
    fallback: str | None = None
    # Profiles (conda-forge): the member lands at ``relocate + path`` ("targets/x86_64-linux/");
    # ``link_in``: a relative link to it at ``link_under + path`` in that other output.
    relocate: str = ""
    link_in: str | None = None
    link_under: str = ""
    # Exactly this search path (no resolution, no driver link), written as ``runpath_tag``.
    runpath: tuple[str, ...] | None = None
    runpath_tag: str | None = None
    # The member is also copied into every other output of the run (a LICENSE per package).
    every_output: bool = False

    def placed_at(self, path: str) -> str:
        """Where a member matched at ``path`` lands in its output."""
        return self.relocate + path if self.relocate else path

    def matches(self, path: str, kind: Kind) -> bool:
        if self.kinds is not None and not kind_matches(self.kinds, kind):
            return False
        return any(g.matches(path) for g in self.globs)


@dataclass(frozen=True, slots=True)
class Rename:
    """A path rename of the rules (``lib64/`` -> ``lib/``): applied before classification.

    Attributes:
        ref: where it comes from.
        source: the prefix (ending in ``/``) or the single file renamed.
        target: its new prefix or path.
        link_back: whether a link from the old name is left.

    Raises:
        Nothing: a value.
    """

    ref: RuleRef
    source: str  # prefix ending in "/"; without one, a single file (``file = true``)
    target: str  # prefix ending in "/" (a file rename: the new path)
    link_back: bool = False

    def apply(self, path: str) -> str | None:
        if not self.source.endswith("/"):  # nsight_compute's ncu -> bin/ncu
            return self.target if path == self.source else None
        # Only paths strictly below the prefix move: a member named exactly like the prefix
        # (``lib64`` as a symlink to ``lib``) keeps its name.
        if path.startswith(self.source):
            return self.target + path[len(self.source):]
        return None


def kind_matches(kinds: frozenset[str], kind: Kind) -> bool:
    if kind.value in kinds:
        return True
    regular = kind in (Kind.FILE, Kind.ELF_SHARED, Kind.ELF_EXEC, Kind.ELF_OTHER, Kind.STATIC)
    if "file" in kinds and regular:
        return True
    return "elf" in kinds and kind.value.startswith("elf-")
