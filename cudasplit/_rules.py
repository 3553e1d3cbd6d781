"""The declarative rule engine: TOML rule files -> frozen :class:`RuleSet` -> decisions.

Precedence (first matching rule wins), highest first:

1. files given with ``--rules FILE`` (in the order given);
2. ``rules/packages/<pname>.toml`` for the package being split, when present;
3. ``rules/default.toml``, the default profile.

Inside one file, rules are tried top to bottom. Renames (path normalisation such as
``pkg-config/`` -> ``share/pkgconfig/``) follow the same precedence and are applied before
classification, so rules match the normalised path. Every decision names the rule that made it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, is_dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ._dlopen import DlopenNeed, parse_dlopen_key
from ._globs import Glob
from ._model import OUTPUT_NAMES, Kind
from ._pkgtable import (
    AddNeeded,
    DropEdit,
    LinkInto,
    OutputWhen,
    PcEdit,
    RunpathPackage,
    TextEdit,
    Where,
    declared_outputs,
    glob_list,
    parse_add_needed,
    parse_drops,
    parse_link_into,
    parse_output_when,
    parse_package_refs,
    parse_pc_edits,
    parse_text_edits,
    string_list,
)
from .errors import RulesError

RULE_KEYS = frozenset(
    {"name", "match", "kind", "output", "action", "patch", "keep_runpath", "runpath_append",
     "transform", "description", "fallback"}
)
RENAME_KEYS = frozenset({"name", "from", "to", "link_back", "description"})
PACKAGE_KEYS = frozenset(
    {"outputs", "cuda_compat", "runpath_append", "lift", "description", "stub_links",
     "pkgconfig_driver_rpath", "pkgconfig_stubs_libdir", "optional_outputs",
     "replace_needed", "dlopen", "propagated_outputs", "pkgconfig_edits",
     "allow_fhs_references", "output_when", "drop", "compiler", "redist",
     "nvcc_includes", "nvcc_libraries", "copy_packages", "add_needed",
     "link_into", "text_edits"}
)
TOP_KEYS = frozenset({"schema", "profile", "package", "rule", "rename"})
PROFILE_KEYS = frozenset({"name", "description", "outputs"})
ACTIONS = frozenset({"place", "drop"})
TRANSFORMS = frozenset({"pkgconfig", "nvcc-profile"})
# "file" matches every regular file whatever its content; "elf" every ELF kind.
KIND_NAMES = frozenset({k.value for k in Kind} | {"elf"})


@dataclass(frozen=True, slots=True)
class RuleRef:
    file: str
    name: str

    def __str__(self) -> str:
        return f"{self.file}:{self.name}"


@dataclass(frozen=True, slots=True)
class Rule:
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

    def matches(self, path: str, kind: Kind) -> bool:
        if self.kinds is not None and not kind_matches(self.kinds, kind):
            return False
        return any(g.matches(path) for g in self.globs)


@dataclass(frozen=True, slots=True)
class Rename:
    ref: RuleRef
    source: str  # prefix, always ending in "/"
    target: str  # prefix, always ending in "/"
    link_back: bool = False

    def apply(self, path: str) -> str | None:
        # Only paths strictly below the prefix move: a member named exactly like the prefix
        # (``lib64`` as a symlink to ``lib``) keeps its name.
        if path.startswith(self.source):
            return self.target + path[len(self.source):]
        return None


@dataclass(frozen=True, slots=True)
class PackageSettings:
    """Per-package facts from ``[package]`` tables (first file that sets a key wins)."""

    outputs: tuple[str, ...] | None = None
    cuda_compat: bool = False
    runpath_append: tuple[str, ...] = ()
    # Directory globs whose match is removed from member paths (nsight's
    # ``nsight-systems/<ver>/``): ``lift = ["nsight-systems/*"]``.
    lift: tuple[Glob, ...] = ()
    # Extra symlinks, path -> relative target, created where the target landed
    # (cuda_cudart: ``"lib/stubs/libcuda.so.1" = "libcuda.so"``).
    stub_links: Mapping[str, str] = field(default_factory=dict)
    # .pc files: append ``-Wl,-rpath,<driver link>/lib`` to Libs (cuda_cudart).
    pkgconfig_driver_rpath: bool = False
    # .pc file-name globs whose libdir points at the stubs output (``cuda-*.pc``).
    pkgconfig_stubs_libdir: tuple[Glob, ...] = ()
    # Declared outputs that may stay empty (cuda_cupti's static exists on some platforms only).
    optional_outputs: tuple[str, ...] = ()
    # DT_NEEDED renames in every ELF file of the package (nsight: libtiff.so.5 -> libtiff.so).
    replace_needed: Mapping[str, str] = field(default_factory=dict)
    # Packages this one dlopens, version-gated: their lib dir goes into RUNPATH (_dlopen.py).
    dlopen: tuple[DlopenNeed, ...] = ()
    # Outputs that out (and dev) propagate besides bin/include/lib (Nixpkgs'
    # propagatedBuildOutputs): cuda_cudart adds static and stubs, cuda_nvml_dev stubs.
    propagated_outputs: tuple[str, ...] = ()
    pkgconfig_edits: tuple[PcEdit, ...] = ()
    # checkCudaFhsRefs: references to /usr/ fail --check-fhs-refs unless allowed.
    allow_fhs_references: bool = False
    output_when: tuple[OutputWhen, ...] = ()
    drops: tuple[DropEdit, ...] = ()
    # The compiler's path inside its output (nix-support/cuda-component ``compiler``).
    compiler: str | None = None
    # Where the package comes from and its Nixpkgs file: shown by ``rules show``.
    redist: str = "cuda"
    # nvcc.profile: other packages whose include (and lib, lib/stubs) dirs nvcc searches (D7).
    nvcc_includes: tuple[str, ...] = ()
    nvcc_libraries: tuple[str, ...] = ()
    # Other packages copied into this one (cuda_nvcc 13: libnvvm into nvvm/), version-gated;
    # ``subdir`` is the destination directory.
    copy_packages: tuple[RunpathPackage, ...] = ()
    # DT_NEEDED names added to matching ELF files, gated (tensorrt's trtexec, cuDNN 8).
    add_needed: tuple[AddNeeded, ...] = ()
    # Links in a directory to every placed file matching a glob (tensorrt's include/onnx).
    link_into: tuple[LinkInto, ...] = ()
    # Text replacements in package files (libcudss's CMake configs; _textedits.py).
    text_edits: tuple[TextEdit, ...] = ()

    def outputs_for(self, where: Where) -> tuple[str, ...] | None:
        """Declared outputs on this platform/version (gated ones left out where they fail)."""
        if self.outputs is None:
            return None
        return declared_outputs(self.outputs, self.output_when, where)

    def propagated(self, outputs: Sequence[str]) -> tuple[str, ...]:
        """Nixpkgs' default bin/include/lib (those that exist) plus the package's own."""
        base = [o for o in ("bin", "include", "lib") if o in outputs]
        return tuple(base + [o for o in self.propagated_outputs if o in outputs and o not in base])

    def dropped(self, path: str, where: Where) -> bool:
        return any(d.matches(path, where) for d in self.drops)

    def lift_path(self, path: str) -> str | None:
        """``path`` with a lifted directory prefix removed; None when ``path`` is that directory."""
        if not self.lift:
            return path
        parts = path.split("/")
        for depth in range(1, len(parts) + 1):
            prefix = "/".join(parts[:depth])
            if any(glob.matches(prefix) for glob in self.lift):
                rest = "/".join(parts[depth:])
                return rest or None
        return path


@dataclass(frozen=True, slots=True)
class Decision:
    """Where one member goes and why. ``output`` is None for dropped members."""

    output: str | None
    rule: RuleRef
    rule_obj: Rule | None = None


@dataclass(frozen=True, slots=True)
class RuleSet:
    rules: tuple[Rule, ...]
    renames: tuple[Rename, ...]
    package: PackageSettings
    files: tuple[str, ...]

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
        Nixpkgs' positional ``moveToOutput`` (D4) -- with no ``static`` output a ``.a`` stays
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
        if first is not None:
            return Decision("out", first.ref, first)
        return Decision("out", RuleRef("<builtin>", "unclaimed"), None)

    def explain(self, path: str, kind: Kind) -> list[tuple[Rule, bool]]:
        """Each rule tried, in order, with whether it matched; stops at the first match."""
        tried: list[tuple[Rule, bool]] = []
        for rule in self.rules:
            hit = rule.matches(path, kind)
            tried.append((rule, hit))
            if hit:
                break
        return tried


def _present(output: str | None, allowed: frozenset[str] | None) -> str | None:
    if output is None or allowed is None or output in allowed:
        return output
    if output == "include" and "dev" in allowed:
        return "dev"
    return None


def kind_matches(kinds: frozenset[str], kind: Kind) -> bool:
    if kind.value in kinds:
        return True
    regular = kind in (Kind.FILE, Kind.ELF_SHARED, Kind.ELF_EXEC, Kind.ELF_OTHER, Kind.STATIC)
    if "file" in kinds and regular:
        return True
    return "elf" in kinds and kind.value.startswith("elf-")


# ---------------------------------------------------------------------------------------------
# Loading


def default_rules_dir() -> Path:
    """``rules/`` inside the installed wheel, else the source checkout's top-level ``rules/``."""
    packaged = resources.files("cudasplit") / "rules"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "rules"


