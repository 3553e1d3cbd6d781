# A *buildable* stand-in for the Nixpkgs attributes the sets of `cudasplit nixify-sets` use
# (lib, stdenv, fetchurl, runCommand, zlib, cudasplit), for real `nix-build`s of a generated set
# and of its packages' passthru.tests without Nixpkgs (tests/nix/test_nixify_sets_build.py).
#
# What it does like Nixpkgs:
#   * stdenv.mkDerivation is one `builtins.derivation` per package, with every output, plain
#     or __structuredAttrs (then `disallowedRequisites` & co. go to `outputChecks`), that runs
#     the generic phases in order: unpack (tar; skipped with dontUnpack), patch, configure,
#     build, install, fixup; each phase runs `pre<Phase>`/`post<Phase>` (strings, functions
#     or `<name>Hooks` arrays, as Nixpkgs' runHook); a `<name>Phase` variable replaces the
#     phase; `buildCommand` replaces them all (runCommand);
#   * dependencies are chosen with `lib.getDev` (chooseDevOutputs); nativeBuildInputs' `bin/`
#     go on PATH; every dependency's `nix-support/setup-hook` is sourced, following
#     `nix-support/propagated-build-inputs` transitively (findInputs);
#   * the fixup phase writes `propagatedBuildInputs` into
#     `${!outputDev}/nix-support/propagated-build-inputs` with `>`, then postFixup runs and
#     `_multioutPropagateDev` appends the bin/include/lib outputs (multiple-outputs.sh);
#   * passthru and meta stay off the derivation and are merged onto the result.
#
# Limits (what differs from Nixpkgs; a build that passes here can still fail there):
#   * a builder here never ends by exec'ing a program (`bash -c '...; cp a b'` becomes cp):
#     Nix 2.8 on the test machine then sometimes reports it killed by signal 9; each ends in `:`;
#   * no sandbox and no real toolchain: the builder is the host's /bin/bash with PATH
#     /usr/bin:/bin; stdenv.cc.cc.lib and zlib are derivations holding *copies* of the host's
#     libstdc++.so.6/libgcc_s.so.1 and libz.so.1; NIX_CC (stdenv.cc) holds only
#     nix-support/dynamic-linker, naming a copy of the host's loader (which still searches the
#     host's /lib for glibc);
#   * cudasplit is the checkout run by the venv's python (a wrapper in bin/ plus the shipped
#     setup hook in nix-support/), not a buildPythonApplication;
#   * fetchurl does not download and does not check sha256: it maps the URL's file name to a
#     local tarball given in `srcs` (made from NVIDIA's wheels, so its hash is not NVIDIA's);
#     an URL with no local tarball is an evaluation error;
#   * no configure/make/check: those phases only run their hooks; no strip, no patchelf, no
#     _multioutDevs/_multioutDocs moves (nothing is moved between outputs after install), no
#     cross-compilation (hostPlatform is the build machine), no `overrideAttrs`;
#   * every derivation carries `nonce` so a test session really builds it;
#   * `overrides.<pname>` is merged into that package's mkDerivation arguments (a test's way
#     to break one package on purpose; overrideAttrs without the fixed point).
#
# paramsFile (JSON): dir (the generated sets), srcs (archive file name -> local tarball),
# nonce, checkout and python (cudasplit), gccLibs, zlibLibs, loader (soname -> host file).
{ paramsFile, setName, overrides ? { }, config ? { }, cudaCapabilities ? [ ] }:
let
  params = builtins.fromJSON (builtins.readFile paramsFile);
  system = builtins.currentSystem;
  lib = {
    licenses.unfree = { shortName = "unfree"; free = false; };
    getOutput = o: p: p.${o} or p.out or p;
    getDev = lib.getOutput "dev";
    getLib = lib.getOutput "lib";
    concatMapStrings = f: l: builtins.concatStringsSep "" (map f l);
    makeLibraryPath = ps: builtins.concatStringsSep ":" (map (p: "${lib.getLib p}/lib") ps);
  };

  # The generic builder: bash, sourcing the attributes, then the phases.
  setup = builtins.toFile "build-standin-setup.sh" ''
    set -eu -o pipefail
    if [[ -n "''${NIX_ATTRS_SH_FILE:-}" ]]; then
      source "$NIX_ATTRS_SH_FILE"
      for _o in "''${!outputs[@]}"; do export "$_o=''${outputs[$_o]}"; done
      _outputNames=("''${!outputs[@]}")
    else
      read -ra _outputNames <<< "''${outputs:-out}"
    fi
    export PATH=/usr/bin:/bin HOME=/homeless-shelter
    # stdenv exports the compiler wrapper; cudasplit --nix reads its nix-support/dynamic-linker.
    if [[ -n "''${NIX_CC:-}" ]]; then export NIX_CC; fi

    # A variable's words: a bash array (structured attrs) or a whitespace-separated string.
    _words() {
      local -n _into="$2"
      _into=()
      if [[ "$(declare -p "$1" 2>/dev/null)" == "declare -a"* ]]; then
        local -n _arr="$1"
        _into=(''${_arr[@]+"''${_arr[@]}"})
      else
        read -ra _into <<< "''${!1:-}"
      fi
    }
    _eval() {
      if declare -F "$1" > /dev/null; then "$@"; else eval "$1"; fi
    }
    runHook() {
      local name="$1"; shift
      local hooks="''${name}Hooks[@]" hook
      if declare -F "$name" > /dev/null; then "$name" "$@"
      elif [[ -n "''${!name:-}" ]]; then eval "''${!name}"; fi
      for hook in ''${!hooks+"''${!hooks}"}; do _eval "$hook" "$@"; done
      return 0
    }
    _assignFirst() {
      local var="$1" o; shift
      for o in "$@"; do
        if [[ " ''${_outputNames[*]} " == *" $o "* ]]; then printf -v "$var" %s "$o"; return; fi
      done
      printf -v "$var" %s out
    }
    _assignFirst outputDev dev out
    _assignFirst outputBin bin out
    _assignFirst outputInclude include "$outputDev"
    _assignFirst outputLib lib out

    # findInputs: setup hooks of every dependency, propagated ones included.
    declare -A _seen=()
    _findInputs() {
      local p="$1" native="$2" q
      [[ -n "$p" && -z "''${_seen[$p]:-}" ]] || return 0
      _seen[$p]=1
      if [[ "$native" == 1 && -d "$p/bin" ]]; then PATH="$p/bin:$PATH"; fi
      if [[ -f "$p/nix-support/setup-hook" ]]; then source "$p/nix-support/setup-hook"; fi
      if [[ -f "$p/nix-support/propagated-build-inputs" ]]; then
        for q in $(< "$p/nix-support/propagated-build-inputs"); do _findInputs "$q" "$native"; done
      fi
      return 0
    }
    _words nativeBuildInputs _deps
    for _d in ''${_deps[@]+"''${_deps[@]}"}; do _findInputs "$_d" 1; done
    _words buildInputs _deps
    for _d in ''${_deps[@]+"''${_deps[@]}"}; do _findInputs "$_d" 0; done
    _words propagatedBuildInputs _deps
    for _d in ''${_deps[@]+"''${_deps[@]}"}; do _findInputs "$_d" 0; done

    cd "$NIX_BUILD_TOP"
    if [[ -n "''${buildCommand:-}" ]]; then
      eval "$buildCommand"
      exit 0
    fi

    unpackPhase() {
      runHook preUnpack
      tar -xf "$src"
      local roots=(*/)
      [[ ''${#roots[@]} -eq 1 ]] || { echo "unpack: not one top directory" >&2; exit 1; }
      sourceRoot="''${roots[0]%/}"
      runHook postUnpack
    }
    _hooksOnly() { runHook "pre$1"; runHook "post$1"; }
    patchPhase() { _hooksOnly Patch; }
    configurePhase() { _hooksOnly Configure; }
    buildPhase() { _hooksOnly Build; }
    installPhase() { echo "build-standin: no installPhase" >&2; exit 1; }
    _multioutPropagateDev() {
      [[ "''${_outputNames[*]}" != out ]] || return 0
      local o
      for o in $(printf '%s\n' "$outputBin" "$outputInclude" "$outputLib" | sort -u); do
        [[ "$o" != "$outputDev" ]] || continue
        mkdir -p "''${!outputDev}/nix-support"
        echo -n " ''${!o}" >> "''${!outputDev}/nix-support/propagated-build-inputs"
      done
    }
    fixupPhase() {
      local o
      for o in "''${_outputNames[@]}"; do
        if [[ -e "''${!o}" ]]; then chmod -R u+w "''${!o}"; fi
      done
      runHook preFixup
      local -a propagated
      _words propagatedBuildInputs propagated
      if [[ ''${#propagated[@]} -gt 0 ]]; then
        mkdir -p "''${!outputDev}/nix-support"
        echo "''${propagated[*]}" > "''${!outputDev}/nix-support/propagated-build-inputs"
      fi
      runHook postFixup
      _multioutPropagateDev
    }
    _runPhase() {
      local phase="$1" custom="$1"
      if [[ -n "''${!custom:-}" && "''${!custom}" != "$phase" ]]; then
        _eval "''${!custom}"
      else
        "$phase"
      fi
    }
    if [[ -z "''${dontUnpack:-}" ]]; then
      _runPhase unpackPhase
      cd "$sourceRoot"
    fi
    for _phase in patchPhase configurePhase buildPhase installPhase fixupPhase; do
      _runPhase "$_phase"
    done
    :
  '';

  mkDerivation = args0:
    let
      args = args0 // (overrides.${args0.pname or ""} or { });
      structured = args.__structuredAttrs or false;
      checks = [ "allowedReferences" "allowedRequisites" "disallowedReferences"
                 "disallowedRequisites" ];
      given = builtins.filter (c: args ? ${c}) checks;
      drvArgs = builtins.removeAttrs args ([ "passthru" "meta" ]
        ++ (if structured then given else [ ])) // {
        system = system;
        builder = "/bin/bash";
        args = [ setup ];
        outputs = args.outputs or [ "out" ];
        nativeBuildInputs = map lib.getDev (args.nativeBuildInputs or [ ]);
        buildInputs = map lib.getDev (args.buildInputs or [ ]);
        propagatedBuildInputs = map lib.getDev (args.propagatedBuildInputs or [ ]);
        NIX_CC = ccWrapper;
        nonce = params.nonce;
      } // (if structured && given != [ ] then {
        outputChecks.out = builtins.listToAttrs
          (map (c: { name = c; value = args.${c}; }) given);
      } else { });
      drv = builtins.derivation drvArgs;
    in
    drv // (args.passthru or { }) // {
      meta = args.meta or { };
      passthru = args.passthru or { };
    } // (if args ? pname then { inherit (args) pname; } else { });

  # files: { "libz.so.1" = "/usr/lib/x86_64-linux-gnu/libz.so.1.3.1"; } -> $out/lib/libz.so.1
  hostCopy = name: files: builtins.derivation {
    inherit name system;
    builder = "/bin/bash";
    args = [ "-c" ("/bin/mkdir -p $out/lib\n" + lib.concatMapStrings
      (soname: "/bin/cp -L ${files.${soname}} $out/lib/${soname}\n")
      (builtins.attrNames files) + ":\n") ];
    nonce = params.nonce;
  };

  # A compiler wrapper's nix-support/dynamic-linker, naming a copy of the host's loader.
  loader = hostCopy "loader-host-copy" params.loader;
  ccWrapper = builtins.derivation {
    name = "cc-wrapper-standin";
    inherit system;
    builder = "/bin/bash";
    args = [ "-c" ''
      /bin/mkdir -p $out/nix-support
      echo ${loader}/lib/${builtins.head (builtins.attrNames params.loader)} \
        > $out/nix-support/dynamic-linker
    '' ];
    nonce = params.nonce;
  };

  stdenv = {
    hostPlatform.system = system;
    buildPlatform.system = system;
    cc = ccWrapper // {
      cc.lib = hostCopy "gcc-lib-host-copy" params.gccLibs;
      bintools.dynamicLinker = "${loader}/lib/${builtins.head (builtins.attrNames params.loader)}";
    };
    inherit mkDerivation;
  };
  zlib = hostCopy "zlib-host-copy" params.zlibLibs;

  fetchurl = { url, sha256 ? "", ... }:
    let
      base = baseNameOf url;
      local = params.srcs.${base}
        or (throw "build-standin: no local tarball for ${base} (fetchurl does not download)");
    in
    builtins.path { path = /. + local; name = baseNameOf local; };

  runCommand = name: env: script:
    mkDerivation ({ inherit name; buildCommand = script; } // env);

  cudasplit = builtins.derivation {
    name = "cudasplit-checkout";
    inherit system;
    builder = "/bin/bash";
    args = [ "-c" ''
      /bin/mkdir -p $out/bin $out/nix-support
      printf '#!/bin/sh\nPYTHONPATH=%s exec %s -m cudasplit "$@"\n' \
        ${params.checkout} ${params.python} > "$TMPDIR/cudasplit"
      /usr/bin/install -m 755 "$TMPDIR/cudasplit" $out/bin/cudasplit
      /bin/cp ${params.checkout}/cudasplit/nix/setup-hook.sh $out/nix-support/setup-hook
      :
    '' ];
    nonce = params.nonce;
  };

  sets = import (params.dir + "/default.nix");
in
import sets.${setName} {
  inherit lib stdenv fetchurl runCommand cudasplit zlib config cudaCapabilities;
}
