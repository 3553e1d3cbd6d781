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
#
# Safe to run twice at once, and after a killed run (tests/test_ci_nix.py):
# * one run at a time: a lock (flock) beside the cache; a second run waits for the first,
#   then finds the cache ready;
# * the root is bootstrapped into a private temporary directory and renamed into place only
#   when complete; a failed debootstrap is retried once;
# * debootstrap mounts proc (and more) inside the root it builds, and a failed or killed one
#   leaves them mounted: every mount at or below a directory is unmounted before it is
#   deleted, and the delete never crosses into another file system (rm --one-file-system), so
#   it can neither fail on a leftover proc nor walk into a live /proc.
set -euo pipefail

RECIPE=1
CACHE="${CUDASPLIT_NIX_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cudasplit/nix-trixie}"
ROOT="$CACHE/root"
BIN="$CACHE/bin"
STAMP="$CACHE/ready-$RECIPE"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
WORK=""          # the private directory this run is building in (removed on exit)

ready() { [ -f "$STAMP" ] && "$BIN/nix" --version >/dev/null 2>&1; }

# Every mount point at or below $1, deepest first (/proc/self/mounts writes a space as \040).
mounts_below() {
    local dir
    dir="$(readlink -f -- "$1")"
    awk '{print $2}' /proc/self/mounts | while IFS= read -r point; do
        point="$(printf '%b' "$point")"
        if [ "$point" = "$dir" ] || [ "${point#"$dir"/}" != "$point" ]; then
            printf '%s\n' "$point"
        fi
    done | sort -r
}

# Unmount what is mounted at or below $1 (a lazy unmount when a plain one is refused).
remove_mounts() {
    local point
    while IFS= read -r point; do
        [ -n "$point" ] || continue
        $SUDO umount -- "$point" 2>/dev/null || $SUDO umount -l -- "$point"
    done < <(mounts_below "$1")
    if [ -n "$(mounts_below "$1")" ]; then
        echo "nix.sh: cannot unmount what is mounted below $1" >&2
        return 1
    fi
}

# Unmount what is mounted at or below $1, then delete it without leaving its file system.
remove_tree() {
    [ -e "$1" ] || [ -L "$1" ] || return 0
    remove_mounts "$1"
    $SUDO rm -rf --one-file-system -- "$1"
}

cleanup() {
    local status=$?
    if [ -n "$WORK" ]; then
        remove_tree "$WORK" || status=1
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

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

bootstrap() {  # $1: an empty directory
    local keyring=/usr/share/keyrings/debian-archive-keyring.gpg
    $SUDO debootstrap --variant=minbase --include=nix-bin,libdbi-perl --keyring="$keyring" \
        trixie "$1" "$(mirror)" >"$CACHE/debootstrap.log" 2>&1
}

install_root() {
    command -v debootstrap >/dev/null || $SUDO apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    command -v patchelf >/dev/null || $SUDO apt-get install -y -qq --no-install-recommends patchelf >/dev/null
    local attempt
    echo "nix.sh: debootstrap trixie (minbase + nix-bin) into $ROOT" >&2
    for attempt in 1 2; do
        WORK="$(mktemp -d "$CACHE/root.tmp.XXXXXX")"
        chmod 755 "$WORK"      # it becomes the root the relocated nix loads its libraries from
        if bootstrap "$WORK"; then
            # debootstrap unmounts what it mounted when it succeeds; make sure before moving.
            remove_mounts "$WORK"
            local old=""
            if [ -e "$ROOT" ]; then
                old="$(mktemp -d "$CACHE/root.old.XXXXXX")"
                $SUDO mv -T -- "$ROOT" "$old/root"
            fi
            $SUDO mv -T -- "$WORK" "$ROOT"
            WORK=""
            [ -z "$old" ] || remove_tree "$old"
            return 0
        fi
        tail -n 20 "$CACHE/debootstrap.log" >&2
        remove_tree "$WORK"
        WORK=""
        [ "$attempt" = 2 ] || echo "nix.sh: debootstrap failed; trying once more" >&2
    done
    echo "nix.sh: debootstrap failed twice (log: $CACHE/debootstrap.log)" >&2
    exit 1
}

relocate() {
    local libs="$ROOT/usr/lib/x86_64-linux-gnu:$ROOT/lib/x86_64-linux-gnu"
    local program new
    program="$(readlink -f "$ROOT/usr/bin/nix")"
    new="$(mktemp -d "$CACHE/bin.tmp.XXXXXX")"
    WORK="$new"
    cp "$program" "$new/nix"
    patchelf --set-interpreter "$ROOT/lib64/ld-linux-x86-64.so.2" \
        --force-rpath --set-rpath "$libs" "$new/nix"
    local name
    for name in "$ROOT"/usr/bin/nix-*; do
        name="$(basename "$name")"
        # The package's commands that are the same program under another name.
        if [ "$(readlink -f "$ROOT/usr/bin/$name")" = "$program" ]; then
            ln -s nix "$new/$name"
        fi
    done
    chmod 755 "$new"
    rm -rf -- "$BIN"
    mv -T -- "$new" "$BIN"
    WORK=""
}

mkdir -p "$CACHE"
# The lock lives beside the cache, so removing the cache never removes a lock someone holds.
exec 9>"$CACHE.lock"
flock 9
if ! ready; then
    # What a killed run left: its temporary roots (maybe with proc still mounted) and the
    # root.new of older versions of this script.
    for leftover in "$CACHE"/root.tmp.* "$CACHE"/root.old.* "$CACHE"/bin.tmp.* "$CACHE/root.new" "$BIN.new"; do
        remove_tree "$leftover"
    done
    [ -x "$ROOT/usr/bin/nix" ] && [ -z "$(mounts_below "$ROOT")" ] || install_root
    relocate
    "$BIN/nix" --version >&2
    touch "$STAMP"
fi
echo "$BIN"