def load_ruleset(
    package_name: str | None = None,
    extra_files: Sequence[str | Path] = (),
    rules_dir: Path | None = None,
) -> RuleSet:
    base = rules_dir or default_rules_dir()
    files: list[Path] = [Path(f) for f in extra_files]
    if package_name:
        pkg_file = base / "packages" / f"{package_name}.toml"
        if pkg_file.is_file():
            files.append(pkg_file)
    files.append(base / "default.toml")
    return build_ruleset([(str(f), read_rule_file(f)) for f in files])


def read_rule_file(path: Path) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise RulesError(f"{path}: cannot read rule file ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise RulesError(f"{path}: invalid TOML ({exc})") from exc


def build_ruleset(documents: Iterable[tuple[str, Mapping[str, Any]]]) -> RuleSet:
    rules: list[Rule] = []
    renames: list[Rename] = []
    package_tables: list[tuple[str, Mapping[str, Any]]] = []
    names: list[str] = []
    for filename, doc in documents:
        label = Path(filename).name
        _check_keys(doc, TOP_KEYS, f"{filename}", "top level")
        if doc.get("schema", 1) != 1:
            raise RulesError(f"{filename}: unsupported schema {doc.get('schema')!r} (expected 1)")
        if "profile" in doc:
            _check_keys(_table(doc["profile"], filename, "profile"), PROFILE_KEYS, filename,
                        "[profile]")
        rules.extend(_load_rules(doc.get("rule", []), filename, label))
        renames.extend(_load_renames(doc.get("rename", []), filename, label))
        if "package" in doc:
            package_tables.append((filename, _table(doc["package"], filename, "package")))
        names.append(filename)
    return RuleSet(tuple(rules), tuple(renames), _load_package(package_tables), tuple(names))


def _table(value: Any, filename: str, what: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise RulesError(f"{filename}:{what}: must be a table")
    return value


def _check_keys(table: Mapping[str, Any], allowed: frozenset[str], filename: str,
                where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise RulesError(
            f"{filename}:{where}: unknown key(s) {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(allowed))})"
        )


def _load_rules(entries: Any, filename: str, label: str) -> list[Rule]:
    if not isinstance(entries, list):
        raise RulesError(f"{filename}: 'rule' must be an array of tables ([[rule]])")
    seen: set[str] = set()
    rules = []
    for index, entry in enumerate(entries):
        where = f"rule #{index + 1}"
        table = _table(entry, filename, where)
        name = table.get("name")
        if not isinstance(name, str) or not name:
            raise RulesError(f"{filename}:{where}: 'name' (a non-empty string) is required")
        if name in seen:
            raise RulesError(f"{filename}:{name}: duplicate rule name")
        seen.add(name)
        rules.append(_load_rule(table, filename, label, name))
    return rules


def _load_rule(table: Mapping[str, Any], filename: str, label: str, name: str) -> Rule:
    where = f"{filename}:{name}"
    _check_keys(table, RULE_KEYS, filename, name)
    action = table.get("action", "place")
    if action not in ACTIONS:
        raise RulesError(f"{where}: unknown action {action!r} (use place or drop)")
    output = table.get("output")
    if action == "place":
        if output not in OUTPUT_NAMES:
            raise RulesError(
                f"{where}: unknown or missing output {output!r} "
                f"(known: {', '.join(OUTPUT_NAMES)})"
            )
    elif output is not None:
        raise RulesError(f"{where}: a 'drop' rule takes no output")
    transform = table.get("transform")
    if transform is not None and transform not in TRANSFORMS:
        raise RulesError(f"{where}: unknown transform {transform!r}")
    return Rule(
        ref=RuleRef(label, name),
        globs=glob_list(table.get("match"), where, "match"),
        kinds=_kinds(table.get("kind"), where),
        output=output,
        action=action,
        patch=_opt_bool(table, "patch", where),
        keep_runpath=_opt_bool(table, "keep_runpath", where),
        runpath_append=string_list(table.get("runpath_append", []), where, "runpath_append"),
        transform=transform,
        description=str(table.get("description", "")),
        fallback=_fallback(table.get("fallback"), where),
    )


def _fallback(value: Any, where: str) -> str | None:
    if value is not None and value not in OUTPUT_NAMES:
        raise RulesError(f"{where}: unknown fallback output {value!r}")
    return None if value is None else str(value)


def _kinds(value: Any, where: str) -> frozenset[str] | None:
    if value is None:
        return None
    kinds = string_list(value, where, "kind")
    bad = sorted(set(kinds) - KIND_NAMES)
    if bad:
        raise RulesError(f"{where}: unknown kind(s) {', '.join(bad)} "
                         f"(known: {', '.join(sorted(KIND_NAMES))})")
    return frozenset(kinds)


def _opt_bool(table: Mapping[str, Any], key: str, where: str) -> bool | None:
    value = table.get(key)
    if value is not None and not isinstance(value, bool):
        raise RulesError(f"{where}: '{key}' must be true or false")
    return value


def _load_renames(entries: Any, filename: str, label: str) -> list[Rename]:
    if not isinstance(entries, list):
        raise RulesError(f"{filename}: 'rename' must be an array of tables ([[rename]])")
    renames = []
    for index, entry in enumerate(entries):
        table = _table(entry, filename, f"rename #{index + 1}")
        name = table.get("name") or f"rename #{index + 1}"
        where = f"{filename}:{name}"
        _check_keys(table, RENAME_KEYS, filename, str(name))
        source, target = table.get("from"), table.get("to")
        if not isinstance(source, str) or not isinstance(target, str) or not source or not target:
            raise RulesError(f"{where}: 'from' and 'to' (directory prefixes) are required")
        climbs = ".." in (source + "/" + target).split("/")
        if source.startswith("/") or target.startswith("/") or climbs:
            raise RulesError(f"{where}: 'from' and 'to' must be relative paths without '..'")
        renames.append(Rename(RuleRef(label, str(name)), source.rstrip("/") + "/",
                              target.rstrip("/") + "/", bool(table.get("link_back", False))))
    return renames


def _load_package(tables: Sequence[tuple[str, Mapping[str, Any]]]) -> PackageSettings:
    merged: dict[str, Any] = {}
    for filename, table in tables:
        _check_keys(table, PACKAGE_KEYS, filename, "[package]")
        for key, value in table.items():
            merged.setdefault(key, (filename, value))
    outputs = None
    if "outputs" in merged:
        filename, value = merged["outputs"]
        outputs = string_list(value, f"{filename}:[package]", "outputs")
        bad = sorted(set(outputs) - set(OUTPUT_NAMES))
        if bad:
            raise RulesError(f"{filename}:[package]: unknown output(s) {', '.join(bad)}")
    lift: tuple[Glob, ...] = ()
    if "lift" in merged:
        filename, value = merged["lift"]
        # A lift names directories: "nsight-systems/*/" and "nsight-systems/*" mean the same.
        patterns = [p.rstrip("/") for p in string_list(value, f"{filename}:[package]", "lift")]
        lift = glob_list(patterns, f"{filename}:[package].lift", "match")
    stubs_libdir: tuple[Glob, ...] = ()
    if "pkgconfig_stubs_libdir" in merged:
        filename, value = merged["pkgconfig_stubs_libdir"]
        stubs_libdir = glob_list(value, f"{filename}:[package].pkgconfig_stubs_libdir", "match")
    replace_needed: dict[str, str] = {}
    if "replace_needed" in merged:
        filename, value = merged["replace_needed"]
        table = _table(value, filename, "replace_needed")
        if not all(isinstance(v, str) and v and "/" not in v and k and "\0" not in k + v
                   for k, v in table.items()):
            raise RulesError(f"{filename}:[package].replace_needed: values must be library names")
        replace_needed = {str(k): str(v) for k, v in table.items()}
    stub_links: dict[str, str] = {}
    if "stub_links" in merged:
        filename, value = merged["stub_links"]
        stub_links = {str(k): str(v) for k, v in _table(value, filename, "stub_links").items()}
    return PackageSettings(
        outputs=outputs,
        cuda_compat=bool(merged.get("cuda_compat", (None, False))[1]),
        runpath_append=string_list(merged.get("runpath_append", (None, []))[1], "[package]",
                                 "runpath_append"),
        lift=lift,
        stub_links=stub_links,
        pkgconfig_driver_rpath=bool(merged.get("pkgconfig_driver_rpath", (None, False))[1]),
        pkgconfig_stubs_libdir=stubs_libdir,
        optional_outputs=string_list(merged.get("optional_outputs", (None, []))[1], "[package]",
                                   "optional_outputs"),
        replace_needed=replace_needed,
        dlopen=parse_dlopen_key(merged.get("dlopen", (None, []))[1], "[package] dlopen"),
        **_load_table_entries(merged),
    )


def _load_table_entries(merged: Mapping[str, tuple[str, Any]]) -> dict[str, Any]:
    """The structured package-table keys (see _pkgtable.py)."""
    def get(key: str) -> tuple[str, Any]:
        return merged.get(key, ("[package]", None))

    values: dict[str, Any] = {}
    filename, value = get("propagated_outputs")
    outputs = string_list(value, f"{filename}:[package]", "propagated_outputs")
    if set(outputs) - set(OUTPUT_NAMES):
        raise RulesError(f"{filename}:[package]: unknown propagated output(s)")
    values["propagated_outputs"] = outputs
    parsers = {"copy_packages": parse_package_refs,
               "pkgconfig_edits": parse_pc_edits, "output_when": parse_output_when,
               "drop": parse_drops, "add_needed": parse_add_needed,
               "link_into": parse_link_into, "text_edits": parse_text_edits}
    for key, parse in parsers.items():
        filename, value = get(key)
        if value is not None:
            values["drops" if key == "drop" else key] = parse(value, filename)
    for key in ("nvcc_includes", "nvcc_libraries"):
        filename, value = get(key)
        values[key] = string_list(value, f"{filename}:[package]", key)
    for key in ("allow_fhs_references",):
        filename, value = get(key)
        if value is not None and not isinstance(value, bool):
            raise RulesError(f"{filename}:[package].{key}: must be true or false")
        values[key] = bool(value)
    for key in ("compiler", "redist"):
        filename, value = get(key)
        if value is not None:
            if not isinstance(value, str):
                raise RulesError(f"{filename}:[package].{key}: must be a string")
            values[key] = value
    return values


def describe_package(package: PackageSettings) -> list[str]:
    """The package-table entry as ``key: value`` lines (``rules show --package``); keys left
    at their defaults are shown too, so the entry reads the same for every package."""
    return [f"{name} = {_describe(getattr(package, name))}"
            for name in PackageSettings.__dataclass_fields__]


def _describe(value: Any) -> str:
    if isinstance(value, Glob):
        return value.pattern
    if isinstance(value, RunpathPackage):
        gate = value.gate.describe()
        return value.entry() + (f" ({gate})" if gate else "")
    if is_dataclass(value) and not isinstance(value, type):  # PcEdit, DropEdit, DlopenNeed, ...
        parts = []
        for name in type(value).__dataclass_fields__:
            item = getattr(value, name)
            if name == "gate":
                if item.describe():
                    parts.append(f"when {item.describe()}")
            elif item not in ((), False, None, ""):
                parts.append(f"{name}={_describe(item)}")
        return "{" + "; ".join(parts) + "}"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {_describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        return "[" + ", ".join(_describe(v) for v in value) + "]"
    return str(value)
