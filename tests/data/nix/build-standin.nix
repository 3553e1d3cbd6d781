# A *buildable* stand-in for the Nixpkgs attributes the generated sets and the README's example
# use (lib, stdenv, stdenvNoCC, fetchurl, runCommand, zlib, cudasplit, config, callPackage,
# makeScopeWithSplicing'), for real `nix-build`s without Nixpkgs (tests/nix/test_stdenv_fixup.py,
# tests/nix/test_nixify_sets_build.py). Our own code; what it models was read from Nixpkgs'
# pkgs/stdenv/generic/setup.sh and pkgs/build-support/setup-hooks/*.sh.
#
# What it does like Nixpkgs:
#   * stdenv.mkDerivation is one `builtins.derivation` per package (name from pname-version),
#     with every output, plain or __structuredAttrs (then `disallowedRequisites` & co. go to
#     `outputChecks`), that runs the generic phases in order: unpack (tar; skipped with
#     dontUnpack), patch, configure, build, install, fixup (skipped with dontFixup); each phase
#     runs `pre<Phase>`/`post<Phase>`: the implicit hook (function or variable) first, then the
#     `<name>Hooks` array, as setup.sh's runHook; a `<name>Phase` variable replaces the phase;
#     `buildCommand` replaces them all (runCommand); stdenvNoCC has no NIX_CC;
#   * setup: dependencies chosen with `lib.getDev`; nativeBuildInputs' `bin/` go on PATH; every
#     dependency's `nix-support/setup-hook` is sourced, following its propagated-build-inputs
#     and propagated-target-target-deps (findInputs), the derivation's own inputs FIRST and
#     stdenv's default hooks LAST (setup.sh: "Default inputs must be processed last"; with
#     `stdenvHooksFirst = true` the other way round, to show a hook works in either order);
#   * stdenv's default hooks, modelled: multiple-outputs.sh (output variables defaulted where
#     empty when sourced, outputInclude to $outputDev; moveToOutput; preFixup _multioutDocs and
#     _multioutDevs moving include/, lib/pkgconfig, share/pkgconfig, lib/cmake, share/aclocal
#     and share/{doc,man,info,...} between outputs and rewriting `.pc` includedir=${prefix};
#     postFixup _multioutPropagateDev), move-docs.sh (_moveToShare), strip.sh (strip -S under
#     lib bin ...), patchELF (--shrink-rpath), audit-tmpdir.sh (no RUNPATH into $TMPDIR),
#     move-lib64.sh (lib64/ -> lib/ + link), no-broken-symlinks.sh (postFixup: no dangling or
#     reflexive link), each honouring its dont*/no* switch;
#   * the fixup phase writes propagatedBuildInputs, propagatedNativeBuildInputs and
#     depsTargetTargetPropagated into ${!outputDev}/nix-support/ with `>`;
#   * callPackage/makeScope from lib-standin.nix; passthru and meta stay off the derivation and
#     are merged onto the result; config.cudaSupport is true unless `config` says otherwise.
#
# Limits (what differs from Nixpkgs; a build that passes here can still fail there):
#   * a builder here never ends by exec'ing a program (`bash -c '...; cp a b'` becomes cp):
#     Nix 2.8 then sometimes reported it killed by signal 9; each ends in `:`;
#   * no sandbox and no real toolchain: the builder is the host's /bin/bash with PATH
#     /usr/bin:/bin; stdenv.cc.cc.lib and zlib are derivations holding *copies* of the host's
#     libstdc++.so.6/libgcc_s.so.1 and libz.so.1; NIX_CC (stdenv.cc) holds only
#     nix-support/dynamic-linker, naming a copy of the host's loader (which still searches the
#     host's /lib for glibc);
#   * not modelled: patchShebangs, make-symlinks-relative, compress-man-pages, move-sbin,
#     prune-libtool-files, set-source-date-epoch, separate-debug-info, the cc-wrapper's hooks;
#     splicing and cross-compilation (one platform; tests/nix/test_real_lib.py evaluates the
#     real lib's makeScopeWithSplicing' and lib.systems instead), `overrideAttrs`;
#   * cudasplit is the checkout run by the venv's python (a wrapper in bin/ plus the shipped
#     setup hook in nix-support/), not a buildPythonApplication;
#   * fetchurl does not download and does not check sha256: it maps the URL's file name to a
#     local tarball given in `srcs` (made from NVIDIA's wheels, so its hash is not NVIDIA's);
#     an URL with no local tarball is an evaluation error;
#   * no configure/make/check: those phases only run their hooks;
#   * every derivation carries `nonce` so a test session really builds it;
#   * `overrides.<pname>` is merged into that package's mkDerivation arguments (a test's way
#     to break one package on purpose; overrideAttrs without the fixed point).
#
# paramsFile (JSON): dir (the generated sets), srcs (archive file name -> local tarball),
# nonce, checkout and python (cudasplit), gccLibs, zlibLibs, loader (soname -> host file).
# expr: a file to callPackage instead of a set (the README's example).
#
# realStdenv: a directory laid out as a Nixpkgs checkout (its pkgs/stdenv/generic/setup.sh, the
# stdenv's default setup hooks in pkgs/build-support/setup-hooks/ and patchelf's in
# pkgs/development/tools/misc/patchelf/setup-hook.sh; none of it is in this repository). Then
# every mkDerivation runs Nixpkgs' own genericBuild instead of the model above: the builder
# sources the attributes (.attrs.sh with __structuredAttrs), then `$stdenv/setup`, which is the
# header stdenv's builder.sh writes (SHELL, initialPath = the host's /usr and /, the default
# native build inputs = those hook files) followed by setup.sh itself, then calls genericBuild.
# Only the sandbox, the toolchain (the host's, as above) and the bootstrap tools differ.
{ paramsFile, setName ? null, overrides ? { }, config ? { }, cudaCapabilities ? [ ],
  stdenvHooksFirst ? false, expr ? null, realStdenv ? null }:
