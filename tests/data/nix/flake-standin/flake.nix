# A stand-in for the nixpkgs flake input of our flake.nix, for `nix flake check` without the
# network: `lib` (the `lib` input: the files here, or the real nixpkgs.lib flake through
# --override-input nixpkgs/lib) and legacyPackages.<system> with a callPackage and a
# buildPythonApplication that makes a real (trivial) derivation of the given source.
{
  inputs.lib.url = "path:./lib-flake";
  outputs = { self, lib }:
    let
      l = lib.lib;
      pkgsFor = system: rec {
        callPackage = l.callPackageWith (pkgs // { lib = l; });
        pkgs = {
          python3Packages = {
            buildPythonApplication = a: derivation {
              name = "${a.pname}-${a.version}";
              inherit system;
              builder = "/bin/sh";
              args = [ "-c" "echo ${a.src} > $out" ];
            } // { inherit (a) pname version meta; };
            hatchling = null; click = null; lief = null; pyelftools = null; zstandard = null;
          };
          xz = null; zstd = null;   # only named in makeWrapperArgs, never built here
        };
      };
    in {
      lib = l;
      legacyPackages = l.genAttrs [ "x86_64-linux" "aarch64-linux" ] pkgsFor;
    };
}
