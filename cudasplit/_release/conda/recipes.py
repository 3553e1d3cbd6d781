"""A profile's package metadata: ``<profile>/recipes/*.toml``, one file per upstream recipe.

The conda-forge profile keeps, per feedstock, our own expression of its recipe at a named
commit: every output's conda metadata (depends, constrains, run_exports, noarch, summary) and
the files its ``files:`` globs select (paths relative to ``$PREFIX``; the tests compare them
with what the profile's rules place). ``repack --format conda`` reads the metadata here; an
output's ``redist`` names the archive whose split makes it (``*``: every split).

Values are templates: ``@target_platform@``/``@targets_dir@`` come from the profile's
platform, the rest from the run (:class:`RunValues`): ``@version@`` (the archive's),
``@build@`` (the recipe's build string), ``@cuda_version@`` (X.Y), ``@cuda_release@`` (as
given), ``@cuda_major@``, ``@cuda_next_minor@`` (13.1.0a0), ``@cuda_next_major@`` (14.0a0) and
``@next_major@`` (the archive version's next major, 14.0a0: conda-build's ``max_pin="x"``).

``__glibc`` is never written in ``depends``: an output that the feedstock builds with
``{{ stdlib("c") }}`` says ``stdlib = "c"``, the recipe says its feedstock's
``c_stdlib_version``, and the packer pins ``__glibc`` at that version or at the floor its files
measure, whichever is higher. An output's ``scripts`` are files the recipe itself installs
(cuda-nvcc's activation scripts): our own text under the profile directory, its ``@name@``
platform variables filled.

Every name, version and match spec is checked against conda's grammar
(:mod:`cudasplit._release.conda.grammar`) once its templates are filled.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cudasplit._release.conda.grammar import (
    build_problem,
    name_problem,
    spec_problem,
    version_problem,
)
from cudasplit._rulebook import (
    check_keys,
    profile_dir,
    profile_variables,
    read_rule_file,
    string_list,
    substitute,
    table_of,
)
from cudasplit.errors import RulesError

__all__ = ["CondaOutput", "CondaProfile", "CondaRecipe", "RunValues", "conda_profile",
           "load_recipes", "outputs_for"]

_RECIPE_KEYS = frozenset({"feedstock", "commit", "recipe_version", "redist", "build_number",
                          "about", "c_stdlib_version"})
_ABOUT_KEYS = frozenset({"home", "license", "license_url", "doc_url", "dev_url"})
_OUTPUT_KEYS = frozenset({"name", "redist", "noarch", "version", "summary", "files", "depends",
                          "constrains", "run_exports", "platforms", "stdlib", "scripts"})
_RUN_EXPORTS = ("weak", "strong", "weak_constrains", "strong_constrains", "noarch")
_TEMPLATE = re.compile(r"@([a-z_]+)@")
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_GLIBC = re.compile(r"^\d{1,3}\.\d{1,3}$")   # a c_stdlib_version: 2.28
MAX_BUILD_NUMBER = 1_000_000
MAX_SCRIPT = 1 << 16     # bytes of one recipe script (activation scripts are a few KB)


@dataclass(frozen=True, slots=True)
class RunValues:
    """The per-run values the templates name (see the module docstring).

    Attributes:
        version: the archive's version.
        cuda_version: the CUDA release as given (X.Y or X.Y.Z).

    Raises:
        RulesError: (from :meth:`values`) a CUDA release that is not X.Y[.Z].
    """

    version: str
    cuda_version: str

    def problem(self) -> str | None:
        """Why the archive's version cannot name a conda package (``None``: it can)."""
        return version_problem(self.version)

    def values(self, build: str) -> dict[str, str]:
        match = re.fullmatch(r"(\d+)\.(\d+)(\.\d+)?", self.cuda_version)
        if match is None:
            raise RulesError(f"CUDA release {self.cuda_version!r} is not X.Y or X.Y.Z")
        major, minor = int(match[1]), int(match[2])
        own_major = re.match(r"\d+", self.version)
        return {
            "version": self.version, "build": build, "cuda_release": self.cuda_version,
            "cuda_version": f"{major}.{minor}", "cuda_major": str(major),
            "cuda_next_minor": f"{major}.{minor + 1}.0a0", "cuda_next_major": f"{major + 1}.0a0",
            "next_major": f"{int(own_major[0]) + 1}.0a0" if own_major else "",
        }