let
  params = builtins.fromJSON (builtins.readFile paramsFile);
  system = builtins.currentSystem;
  lib = import ./lib-standin.nix;

  # The generic builder: bash, sourcing the attributes, then the phases.
  setup = builtins.toFile "build-standin-setup.sh" ''
    set -eu -o pipefail
    if [[ -n "''${NIX_ATTRS_SH_FILE:-}" ]]; then
      source "$NIX_ATTRS_SH_FILE"
      for _o in "''${!outputs[@]}"; do export "$_o=''${outputs[$_o]}"; done
      __structuredAttrs=1
    else
      : "''${outputs:=out}"
      __structuredAttrs=
    fi
    getAllOutputNames() {
      if [[ -n "$__structuredAttrs" ]]; then echo "''${!outputs[*]}"; else echo "$outputs"; fi
    }
    export PATH=/usr/bin:/bin HOME=/homeless-shelter
    # stdenv exports the compiler wrapper; cudasplit --nix reads its nix-support/dynamic-linker.
    if [[ -n "''${NIX_CC:-}" ]]; then export NIX_CC; fi
    declare -a preFixupHooks=() fixupOutputHooks=() postFixupHooks=()

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
    # runHook: the implicit hook (a function or a variable) first, then <name>Hooks in order.
    runHook() {
      local name="$1"; shift
      local hooks="''${name%Hook}Hooks[@]" hook
      if declare -F "$name" > /dev/null; then "$name" "$@"
      elif [[ -n "''${!name:-}" ]]; then eval "''${!name}"; fi
      for hook in ''${!hooks+"''${!hooks}"}; do _eval "$hook" "$@"; done
      return 0
    }

    # ---- stdenv's default setup hooks, modelled (defaultNativeBuildInputs) --------------
    # Registered in stdenv's order: move-docs, strip, audit-tmpdir, multiple-outputs,
    # move-lib64, no-broken-symlinks (+ patchELF's fixupOutput).
    _stdenvDefaultHooks() {
      preFixupHooks+=(_moveToShare)
      fixupOutputHooks+=(_standinStrip _standinAuditTmpdir)
      _multipleOutputsHook
      fixupOutputHooks+=(_moveLib64 _standinPatchELF)
      postFixupHooks+=(_noBrokenSymlinksInAllOutputs)
    }
    # move-docs.sh: out's top-level man/ doc/ info/ go under share/.
    _moveToShare() {
      local d
      [[ -n "''${out:-}" ]] || return 0
      for d in man doc info; do
        if [[ -d "$out/$d" && ! -d "$out/share/$d" ]]; then
          mkdir -p "$out/share"; mv "$out/$d" "$out/share/"
        fi
      done
    }
    # multiple-outputs.sh: output variables defaulted (only where empty) when sourced, path
    # moves between outputs before fixupOutput, the dev output's propagation after fixup.
    _defaultFirst() {
      local var="$1" name; shift
      [[ -z "''${!var:-}" ]] || return 0
      for name in "$@"; do
        if [[ -n "''${!name:-}" ]]; then printf -v "$var" %s "$name"; return 0; fi
      done
      printf -v "$var" %s REMOVE
    }
    _multipleOutputsHook() {
      _defaultFirst outputDev dev out
      _defaultFirst outputBin bin out
      _defaultFirst outputInclude "$outputDev"
      _defaultFirst outputLib lib out
      _defaultFirst outputDoc doc out
      _defaultFirst outputDevdoc devdoc
      _defaultFirst outputMan man "$outputBin"
      _defaultFirst outputDevman devman devdoc "$outputMan"
      _defaultFirst outputInfo info "$outputBin"
      preFixupHooks+=(_multioutDocs _multioutDevs)
      postFixupHooks+=(_multioutPropagateDev)
    }
    # moveToOutput PATTERN DEST: PATTERN (a glob under each output) from every other output
    # into the output whose path is DEST (REMOVE: deleted); directories are merged.
    moveToOutput() {
      local pattern="$1" dest="$2" o from
      for o in $(getAllOutputNames); do
        [[ "''${!o}" != "$dest" ]] || continue
        for from in "''${!o}"/$pattern; do
          [[ -e "$from" || -L "$from" ]] || continue
          if [[ "$dest" == REMOVE ]]; then rm -r "$from"; continue; fi
          local to="$dest''${from#"''${!o}"}"
          if [[ -d "$to" && -d "$from" && ! -L "$from" ]]; then
            if [[ -n "$(ls -A "$from")" ]]; then mv -t "$to" "$from"/*; fi
            rmdir "$from"
          else
            mkdir -p "$(dirname "$to")"; mv "$from" "$to"
          fi
          rmdir -p --ignore-fail-on-non-empty "$(dirname "$from")" 2>/dev/null || true
        done
      done
    }
    _multioutDocs() {
      local REMOVE=REMOVE
      moveToOutput share/info "''${!outputInfo}"
      moveToOutput share/doc "''${!outputDoc}"
      moveToOutput share/gtk-doc "''${!outputDevdoc}"
      moveToOutput share/devhelp/books "''${!outputDevdoc}"
      moveToOutput share/man "''${!outputMan}"
      moveToOutput share/man/man3 "''${!outputDevman}"
    }
    _multioutDevs() {
      [[ "$(getAllOutputNames)" != out && -n "''${moveToDev-1}" ]] || return 0
      moveToOutput include "''${!outputInclude}"
      local p
      for p in lib/pkgconfig share/pkgconfig lib/cmake share/aclocal; do
        moveToOutput "$p" "''${!outputDev}"
      done
      local f
      for f in "''${!outputDev}"/{lib,share}/pkgconfig/*.pc; do
        [[ -e "$f" ]] || continue
        sed -i "/^includedir=/s,=\''${prefix},=''${!outputInclude}," "$f"
      done
    }
    _multioutPropagateDev() {
      [[ "$(getAllOutputNames)" != out ]] || return 0
      if [[ -z "''${propagatedBuildOutputs+set}" ]]; then
        propagatedBuildOutputs="$(printf '%s\n' "$outputBin" "$outputInclude" "$outputLib" \
          | grep -v -x -F "$outputDev" | sort -u | tr '\n' ' ')" || true
      fi
      [[ -n "''${propagatedBuildOutputs// /}" ]] || return 0
      local o
      mkdir -p "''${!outputDev}/nix-support"
      for o in $propagatedBuildOutputs; do
        echo -n " ''${!o}" >> "''${!outputDev}/nix-support/propagated-build-inputs"
      done
    }
    # strip.sh (debug sections of ELF files under the usual dirs) and patchELF's
    # --shrink-rpath, unless dontStrip / dontPatchELF.
    _elfFiles() {
      local f
      find "$@" -type f -print0 2>/dev/null | while IFS= read -r -d "" f; do
        [[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" == '177ELF' ]] && printf '%s\0' "$f"
      done
      return 0
    }
    _standinStrip() {
      [[ -z "''${dontStrip:-}" ]] || return 0
      local d dirs=()
      for d in lib lib32 lib64 libexec bin sbin; do [[ -d "$prefix/$d" ]] && dirs+=("$prefix/$d"); done
      [[ ''${#dirs[@]} -gt 0 ]] || return 0
      _elfFiles "''${dirs[@]}" | xargs -0 -r strip -S 2>/dev/null || true
    }
    _standinPatchELF() {
      [[ -z "''${dontPatchELF:-}" && -e "$prefix" ]] || return 0
      _elfFiles "$prefix" | xargs -0 -r -n 1 patchelf --shrink-rpath 2>/dev/null || true
    }
    # audit-tmpdir.sh: no RUNPATH may name the build directory.
    _standinAuditTmpdir() {
      [[ -z "''${noAuditTmpdir:-}" && -e "$prefix" ]] || return 0
      local f
      while IFS= read -r -d "" f; do
        if { printf :; patchelf --print-rpath "$f" 2>/dev/null; } | grep -q -F ":$TMPDIR/"; then
          echo "RPATH of binary $f contains a forbidden reference to $TMPDIR/" >&2; exit 1
        fi
      done < <(_elfFiles "$prefix")
    }
    # move-lib64.sh: a real lib64/ becomes lib/ plus a lib64 -> lib link.
    _moveLib64() {
      [[ "''${dontMoveLib64:-}" != 1 && -e "$prefix/lib64" && ! -L "$prefix/lib64" ]] || return 0
      mkdir -p "$prefix/lib"
      shopt -s dotglob
      local i
      for i in "$prefix"/lib64/*; do mv --no-clobber "$i" "$prefix/lib"; done
      shopt -u dotglob
      rmdir "$prefix/lib64"
      ln -s lib "$prefix/lib64"
    }
    # no-broken-symlinks.sh: no dangling and no reflexive link in any output.
    _noBrokenSymlinksInAllOutputs() {
      [[ -z "''${dontCheckForBrokenSymlinks:-}" ]] || return 0
      local o link target bad=0
      for o in $(getAllOutputNames); do
        [[ -e "''${!o}" ]] || continue
        while IFS= read -r -d "" link; do
          target="$(readlink "$link")"
          [[ "$target" == /* ]] || target="$(realpath --no-symlinks --canonicalize-missing "$(dirname "$link")/$target")"
          if [[ "$target" == "$link" ]]; then echo "reflexive symlink $link" >&2; bad=1
          elif [[ ! -e "$target" ]]; then echo "dangling symlink $link -> $target" >&2; bad=1; fi
        done < <(find "''${!o}" -type l -print0)
      done
      [[ "$bad" == 0 ]] || exit 1
    }

    # findInputs + activation: every dependency's setup hook, propagated ones included, in
    # stdenv's order: the derivation's own inputs first, stdenv's default hooks last
    # (setup.sh: "Default inputs must be processed last"); stdenvHooksFirst flips it.
    declare -A _seen=()
    _findInputs() {
      local p="$1" native="$2" q file
      [[ -n "$p" && -z "''${_seen[$p]:-}" ]] || return 0
      _seen[$p]=1
      if [[ "$native" == 1 && -d "$p/bin" ]]; then PATH="$p/bin:$PATH"; fi
      if [[ -f "$p/nix-support/setup-hook" ]]; then source "$p/nix-support/setup-hook"; fi
      for file in propagated-build-inputs propagated-target-target-deps; do
        if [[ -f "$p/nix-support/$file" ]]; then
          for q in $(< "$p/nix-support/$file"); do _findInputs "$q" "$native"; done
        fi
      done
      return 0
    }
    if [[ -n "''${stdenvHooksFirst:-}" ]]; then _stdenvDefaultHooks; fi
    for _var in nativeBuildInputs buildInputs propagatedBuildInputs depsTargetTarget \
        depsTargetTargetPropagated; do
      _words "$_var" _deps
      [[ "$_var" == nativeBuildInputs ]] && _native=1 || _native=0
      for _d in ''${_deps[@]+"''${_deps[@]}"}; do _findInputs "$_d" "$_native"; done
    done
    if [[ -z "''${stdenvHooksFirst:-}" ]]; then _stdenvDefaultHooks; fi

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
    # setup.sh's fixupPhase: preFixup, fixupOutput per output, the propagated-* files written
    # into ''${!outputDev} with `>`, postFixup.
    fixupPhase() {
      local o
      for o in $(getAllOutputNames); do
        if [[ -e "''${!o}" ]]; then chmod -R u+w "''${!o}"; fi
      done
      runHook preFixup
      for o in $(getAllOutputNames); do
        prefix="''${!o}" runHook fixupOutput
      done
      local var file
      local -a propagated
      for var in propagatedNativeBuildInputs:propagated-native-build-inputs \
          propagatedBuildInputs:propagated-build-inputs \
          depsTargetTargetPropagated:propagated-target-target-deps; do
        file="''${var#*:}"
        _words "''${var%%:*}" propagated
        if [[ ''${#propagated[@]} -gt 0 ]]; then
          mkdir -p "''${!outputDev}/nix-support"
          printf '%s ' "''${propagated[@]}" > "''${!outputDev}/nix-support/$file"
        fi
      done
      runHook postFixup
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
      if [[ "$_phase" == fixupPhase && -n "''${dontFixup:-}" ]]; then continue; fi
      _runPhase "$_phase"
    done
    :
  '';

  # Nixpkgs' own stdenv, when given (the header above): $out/setup as its builder.sh writes it.
  realHooks = map (h: builtins.path { path = realStdenv + "/pkgs/build-support/setup-hooks/${h}.sh"; })
    [ "no-broken-symlinks" "audit-tmpdir" "compress-man-pages" "make-symlinks-relative"
      "move-docs" "move-lib64" "move-sbin" "move-systemd-user-units" "multiple-outputs"
      "patch-shebangs" "prune-libtool-files" "reproducible-builds"
      "set-source-date-epoch-to-latest" "strip" ]
    ++ [ (builtins.path { path = realStdenv + "/pkgs/development/tools/misc/patchelf/setup-hook.sh"; }) ];
  realSetup = builtins.derivation {
    name = "nixpkgs-stdenv-setup";
    inherit system;
    builder = "/bin/bash";
    setupSh = builtins.path { path = realStdenv + "/pkgs/stdenv/generic/setup.sh"; };
    defaultNativeBuildInputs = builtins.concatStringsSep " " realHooks;
    args = [ "-c" ''
      /bin/mkdir -p $out
      { echo "export SHELL=/bin/bash"
        echo "initialPath=\"/usr /\""
        echo "defaultNativeBuildInputs=\"$defaultNativeBuildInputs\""
        echo "defaultBuildInputs=\"\""
        /bin/cat "$setupSh"; } > $out/setup
      :
    '' ];
    nonce = params.nonce;
  };
  realBuilder = builtins.toFile "nixpkgs-default-builder.sh" ''
    if [ -e "''${NIX_ATTRS_SH_FILE:-}" ]; then . "$NIX_ATTRS_SH_FILE"; elif [ -f .attrs.sh ]; then . .attrs.sh; fi
    source $stdenv/setup
    genericBuild
  '';

  mkDerivation = mkDerivationWith { cc = true; };
  mkDerivationWith = { cc }: args0:
    let
      args = args0 // (overrides.${args0.pname or ""} or { });
      structured = args.__structuredAttrs or false;
      checks = [ "allowedReferences" "allowedRequisites" "disallowedReferences"
                 "disallowedRequisites" ];
      given = builtins.filter (c: args ? ${c}) checks;
      drvArgs = builtins.removeAttrs args ([ "passthru" "meta" ]
        ++ (if structured then given else [ ])) // {
        name = args.name or "${args.pname}-${args.version}";
        system = system;
        builder = "/bin/bash";
        args = if realStdenv == null then [ setup ] else [ "-e" realBuilder ];
        outputs = args.outputs or [ "out" ];
        nativeBuildInputs = map lib.getDev (args.nativeBuildInputs or [ ]);
        buildInputs = map lib.getDev (args.buildInputs or [ ]);
        propagatedBuildInputs = map lib.getDev (args.propagatedBuildInputs or [ ]);
        depsTargetTarget = map lib.getDev (args.depsTargetTarget or [ ]);
        depsTargetTargetPropagated = map lib.getDev (args.depsTargetTargetPropagated or [ ]);
        stdenvHooksFirst = if stdenvHooksFirst then "1" else "";
        nonce = params.nonce;
      } // (if realStdenv != null then { stdenv = realSetup; } else { })
        // (if cc then { NIX_CC = ccWrapper; } else { })
        // (if structured && given != [ ] then {
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
  # Nothing compiled: no compiler wrapper (NIX_CC), as Nixpkgs' stdenvNoCC.
  stdenvNoCC = stdenv // { cc = null; mkDerivation = mkDerivationWith { cc = false; }; };
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
  # A package set as Nixpkgs' callPackage sees it (no splicing: one platform).
  pkgs = {
    inherit lib stdenv stdenvNoCC fetchurl runCommand cudasplit zlib;
    config = { cudaSupport = true; inherit cudaCapabilities; } // config;
    newScope = extra: lib.callPackageWith (pkgs // extra);
    callPackage = lib.callPackageWith pkgs;
    makeScopeWithSplicing' = { f, ... }: lib.makeScope pkgs.newScope f;
    generateSplicesForMkScope = _: { };
  };
in
if expr != null then pkgs.callPackage expr { }
else pkgs.callPackage sets.${setName} { }
