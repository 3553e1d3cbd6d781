# A small stand-in for the Nixpkgs attributes `cudasplit nixify-sets` output uses, for
# `nix-instantiate --eval --strict` in tests/nix/test_nixify_sets.py (no nixpkgs needed):
# lib from lib-standin.nix, a callPackage/makeScope package set (no splicing: the real lib's
# makeScopeWithSplicing' is exercised by tests/nix/test_real_lib.py), a stdenv.mkDerivation
# that returns its arguments with every output's path, config as Nixpkgs' config.
# `realLib`: a real Nixpkgs lib/ to use instead of the stand-in (CUDASPLIT_NIXPKGS_LIB);
# `withBase`: evaluate the set as the overlay does over a Nixpkgs set of the same name (a scope
# holding one package of its own, `nccl`, built against the set's cuda_cudart).
{ dir, system, setName, enableCompat ? false, caps ? [ ], cudaSupport ? true,
  realLib ? null, withBase ? false }:
let
  lib = if realLib == null then import ./lib-standin.nix else import realLib;
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
    buildPlatform.system = system;
    targetPlatform.system = system;
    cc.cc.lib = { pname = "gcc-lib"; outPath = "/nix/store/33333333333333333333333333333333-gcc-lib"; };
    cc.libc = { pname = "glibc"; version = "2.42"; };
    cc.bintools.dynamicLinker = "/nix/store/55555555555555555555555555555555-glibc/lib/ld-linux-x86-64.so.2";
    inherit mkDerivation;
  };
  outside = name: { pname = name; outPath = "/nix/store/44444444444444444444444444444444-${name}"; };
  pkgs = {
    inherit lib config stdenv;
    stdenvNoCC = stdenv // { cc = null; };
    fetchurl = a: a // { outPath = "/nix/store/11111111111111111111111111111111-src"; };
    runCommand = name: env: script: { inherit name script; type = "derivation"; };
    zlib = outside "zlib";
    numactl = outside "numactl";
    rdma-core = outside "rdma-core";
    cudasplit = { pname = "cudasplit"; outPath = "/nix/store/22222222222222222222222222222222-cudasplit"; };
    newScope = extra: lib.callPackageWith (pkgs // extra);
    callPackage = lib.callPackageWith pkgs;
    makeScopeWithSplicing' = { f, otherSplices ? { }, ... }: lib.makeScope pkgs.newScope f;
    generateSplicesForMkScope = _: { };
  };
  # Nixpkgs' own set, as far as the overlay sees it: its values and a package built against
  # the set's cuda_cudart.
  base = lib.makeScope pkgs.newScope (final: {
    cudaMajorMinorVersion = "nixpkgs";
    nccl = final.callPackage ({ cuda_cudart }: { type = "derivation"; pname = "nccl";
      cudart = cuda_cudart.version; }) { };
  });
  sets = import (dir + "/default.nix");
  set = pkgs.callPackage sets.${setName} (lib.optionalAttrs withBase { inherit base; });
  failed = list: map (a: a.message) (builtins.filter (a: !a.assertion) list);
in
if withBase then { inherit (set) cudaMajorMinorVersion; ncclCudart = set.nccl.cudart;
  cudart = set.cuda_cudart.version; }
else
builtins.mapAttrs (n: d: {
  inherit (d) pname version outputs name;
  drvName = d.name;
  flags = d.cudasplitFlags;
  propagated = map (p: p.pname) d.propagatedBuildInputs;
  targetPropagated = map (p: p.pname) (d.depsTargetTargetPropagated or [ ]);
  buildInputs = map (p: p.pname) d.buildInputs;
  libraryPath = d.cudasplitLibraryPath;
  glibc = d.cudasplitGlibcVersion;
  interpreter = d.cudasplitInterpreter;
  inherit (d) strictDeps __structuredAttrs outputInclude outputDev outputLib outputStubs
    outputOut outputBin outputStatic;
  broken = d.meta.broken;
  # What Nixpkgs refuses to evaluate: broken, a problem of kind broken, or the host platform a
  # bad one.
  unavailable = d.meta.broken || builtins.elem system d.meta.badPlatforms
    || builtins.any (p: p.kind == "broken") (builtins.attrValues (d.meta.problems or { }));
  problems = failed d.brokenAssertions ++ failed d.platformAssertions
    ++ map (p: p.message) (builtins.attrValues (d.meta.problems or { }));
  brokenFailed = failed d.brokenAssertions;
  platformFailed = failed d.platformAssertions;
  brokenMessages = map (a: a.message) d.brokenAssertions;
  platformMessages = map (a: a.message) d.platformAssertions;
  problemKinds = map (p: p.kind) (builtins.attrValues (d.meta.problems or { }));
  problemNames = builtins.attrNames (d.meta.problems or { });
  longDescription = d.meta.longDescription;
  badPlatforms = d.meta.badPlatforms;
  platforms = d.meta.platforms;
  metaKeys = builtins.attrNames d.meta;
  passthruKeys = builtins.attrNames d.passthru;
  sourceProvenance = map (s: s.shortName) d.meta.sourceProvenance;
  knownVulnerabilities = d.meta.knownVulnerabilities or [ ];
  url = if d.src == null then null else d.src.url;
  sha256 = if d.src == null then null else d.src.sha256;
  description = d.meta.description or null;
  licenses = map (l: l.shortName) d.meta.license;
  licenseFree = map (l: l.free) d.meta.license;
  inherit (d) redistName supportedRedistSystems supportedNixSystems expectedOutputs
    outputToPatterns outputNameVarFallbacks;
  release = d.release;
  tests = builtins.mapAttrs (t: v: v.script) d.tests;
}) (lib.filterAttrs (_: lib.isDerivation) set)