@dataclass(frozen=True, slots=True)
class CondaOutput:
    """One conda package of a recipe (templates filled by :meth:`resolved`)."""

    name: str
    redist: tuple[str, ...]     # the archives whose split makes it ("*": every split)
    noarch: str | None
    version: str
    summary: str
    files: tuple[str, ...]
    depends: tuple[str, ...]
    constrains: tuple[str, ...]
    run_exports: tuple[tuple[str, tuple[str, ...]], ...]
    platforms: tuple[str, ...] | None   # NVIDIA platforms it exists on (None: all)
    recipe: CondaRecipe
    stdlib: bool = False        # built with {{ stdlib("c") }}: __glibc >= c_stdlib_version
    scripts: tuple[tuple[str, str], ...] = ()   # (prefix path, text) the recipe installs

    @property
    def build(self) -> str:
        """The build string: ``h<hash>_<number>``, the hash of the recipe commit and the
        target platform, as conda-build's hash of the variant: the same for every output of
        one recipe on one platform (noarch ones too), so exact pins between them hold. A
        recipe every split writes (``cuda-version``) is one package for all platforms."""
        variant = "" if self.redist == ("*",) else self.recipe.target_platform
        digest = hashlib.sha256(f"{self.recipe.commit}:{variant}".encode())
        return f"h{digest.hexdigest()[:7]}_{self.recipe.build_number}"

    def resolved(self, run: RunValues) -> CondaOutput:
        """This output with every ``@name@`` of the run filled in.

        Raises:
            RulesError: a filled name, version or match spec is not conda's grammar (the
                message names the recipe file and output; check the run's own values with
                :meth:`RunValues.problem` first, so that this names only the data).
        """
        values = run.values(self.build)
        where = f"{self.recipe.path}:{self.name}"
        fill = _filler(values, where)
        done = replace(
            self, name=fill(self.name), version=fill(self.version),
            files=tuple(fill(f) for f in self.files),
            depends=tuple(fill(d) for d in self.depends),
            constrains=tuple(fill(c) for c in self.constrains),
            run_exports=tuple((k, tuple(fill(s) for s in v)) for k, v in self.run_exports))
        done.check(where)
        return done

    def check(self, where: str) -> None:
        """Name, version, build string and every match spec in conda's grammar, or a
        ``RulesError`` naming ``where`` and the value."""
        found = [(f"name {self.name!r}", name_problem(self.name)),
                 (f"version {self.version!r}", version_problem(self.version)),
                 (f"build {self.build!r}", build_problem(self.build))]
        found += [(f"{key} {spec!r}", spec_problem(spec))
                  for key, specs in (("depends", self.depends), ("constrains", self.constrains),
                                     *self.run_exports)
                  for spec in specs]
        for what, problem in found:
            if problem is not None:
                raise RulesError(f"{where}: {what}: {problem}")


@dataclass(frozen=True, slots=True)
class CondaRecipe:
    """A recipe file: where its facts come from and its outputs."""

    path: str
    feedstock: str
    commit: str
    recipe_version: str
    redist: tuple[str, ...]
    build_number: int
    target_platform: str
    about: tuple[tuple[str, str], ...] = ()     # home, license, license_url, doc_url
    platform: str | None = None                 # the NVIDIA platform it was read for
    outputs: tuple[CondaOutput, ...] = ()
    c_stdlib_version: str | None = None         # the feedstock's, for this platform


def load_recipes(directory: Path, variables: Mapping[str, str],
                 platform: str | None = None) -> tuple[CondaRecipe, ...]:
    """Every ``recipes/*.toml`` of a profile directory, read for ``platform`` (its
    ``variables`` filled in).

    Raises:
        RulesError: a file cannot be read or breaks the format (the message names it).
    """
    recipes = []
    for path in sorted((directory / "recipes").glob("*.toml")):
        doc = substitute(read_rule_file(path), variables)
        recipe = _recipe(str(path), doc, variables.get("target_platform", ""), platform)
        recipes.append(_with_scripts(recipe, doc, directory, variables))
    names = [o.name for r in recipes for o in r.outputs]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise RulesError(f"{directory / 'recipes'}: output {twice[0]!r} in two recipes")
    return tuple(recipes)


@dataclass(frozen=True, slots=True)
class CondaProfile:
    """What packing a profile's outputs as conda packages needs: its recipes (platform
    variables filled in), its install-prefix placeholder and its target platform (subdir)."""

    recipes: tuple[CondaRecipe, ...]
    placeholder: str | None
    target_platform: str


