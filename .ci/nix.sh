#!/usr/bin/env bash
# Nix for the tests: Debian trixie's nix-bin (2.26), installed once into a cache outside the
# clone and run on this machine, whatever Debian release it is (bookworm ships Nix 2.8, and
# Nixpkgs needs 2.18 or newer).
#
#   bash .ci/nix.sh            install if needed, then print the directory to put first on PATH
#
# How: `debootstrap --variant=minbase --include=nix-bin,libdbi-perl trixie` lays a trixie root in the cache
# (from the mirror this machine's apt already uses); then the `nix` program of that root is
# copied out and its ELF header pointed at the root's own loader and libraries (PT_INTERP and
# a DT_RPATH, which also covers the libraries it loads), so it runs here against trixie's glibc
# and libraries while its builders run the host's /bin/bash. nix-build, nix-instantiate,
# nix-store, ... are links to it, as in the package (one program dispatching on its name).
# The store stays /nix/store; 2.26 can use 2.8's database, and Debian's 2.8 is not used by the
# tests once this directory is first on PATH.
#
# Idempotent and fast when cached: a stamp names the script's recipe version; the root is
# rebuilt only when the stamp or the program is missing. CUDASPLIT_NIX_CACHE moves the cache.
set -euo pipefail

RECIPE=1
CACHE="${CUDASPLIT_NIX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cudasplit/nix-trixie}"
ROOT="$CACHE/root"
BIN="$CACHE/bin"
STAMP="$CACHE/ready-$RECIPE"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

ready() { [ -f "$STAMP" ] && "$BIN/nix" --version >/dev/null 2>&1; }

# The Debian mirror this machine's apt uses (deb822 or one-line sources), so no host is named here.
mirror() {
    local found
    found="$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources |
             awk '{print $2}' | grep -v -- '-security' | head -n 1)"
    [ -n "$found" ] || found="$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list |
                                awk '{print $2}' | grep -v -- '-security' | head -n 1)"
    [ -n "$found" ] || { echo "nix.sh: no Debian mirror in /etc/apt" >&2; exit 1; }
    echo "$found"
}

install_root() {
    command -v debootstrap >/dev/null || $SUDO apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    command -v patchelf >/dev/null || $SUDO apt-get install -y -qq --no-install-recommends patchelf >/dev/null
    local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    $SUDO rm -rf "$ROOT.new"
    mkdir -p "$CACHE"
    echo "nix.sh: debootstrap trixie (minbase + nix-bin) into $ROOT" >&2
    $SUDO debootstrap --variant=minbase --include=nix-bin,libdbi-perl --keyring="$keyring" \
        trixie "$ROOT.new" "$(mirror)" >"$CACHE/debootstrap.log" 2>&1 || {
        tail -n 20 "$CACHE/debootstrap.log" >&2
        exit 1
    }
    $SUDO rm -rf "$ROOT"
    $SUDO mv "$ROOT.new" "$ROOT"
}

relocate() {
    local libs="$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu"
    local program
    program="$(readlink -f "$ROOT/usr/bin/nix")"
    rm -rf "$BIN.new"
    mkdir -p "$BIN.new"
    cp "$program" "$BIN.new/nix"
    patchelf --set-interpreter "$ROOT/lib64/ld-linux-x86-64.so.2" \
        --force-rpath --set-rpath "$libs" "$BIN.new/nix"
    local name
    for name in "$ROOT"/usr/bin/nix-*; do
        name="$(basename "$name")"
        # The package's commands that are the same program under another name.
        if [ "$(readlink -f "$ROOT/usr/bin/$name")" = "$program" ]; then
            ln -s nix "$BIN.new/$name"
        fi
    done
    rm -rf "$BIN"
    mv "$BIN.new" "$BIN"
}

if ! ready; then
    [ -x "$ROOT/usr/bin/nix" ] || install_root
    relocate
    "$BIN/nix" --version >&2
    touch "$STAMP"
fi
echo "$BIN"
