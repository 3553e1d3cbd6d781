# A stand-in for <nixpkgs> (import nixpkgs { system; config; overlays; } -> pkgs with
# callPackage and the overlays applied) to evaluate the release.nix `cudasplit nixify-sets`
# writes (tests/nix/test_nixify_sets.py). lib is lib-standin.nix; no splicing.
{ system, config ? { }, overlays ? [ ] }:
let
  lib = import ./lib-standin.nix;
  mkDerivation = a:
    let
      outs = builtins.listToAttrs (map (o: {
        name = o;
        value = { outPath = "/nix/store/00000000000000000000000000000000-${a.name}-${o}"; };
      }) a.outputs);
    in a // (a.passthru or { }) // outs // {
      type = "derivation";
      outPath = outs.out.outPath;
      inherit system;
    };
  stdenv = {
    hostPlatform.system = system;
    cc.cc.lib = { outPath = "/nix/store/33333333333333333333333333333333-gcc-lib"; };
    inherit mkDerivation;
  };
  base = final: {
    inherit lib config stdenv;
    stdenvNoCC = stdenv;
    fetchurl = a: a // { outPath = "/nix/store/11111111111111111111111111111111-src"; };
    runCommand = name: env: script: { inherit name script; type = "derivation"; };
    zlib = { outPath = "/nix/store/44444444444444444444444444444444-zlib"; };
    numactl = { outPath = "/nix/store/44444444444444444444444444444444-numactl"; };
    rdma-core = { outPath = "/nix/store/44444444444444444444444444444444-rdma-core"; };
    newScope = extra: lib.callPackageWith (final // extra);
    callPackage = lib.callPackageWith final;
    makeScopeWithSplicing' = { f, ... }: lib.makeScope final.newScope f;
    generateSplicesForMkScope = _: { };
  };
  # The overlays over the base, as Nixpkgs composes them (final is the fixed point).
  pkgs = let
    apply = prev: overlay: prev // overlay final prev;
    final = builtins.foldl' apply (base final) overlays;
  in final;
in
pkgs
