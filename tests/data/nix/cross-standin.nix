# Nixpkgs' package sets for an x86_64-linux -> aarch64-linux cross build, just enough to
# evaluate generated sets with a real or stand-in `lib` (tests/nix/test_real_lib.py): three
# stages (build x86_64 for x86_64, x86_64 tools targeting aarch64, aarch64 packages), each with
# callPackage = lib.callPackageWith and makeScopeWithSplicing' = lib.makeScopeWithSplicing'
# over our splicePackages/generateSplicesForMkScope (splice.nix's contract: every derivation of
# pkgsHostTarget gets __spliced.{buildBuild,buildHost,buildTarget,hostHost,hostTarget,
# targetTarget}); stdenv.mkDerivation picks the splice each dependency list asks for
# (make-derivation.nix: nativeBuildInputs buildHost, buildInputs hostTarget,
# depsTargetTargetPropagated targetTarget) and records what it picked. Platforms from
# lib.systems.elaborate. Our own code; no Nixpkgs code.
{ lib, dir, config ? { cudaSupport = true; allowUnfree = true; } }:
let
  x86 = lib.systems.elaborate "x86_64-linux";
  arm = lib.systems.elaborate "aarch64-linux";
  sets = import (dir + "/default.nix");
  pick = splice: d: if builtins.isAttrs d then d.__spliced.${splice} or d else d;
  stage = name: host: target: splices: final:
    let
      mkDerivation = a:
        let
          outs = builtins.listToAttrs (map (o: {
            name = o;
            value = { outPath = "/nix/store/${name}-${a.name}-${o}"; outputName = o; };
          }) (a.outputs or [ "out" ]));
        in a // (a.passthru or { }) // outs // {
          type = "derivation";
          outPath = outs.out.outPath;
          system = host.system;
          nativeBuildInputs = map (pick "buildHost") (a.nativeBuildInputs or [ ]);
          buildInputs = map (pick "hostTarget") (a.buildInputs or [ ]);
          propagatedBuildInputs = map (pick "hostTarget") (a.propagatedBuildInputs or [ ]);
          depsTargetTargetPropagated =
            map (pick "targetTarget") (a.depsTargetTargetPropagated or [ ]);
        };
      stdenv = {
        buildPlatform = x86; hostPlatform = host; targetPlatform = target;
        inherit mkDerivation;
        cc.cc.lib = { outPath = "/nix/store/${name}-gcc-lib"; };
        cc.libc = { pname = "glibc"; version = "2.42"; };
        cc.bintools.dynamicLinker = "/nix/store/${name}-glibc/lib/${host.libc}-loader";
      };
      # Derivations get __spliced; the package sets (cudaPackages_*) are spliced member by
      # member, as splice.nix recurses into attribute sets.
      splicePackages = s: builtins.mapAttrs (n: v:
        if lib.isDerivation v then v // { __spliced = lib.filterAttrs (_: x: x != null) {
          buildBuild = s.pkgsBuildBuild.${n} or null;
          buildHost = s.pkgsBuildHost.${n} or null;
          buildTarget = s.pkgsBuildTarget.${n} or null;
          hostHost = s.pkgsHostHost.${n} or null;
          hostTarget = v;
          targetTarget = s.pkgsTargetTarget.${n} or null;
        }; }
        else if lib.hasPrefix "cudaPackages_" n then splicePackages (builtins.mapAttrs
          (_: set: set.${n} or { }) s // { pkgsHostTarget = v; })
        else v) s.pkgsHostTarget;
      spliced = splicePackages (splices // { pkgsHostTarget = final; });
      self = {
        inherit lib config stdenv;
        stdenvNoCC = stdenv // { cc = null; };
        fetchurl = a: { inherit (a) url sha256; outPath = "/nix/store/src"; };
        runCommand = n: env: script: mkDerivation ({ name = n; inherit script; } // env);
        cudasplit = mkDerivation { name = "cudasplit"; };
        zlib = mkDerivation { name = "zlib"; outputs = [ "out" ]; };
        numactl = mkDerivation { name = "numactl"; outputs = [ "out" ]; };
        rdma-core = mkDerivation { name = "rdma-core"; outputs = [ "out" ]; };
        callPackage = lib.callPackageWith spliced;
        newScope = extra: lib.callPackageWith (final // extra);
        generateSplicesForMkScope = attr: {
          selfBuildBuild = splices.pkgsBuildBuild.${attr};
          selfBuildHost = splices.pkgsBuildHost.${attr};
          selfBuildTarget = splices.pkgsBuildTarget.${attr};
          selfHostHost = splices.pkgsHostHost.${attr};
          selfHostTarget = final.${attr};
          selfTargetTarget = splices.pkgsTargetTarget.${attr} or { };
        };
        makeScopeWithSplicing' = lib.makeScopeWithSplicing' {
          inherit splicePackages;
          newScope = extra: lib.callPackageWith (final // extra);
        };
      } // builtins.mapAttrs (n: file: final.callPackage file { spliceAttrPath = n; }) sets;
    in self;
  fix = f: let x = f x; in x;
  X = fix (stage "x86" x86 x86 { pkgsBuildBuild = X; pkgsBuildHost = X; pkgsBuildTarget = X;
                                 pkgsHostHost = X; pkgsTargetTarget = X; });
  XA = fix (stage "x86-to-arm" x86 arm { pkgsBuildBuild = X; pkgsBuildHost = X;
                                         pkgsBuildTarget = XA; pkgsHostHost = X;
                                         pkgsTargetTarget = A; });
  A = fix (stage "arm" arm arm { pkgsBuildBuild = X; pkgsBuildHost = XA; pkgsBuildTarget = XA;
                                 pkgsHostHost = A; pkgsTargetTarget = A; });
in
{ build = X; buildHost = XA; host = A; }
