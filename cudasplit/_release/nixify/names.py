"""Names a manifest key may not take: those the generated Nix uses for something else.

A package's name becomes an attribute of its package set, a ``callPackage`` argument of every
package that uses it and, for ``nixify``, a file name. A key equal to a name the generated files
give another meaning (the set's own attributes and machinery, the Nixpkgs attributes its
packages take as arguments, ``nixify``'s own files) would shadow it for every package of the
set, or make an attribute set with one name twice (which does not even parse), or overwrite a
file. Such a key is refused, naming the manifest, before anything is written.
"""

from __future__ import annotations

from cudasplit._release.nixify.nixlang import ident
from cudasplit._release.nixify.tables import NEEDS_OUTSIDE, PROPAGATES_OUTSIDE
from cudasplit.errors import ManifestError

__all__ = ["RESERVED", "package_key"]

# What a package scope has besides its packages: lib.makeScope's machinery, what splicing adds,
# the values Nixpkgs' cudaPackages_X_Y carries (a drop-in keeps them meaning what they mean
# there), and the Nixpkgs attributes the generated files take by name.
_SCOPE = {"callPackage", "callPackages", "newScope", "overrideScope", "overrideScope'",
          "packages", "override", "overrideDerivation", "recurseForDerivations",
          "__splicedPackages", "__spliced", "__attrsFailEvaluation"}
_SET_VALUES = {"cudaMajorMinorVersion", "cudaMajorMinorPatchVersion", "cudaMajorVersion",
               "cudaNamePrefix", "cudaOlder", "cudaAtLeast", "cudaCapabilities", "cudaPackages",
               "cudaConfig", "flags", "backendStdenv", "buildRedist", "manifests", "pkgs",
               "redistSystem", "hasJetsonCudaCapability", "mkRedist", "outputFallbacks",
               "cudaLicenses", "cudatoolkit"}
_NIXPKGS_ARGS = {"lib", "config", "stdenv", "stdenvNoCC", "fetchurl", "runCommand",
                 "cudasplit", "makeScopeWithSplicing'", "generateSplicesForMkScope",
                 "spliceAttrPath", "base", "_cuda"}
# nixify's own files and attributes: default.nix and the toolkit prefix.
_NIXIFY = {"default", "cudaToolkit"}

RESERVED = frozenset(_SCOPE | _SET_VALUES | _NIXPKGS_ARGS | _NIXIFY
                     | {n for names in NEEDS_OUTSIDE.values() for n in names}
                     | {e.package for edges in PROPAGATES_OUTSIDE.values() for e in edges})


def package_key(name: str, source: str) -> str:
    """``name`` when it may name a package (a Nix identifier, not a name of :data:`RESERVED`);
    else a ``ManifestError`` in one line naming ``source``."""
    ident(name, f"{source}: package key")
    if name in RESERVED:
        raise ManifestError(f"{source}: package key {name!r} is a name the generated Nix "
                            "gives something else (an attribute or argument of the package "
                            "set, or one of nixify's files), not a package: refused")
    return name
