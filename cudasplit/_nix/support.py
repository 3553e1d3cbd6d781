"""The ``nix-support/`` files buildRedist writes (``--nix-support``).

* every output: ``nix-support/include-in-cudatoolkit-root`` (empty marker: the output belongs
  in a merged cudatoolkit root, markForCudatoolkitRootHook);
* ``out`` and ``dev``: ``nix-support/propagated-build-inputs`` listing the *propagated*
  outputs only -- bin, include and lib where they exist; ``dev`` also the package's own
  ``propagated_outputs`` (cuda_cudart: static and stubs; cuda_nvml_dev: stubs). Static archives
  and stubs are not dragged into every consumer's closure (NixOS/nixpkgs#323056);
* every output: ``nix-support/cuda-component`` (cudaComponentHook's metadata, format 3; a
  compiler package publishes it on the output holding the compiler only);
* every output with ``cuda-component``, given the collector (``--cuda-component-hook``, the
  store path of Nixpkgs' cudaComponentHook): ``nix-support/setup-hook`` starts with
  ``source <collector>/nix-support/setup-hook``, as cudaComponentHook's
  ``_cudaPublishComponents`` writes it (``printf 'source %q\n%s\n'``), so a consumer that
  depends on the output collects the component without naming the hook itself;
* with ``consumer_guards`` (``--consumer-guards``): ``lib`` (``out`` when there is no lib)
  gets ``consumer-guards-hook.sh`` in its ``nix-support/setup-hook`` (after the collector line
  when there is one): ambiguous RUNPATHs, dlopen RUNPATH entries and closure budgets checked
  in every consumer's fixup;
* every output holding a ``stubs`` directory: ``nix-support/setup-hook``, the consumer hook
  (``stubs-consumer-hook.sh``): stdenv sources it in every derivation that depends on the
  output, and after fixup it replaces the first ``*/lib/stubs`` RUNPATH entry of the consumer's
  ELF files by the driver directory and drops later ones (removeStubsFromRunpathHook).

The split writes them through its sink, so they land in whatever the sink produces (Nix
outputs, a directory, tarballs). ``out`` referencing the others means no other output may reference
``out`` (Nix would report a cycle); the pipeline never links outputs to each other.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from cudasplit.errors import OptionsError

MARKER = "nix-support/include-in-cudatoolkit-root"
PROPAGATED = "nix-support/propagated-build-inputs"
COMPONENT = "nix-support/cuda-component"
SETUP_HOOK = "nix-support/setup-hook"
_IDENTIFIER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


@dataclass(frozen=True, slots=True)
class NixSupport:
    """What the nix-support files say about the package (None: the plain markers only)."""

    pname: str | None = None
    version: str | None = None
    cuda_version: str | None = None
    propagated: tuple[str, ...] | None = None   # None: every other output (no package table)
    compiler: str | None = None                  # "bin/nvcc": publish on its output only
    compiler_output: str | None = None
    stubs_outputs: tuple[str, ...] = ()          # outputs holding a stubs directory
    driver_lib: str = "/run/opengl-driver/lib"
    component_hook: str | None = None            # cudaComponentHook's store path
    # Final root of each output (the run's layout): propagated-build-inputs names them.
    roots: tuple[tuple[str, str], ...] = ()
    consumer_guards: bool = False                # consumer-guards-hook.sh into lib (else out)


def nix_support_files(outputs: Sequence[str], info: NixSupport | None = None
                      ) -> list[tuple[str, str, bytes]]:
    """The files to write, ``(output, path, bytes)`` in writing order, for a split whose
    ``outputs`` exist (``out`` among them): markers in every output, propagation in out/dev,
    component metadata, the stubs hook. Pure: the split writes them through its sink."""
    info = info or NixSupport()
    files = [(output, MARKER, b"") for output in outputs]
    propagated = info.propagated
    if propagated is None:
        propagated = tuple(o for o in outputs if o != "out")
    files += _propagation(outputs, propagated, dict(info.roots))
    hooks = {o: stubs_hook_text(info.driver_lib).decode() for o in info.stubs_outputs
             if o in outputs}
    components = _components(outputs, info)
    files += components
    for output, _, _ in components:
        if info.component_hook is not None:
            hooks[output] = collector_line(info.component_hook, hooks.get(output, ""))
    if info.consumer_guards:
        # lib is what out and dev propagate, so every consumer sources it.
        holder = "lib" if "lib" in outputs else "out"
        hooks[holder] = hooks.get(holder, "") + guards_hook_text()
    files += [(output, SETUP_HOOK, text.encode()) for output, text in sorted(hooks.items())]
    return files


def _propagation(outputs: Sequence[str], propagated: Sequence[str],
                 final_roots: Mapping[str, str]) -> list[tuple[str, str, bytes]]:
    """Nixpkgs writes the whole list to out (fixupCudaPropagatedBuildOutputsToOut) and dev.

    Deliberately better: out lists bin/include/lib only; a package's extra propagated outputs
    (cuda_cudart's static and stubs, cuda_nvml_dev's stubs) are listed by dev alone. stdenv
    hands consumers the dev output of a build input, so builds still get them, while out -- what
    a runtime closure holds -- never references static archives or stubs (#323056).
    """
    base = [o for o in propagated if o in ("bin", "include", "lib")]
    has_dev = "dev" in outputs
    files = []
    for holder, listed in (("out", base if has_dev else propagated), ("dev", propagated)):
        if holder not in outputs:
            continue
        roots = [final_roots.get(o, "/${" + o + "}") for o in listed
                 if o in outputs and o != holder]
        if roots or holder == "out":
            text = " ".join(roots) + "\n" if roots else ""
            files.append((holder, PROPAGATED, text.encode()))
    return files


def _components(outputs: Sequence[str], info: NixSupport) -> list[tuple[str, str, bytes]]:
    """The metadata files, one per output that gets it."""
    if not info.pname or not info.version or not _IDENTIFIER.match(info.pname):
        return []
    targets = [info.compiler_output] if info.compiler and info.compiler_output else outputs
    return [(o, COMPONENT, component_text(info, o).encode()) for o in targets if o in outputs]


def collector_line(hook_root: str, existing: str) -> str:
    """``printf 'source %q\\n%s\\n' "$collectorPath" "$existingSetupHook"``: the collector
    first, then the output's own hook (``$(<file)`` drops its trailing newlines)."""
    collector = hook_root.rstrip("/") + "/nix-support/setup-hook"
    return f"source {bash_q(collector)}\n{existing.rstrip(chr(10))}\n"


_PLAIN = re.compile(r"[A-Za-z0-9_./+:@%,=-]+")


def bash_q(word: str) -> str:
    """Bash's ``printf %q`` for printable text: special characters backslash-escaped."""
    if not word:
        return "''"
    if any(not ch.isprintable() for ch in word):
        raise OptionsError(f"cannot quote {word!r} for a setup hook")
    return "".join(ch if _PLAIN.fullmatch(ch) else "\\" + ch for ch in word)


def component_text(info: NixSupport, output: str) -> str:
    """``declare -p cudaComponentMetadata`` as bash prints it (the hook sources the file)."""
    fields = {"format": "3", "component": info.pname or "", "output": output,
              "cudaComponentVersion": info.version or ""}
    if info.cuda_version:
        fields["cudaMajorMinorVersion"] = info.cuda_version
    if info.compiler:
        fields["compiler"] = info.compiler
    body = " ".join(f'[{key}]="{_bash_quote(value)}"' for key, value in fields.items())
    return f"declare -A cudaComponentMetadata=({body} )\n"


def _bash_quote(value: str) -> str:
    return re.sub(r'(["\\$`])', r"\\\1", value)


def stubs_hook_text(driver_lib: str) -> bytes:
    template = resources.files("cudasplit").joinpath("nix/stubs-consumer-hook.sh").read_text()
    return template.replace("@driverLinkLib@", driver_lib).encode()


def guards_hook_text() -> str:
    """consumer-guards-hook.sh: ambiguous RUNPATHs, dlopen entries, closure budgets."""
    return resources.files("cudasplit").joinpath("nix/consumer-guards-hook.sh").read_text()


# -- checkCudaFhsRefs -------------------------------------------------------------------------

FHS_NEEDLE = b"/usr/"
_CHUNK = 1 << 20


def find_fhs_refs(roots: Mapping[str, Path], limit: int = 5) -> list[tuple[str, str]]:
    """``(output, relative path)`` of files mentioning ``/usr/`` (LICENSE files excepted, as
    checkCudaFhsRefs' ``grep --exclude=LICENSE``); at most ``limit``."""
    found: list[tuple[str, str]] = []
    for output, root in sorted(roots.items()):
        for path in _regular_files(root):
            if path.name != "LICENSE" and _mentions_usr(path):
                found.append((output, path.relative_to(root).as_posix()))
                if len(found) >= limit:
                    return found
    return found


def _regular_files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                yield path


def _mentions_usr(path: Path) -> bool:
    tail = b""
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            if FHS_NEEDLE in tail + chunk:
                return True
            tail = chunk[-(len(FHS_NEEDLE) - 1):]
    return False
