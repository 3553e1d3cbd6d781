# A small stand-in for the parts of Nixpkgs' `lib` the generated expressions and the stand-ins
# use, written for these tests (no Nixpkgs code). Each function was checked against the real
# lib (nix-community/nixpkgs.lib @de42d44, 2026-06-14) by tests/nix/test_real_lib.py, which
# evaluates the same generated sets with the real lib where it is present
# (CUDASPLIT_NIXPKGS_LIB=DIR) and compares the results; the licences are the real ones' fields.
#
# Not modelled: splicing (makeScopeWithSplicing' here is makeScope: one package set, no
# __spliced), lib.systems, overrideAttrs/override on derivations, the module system.
let
  lib = rec {
    id = x: x;
    optional = c: x: if c then [ x ] else [ ];
    optionals = c: l: if c then l else [ ];
    optionalString = c: s: if c then s else "";
    optionalAttrs = c: a: if c then a else { };
    findFirst = pred: default: l:
      let found = builtins.filter pred l; in if found == [ ] then default else builtins.head found;
    filterAttrs = pred: a: builtins.listToAttrs (builtins.filter (x: pred x.name x.value)
      (map (n: { name = n; value = a.${n}; }) (builtins.attrNames a)));
    mapAttrs = builtins.mapAttrs;
    toUpper =
      let
        letters = s: builtins.genList (i: builtins.substring i 1 s) 26;
      in
      builtins.replaceStrings (letters "abcdefghijklmnopqrstuvwxyz")
        (letters "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
    hasPrefix = pre: s: builtins.substring 0 (builtins.stringLength pre) s == pre;
    listToAttrs = builtins.listToAttrs;
    concatMapStrings = f: l: builtins.concatStringsSep "" (map f l);
    concatMapStringsSep = sep: f: l: builtins.concatStringsSep sep (map f l);
    versions.majorMinor = v: builtins.concatStringsSep "." (builtins.genList
      (i: builtins.elemAt (builtins.splitVersion v) i) 2);
    isDerivation = x: builtins.isAttrs x && (x.type or null) == "derivation";
    hydraJob = x: x;
    getOutput = o: p: p.${o} or p.out or p;
    getLib = getOutput "lib";
    getDev = getOutput "dev";
    getBin = getOutput "bin";
    makeLibraryPath = ps: builtins.concatStringsSep ":" (map (p: "${getLib p}/lib") ps);
    sourceTypes.binaryNativeCode = { shortName = "binaryNativeCode"; isSource = false; };
    licenses = {
      nvidiaCuda = {
        shortName = "CUDA EULA";
        fullName = "CUDA Toolkit End User License Agreement (EULA)";
        url = "https://docs.nvidia.com/cuda/eula/index.html#cuda-toolkit-supplement-license-agreement";
        free = false;
      };
      nvidiaCudaRedist = licenses.nvidiaCuda // { redistributable = true; };
      mit = { shortName = "MIT"; free = true; };
    };
    # callPackageWith: the function's formal arguments from autoArgs, overridden by args.
    callPackageWith = autoArgs: fn: args:
      let
        f = if builtins.isFunction fn then fn else import fn;
        formals = builtins.functionArgs f;
        auto = builtins.intersectAttrs formals autoArgs;
        result = f (auto // args);
      in
      # As the real one (makeOverridable): results that are attribute sets get override.
      if builtins.isAttrs result
      then result // { override = more: callPackageWith autoArgs fn (args // more); }
      else result;
    # makeScope: a fixed point whose callPackage sees the scope's own members first.
    makeScope = newScope: f:
      let
        self = f self // {
          newScope = scope: newScope (self // scope);
          callPackage = self.newScope { };
          # As the real one: the scope remade with g's attributes over f's.
          overrideScope = g: makeScope newScope (final: let prev = f final; in prev // g final prev);
          packages = f;
        };
      in self;
  };
in
lib
