# A small stand-in for the Nixpkgs attributes `cudasplit nixify-sets` output uses, for
# `nix-instantiate --eval --strict` in tests/nix/test_nixify_sets.py (no nixpkgs needed):
# lib from lib-standin.nix, a callPackage/makeScope package set (no splicing: the real lib's
# makeScopeWithSplicing' is exercised by tests/nix/test_real_lib.py), a stdenv.mkDerivation
# that returns its arguments with every output's path, config as Nixpkgs' config.
{ dir, system, setName, enableCompat ? false, caps ? [ ], cudaSupport ? true }:
let
  lib = import ./lib-standin.nix;
  config = {
    inherit cudaSupport;
    enableCudaDriverCompat = enableCompat;
    cudaCapabilities = caps;
  };
  mkDerivation = a:
    let
      outs = builtins.listToAttrs (map (o: {
        name = o;
        value = { outPath = "/nix/store/00000000000000000000000000000000-${a.name}-${o}"; };
      }) a.outputs);
    in a // (a.passthru or { }) // outs // {
      type = "derivation";
      outPath = outs.out.outPath;
      drvAttrs = a;
    };
  stdenv = {
    hostPlatform.system = system;
    cc.cc.lib = { pname = "gcc-lib"; outPath = "/nix/store/33333333333333333333333333333333-gcc-lib"; };
    cc.libc = { pname = "glibc"; version = "2.42"; };
    cc.bintools.dynamicLinker = "/nix/store/55555555555555555555555555555555-glibc/lib/ld-linux-x86-64.so.2";
    inherit mkDerivation;
  };
  pkgs = {
    inherit lib config stdenv;
    stdenvNoCC = stdenv // { cc = null; };
    fetchurl = a: a // { outPath = "/nix/store/11111111111111111111111111111111-src"; };
    runCommand = name: env: script: { inherit name script; type = "derivation"; };
    zlib = { pname = "zlib"; outPath = "/nix/store/44444444444444444444444444444444-zlib"; };
    cudasplit = { pname = "cudasplit"; outPath = "/nix/store/22222222222222222222222222222222-cudasplit"; };
    newScope = extra: lib.callPackageWith (pkgs // extra);
    callPackage = lib.callPackageWith pkgs;
    makeScopeWithSplicing' = { f, otherSplices ? { }, ... }: lib.makeScope pkgs.newScope f;
    generateSplicesForMkScope = _: { };
  };
  sets = import (dir + "/default.nix");
  set = pkgs.callPackage sets.${setName} { };
in
builtins.mapAttrs (n: d: {
  inherit (d) pname version outputs name;
  propagated = map (p: p.pname) d.propagatedBuildInputs;
  targetPropagated = map (p: p.pname) (d.depsTargetTargetPropagated or [ ]);
  buildInputs = map (p: p.pname) d.buildInputs;
  libraryPath = d.cudasplitLibraryPath;
  glibc = d.cudasplitGlibcVersion;
  interpreter = d.cudasplitInterpreter;
  inherit (d) strictDeps __structuredAttrs outputInclude outputDev outputLib outputStubs;
  broken = d.meta.broken;
  # What Nixpkgs refuses to evaluate: broken, or the host platform a bad one.
  unavailable = d.meta.broken || builtins.elem system d.meta.badPlatforms;
  problems = map (p: p.message) (builtins.attrValues d.meta.problems)
    ++ builtins.attrValues d.platformProblems;
  problemKinds = map (p: p.kind) (builtins.attrValues d.meta.problems);
  badPlatforms = d.meta.badPlatforms;
  platforms = d.meta.platforms;
  sourceProvenance = map (s: s.shortName) d.meta.sourceProvenance;
  knownVulnerabilities = d.meta.knownVulnerabilities;
  url = if d.src == null then null else d.src.url;
  sha256 = if d.src == null then null else d.src.sha256;
  description = d.meta.description;
  license = d.redistLicense;
  licenseName = d.meta.license.shortName;
  licenseFree = d.meta.license.free;
  redistName = d.redistName;
  tests = builtins.mapAttrs (t: v: v.script) d.tests;
}) (lib.filterAttrs (_: lib.isDerivation) set)
