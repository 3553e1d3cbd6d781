# A stand-in for <nixpkgs> (import nixpkgs { system; config; } -> pkgs with callPackage) to
# evaluate the release.nix `cudasplit nixify-sets` writes (tests/test_nixify_sets.py).
{ system, config ? { } }:
let
  lib = {
    licenses.unfree = { shortName = "unfree"; free = false; };
    getOutput = o: p: p.${o} or p.out or p;
    getLib = p: p.lib or p.out or p;
    getDev = p: p.dev or p.out or p;
    concatMapStrings = f: l: builtins.concatStringsSep "" (map f l);
    makeLibraryPath = ps: builtins.concatStringsSep ":" (map (p: "${lib.getLib p}/lib") ps);
  };
  stdenv = {
    hostPlatform.system = system;
    cc.cc.lib = { outPath = "/nix/store/33333333333333333333333333333333-gcc-lib"; };
    mkDerivation = a:
      let
        outs = builtins.listToAttrs (map (o: {
          name = o;
          value = { outPath = "/nix/store/00000000000000000000000000000000-${a.name}-${o}"; };
        }) a.outputs);
      in a // outs // { outPath = outs.out.outPath; system = system; };
  };
  fetchurl = a: a // { outPath = "/nix/store/11111111111111111111111111111111-src"; };
  runCommand = name: env: script: { inherit name script; };
  zlib = { outPath = "/nix/store/44444444444444444444444444444444-zlib"; };
  pkgs = {
    inherit lib stdenv fetchurl runCommand config zlib;
    callPackage = f: args: import f ({ inherit lib stdenv fetchurl runCommand config zlib; }
      // args);
  };
in
pkgs