def conda_profile(rules_dir: Path, profile: str, platform: str | None) -> CondaProfile:
    """The :class:`CondaProfile` of ``profile`` in ``rules_dir`` for ``platform``.

    Raises:
        RulesError: the profile is unknown, lacks the platform, or a recipe file is invalid.
    """
    base = profile_dir(rules_dir, profile)
    table = read_rule_file(base / "default.toml").get("profile")
    table = table if isinstance(table, dict) else None
    variables = profile_variables(table, str(base / "default.toml"), platform)
    if "target_platform" not in variables:
        raise RulesError(f"{base / 'default.toml'}: conda packages need the platforms' "
                         "target_platform (conda's subdir)")
    placeholder = (table or {}).get("install_prefix")
    return CondaProfile(load_recipes(base, variables, platform),
                        placeholder if isinstance(placeholder, str) else None,
                        variables["target_platform"])


def outputs_for(recipes: Sequence[CondaRecipe], pname: str,
                platform: str | None) -> tuple[CondaOutput, ...]:
    """The outputs a split of ``pname`` makes (and those every split makes: ``*``)."""
    return tuple(o for r in recipes for o in r.outputs
                 if (pname in o.redist or o.redist == ("*",))
                 and (o.platforms is None or platform in o.platforms))


def _recipe(path: str, doc: Mapping[str, Any], target_platform: str,
            platform: str | None) -> CondaRecipe:
    check_keys(doc, frozenset({"schema", "recipe", "output"}), path, "top level")
    table = table_of(doc.get("recipe"), path, "[recipe]")
    check_keys(table, _RECIPE_KEYS, path, "[recipe]")
    commit = table.get("commit")
    if not isinstance(commit, str) or not _COMMIT.match(commit):
        raise RulesError(f"{path}:[recipe]: commit must be the 40-hex commit the facts come from")
    redist = string_list(table.get("redist"), f"{path}:[recipe]", "redist")
    number = table.get("build_number", 0)
    if not redist or not isinstance(number, int) or isinstance(number, bool) \
            or not 0 <= number <= MAX_BUILD_NUMBER:
        raise RulesError(f"{path}:[recipe]: redist (archive names) and a build_number from 0 "
                         f"to {MAX_BUILD_NUMBER}")
    about = table_of(table.get("about", {}), path, "[recipe].about")
    check_keys(about, _ABOUT_KEYS, path, "[recipe].about")
    if not all(isinstance(v, str) for v in about.values()):
        raise RulesError(f"{path}:[recipe].about: values must be strings")
    recipe = CondaRecipe(path, str(table.get("feedstock", "")), commit,
                         str(table.get("recipe_version", "")), redist, number, target_platform,
                         tuple(sorted(about.items())), platform,
                         c_stdlib_version=_c_stdlib(table.get("c_stdlib_version"), path,
                                                    platform))
    entries = doc.get("output", [])
    if not isinstance(entries, list) or not entries:
        raise RulesError(f"{path}: at least one [[output]]")
    outputs = tuple(_output(table_of(e, path, f"output #{i + 1}"), recipe, i)
                    for i, e in enumerate(entries))
    return replace(recipe, outputs=outputs)


def _output(table: Mapping[str, Any], recipe: CondaRecipe, index: int) -> CondaOutput:
    where = f"{recipe.path}:output #{index + 1}"
    check_keys(table, _OUTPUT_KEYS, recipe.path, f"output #{index + 1}")
    name = table.get("name")
    if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_.@-]+", name):
        raise RulesError(f"{where}: name must be a conda package name")
    redist = string_list(table.get("redist", list(recipe.redist)), where, "redist")
    if not redist or not (set(redist) <= set(recipe.redist) or redist == ("*",)):
        raise RulesError(f"{where}: redist must name archives of the recipe's "
                         f"({', '.join(recipe.redist)})")
    noarch = table.get("noarch")
    if noarch not in (None, "generic"):
        raise RulesError(f"{where}: noarch must be 'generic' (or absent)")
    exports = table_of(table.get("run_exports", {}), where, "run_exports")
    bad = sorted(set(exports) - set(_RUN_EXPORTS))
    if bad:
        raise RulesError(f"{where}: run_exports kind {bad[0]!r} (known: {', '.join(_RUN_EXPORTS)})")
    platforms = table.get("platforms")
    depends = string_list(table.get("depends"), where, "depends")
    if any(d.split(" ")[0] == "__glibc" for d in depends):
        raise RulesError(f"{where}: __glibc is not written in depends: say stdlib = \"c\" "
                         "(the pin comes from c_stdlib_version and the files' glibc floor)")
    stdlib = table.get("stdlib")
    if stdlib not in (None, "c"):
        raise RulesError(f"{where}: stdlib must be \"c\" (or absent)")
    if stdlib and noarch:
        raise RulesError(f"{where}: a noarch output gets no __glibc (conda-build applies "
                         "only noarch run_exports to it): drop stdlib")
    if stdlib and recipe.c_stdlib_version is None:
        raise RulesError(f"{where}: stdlib = \"c\" needs the recipe's c_stdlib_version")
    return CondaOutput(
        name=name, redist=redist, noarch=noarch,
        version=str(table.get("version", "@version@")),
        summary=str(table.get("summary", "")),
        files=_files(table.get("files"), where, recipe.platform),
        depends=depends,
        constrains=string_list(table.get("constrains"), where, "constrains"),
        run_exports=tuple((k, string_list(v, where, k)) for k, v in sorted(exports.items())),
        platforms=None if platforms is None else string_list(platforms, where, "platforms"),
        recipe=recipe, stdlib=stdlib == "c")


