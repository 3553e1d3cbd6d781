# A small stand-in for the Nixpkgs attributes `cudasplit nixify-sets` output uses, for
# `nix-instantiate --eval --strict` in tests/nix/test_nixify_sets.py (no nixpkgs needed).
{ dir, system, setName, enableCompat ? false, caps ? [ ] }:
let
  lib = {
    versions.majorMinor = v: builtins.concatStringsSep "." (builtins.genList
      (i: builtins.elemAt (builtins.splitVersion v) i) 2);
    licenses.unfree = { shortName = "unfree"; free = false; };
    getOutput = o: p: p.${o} or p.out or p;
    getLib = p: p.lib or p.out or p;
    getDev = p: p.dev or p.out or p;
    concatMapStrings = f: l: builtins.concatStringsSep "" (map f l);
    makeLibraryPath = ps: builtins.concatStringsSep ":" (map (p: "${lib.getLib p}/lib") ps);
  };
  stdenv = {
    hostPlatform.system = system;
    cc.cc.lib = { pname = "gcc-lib"; outPath = "/nix/store/33333333333333333333333333333333-gcc-lib"; };
    cc.libc = { pname = "glibc"; version = "2.42"; };
    mkDerivation = a:
      let
        outs = builtins.listToAttrs (map (o: {
          name = o;
          value = { outPath = "/nix/store/00000000000000000000000000000000-${a.name}-${o}"; };
        }) a.outputs);
      in a // outs // { outPath = outs.out.outPath; };
  };
  fetchurl = a: a // { outPath = "/nix/store/11111111111111111111111111111111-src"; };
  runCommand = name: env: script: { inherit name script; };
  zlib = { pname = "zlib"; outPath = "/nix/store/44444444444444444444444444444444-zlib"; };
  cudasplit = { pname = "cudasplit"; outPath = "/nix/store/22222222222222222222222222222222-cudasplit"; };
  sets = import (dir + "/default.nix");
  set = import sets.${setName} {
    inherit lib stdenv fetchurl runCommand cudasplit zlib;
    config.enableCudaDriverCompat = enableCompat;
    cudaCapabilities = caps;
  };
in
builtins.mapAttrs (n: d: {
  inherit (d) pname version outputs name;
  propagated = map (p: p.pname) d.propagatedBuildInputs;
  buildInputs = map (p: p.pname) d.buildInputs;
  libraryPath = d.cudasplitLibraryPath;
  glibc = d.cudasplitGlibcVersion;
  broken = d.meta.broken;
  problems = d.meta.cudasplitProblems;
  platforms = d.meta.platforms;
  knownVulnerabilities = d.meta.knownVulnerabilities;
  url = if d.src == null then null else d.src.url;
  license = d.meta.license.fullName;
  tests = builtins.mapAttrs (t: v: v.script) d.passthru.tests;
}) set