def _c_stdlib(value: Any, path: str, platform: str | None) -> str | None:
    """``c_stdlib_version``: ``"2.28"`` for every platform, or a table by NVIDIA platform
    (conda-forge's variants differ: Tegra builds have another)."""
    where = f"{path}:[recipe].c_stdlib_version"
    if value is None:
        return None
    if isinstance(value, dict):
        value = value.get(platform) if platform is not None else None
        if value is None:
            return None
    if not isinstance(value, str) or not _GLIBC.match(value):
        raise RulesError(f"{where}: must be a glibc version X.Y (2.28), or a table of them by "
                         "NVIDIA platform")
    return value


def _with_scripts(recipe: CondaRecipe, doc: Mapping[str, Any], directory: Path,
                  variables: Mapping[str, str]) -> CondaRecipe:
    """Each output's ``scripts``: prefix path -> a file below the profile ``directory``, read
    and its platform variables filled."""
    outputs = []
    for index, (output, entry) in enumerate(zip(recipe.outputs, doc.get("output", []),
                                                strict=True)):
        where = f"{recipe.path}:output #{index + 1}"
        table = table_of(entry.get("scripts", {}), where, "scripts")
        scripts = []
        for dest, source in sorted(table.items()):
            if not isinstance(source, str) or not _inside(dest) or not _inside(source):
                raise RulesError(f"{where}: scripts: {dest!r} = {source!r}: both must be "
                                 "relative paths that stay inside the prefix and the profile")
            scripts.append((dest, substitute(_read_script(directory / source, where),
                                             variables)))
        outputs.append(replace(output, scripts=tuple(scripts)))
    return replace(recipe, outputs=tuple(outputs))


def _inside(path: str) -> bool:
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and "\0" not in path \
        and all(p not in ("", ".", "..") for p in parts)


def _read_script(path: Path, where: str) -> str:
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_SCRIPT + 1)
    except OSError as exc:
        raise RulesError(f"{where}: scripts: cannot read {path} ({exc.strerror})") from exc
    if len(data) > MAX_SCRIPT:
        raise RulesError(f"{where}: scripts: {path} is over {MAX_SCRIPT} bytes")
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise RulesError(f"{where}: scripts: {path} is not UTF-8 text") from exc


def _files(value: Any, where: str, platform: str | None) -> tuple[str, ...]:
    """``files``: paths and globs, or ``{ path = "...", platforms = [...] }`` for an entry the
    recipe selects on some platforms only (libcublas' Fortran sources: x86_64)."""
    if not isinstance(value, list):
        return string_list(value, where, "files")
    found = []
    for entry in value:
        if isinstance(entry, str):
            found.append(entry)
            continue
        table = table_of(entry, where, "files entry")
        check_keys(table, frozenset({"path", "platforms"}), where, "files entry")
        path = table.get("path")
        if not isinstance(path, str):
            raise RulesError(f"{where}: a files entry's path must be a string")
        if platform in string_list(table.get("platforms"), where, "platforms"):
            found.append(path)
    return tuple(found)


def _filler(values: Mapping[str, str], where: str) -> Any:
    def fill(text: str) -> str:
        def one(match: re.Match[str]) -> str:
            if match[1] not in values:
                raise RulesError(f"{where}: unknown template @{match[1]}@ in {text!r}")
            return values[match[1]]
        return _TEMPLATE.sub(one, text)
    return fill
