# The lib a stand-in nixpkgs flake gives `nix flake check` of our flake.nix: lib-standin.nix
# (copied next to this file by the test) plus what flake.nix and nix/package.nix use:
# genAttrs, platforms.linux, and lib.fileset's unions/toSource (our own: a builtins.path whose
# filter keeps the listed files and directories). The real lib.fileset is exercised instead
# where the real lib is given (tests/nix/test_nix_package.py).
let
  base = import ./lib-standin.nix;
  under = parent: p: p == parent || base.hasPrefix (parent + "/") p;
in
base // {
  genAttrs = names: f: builtins.listToAttrs (map (n: { name = n; value = f n; }) names);
  platforms.linux = [ "x86_64-linux" "aarch64-linux" ];
  fileset = {
    unions = files: files;
    toSource = { root, fileset }: builtins.path {
      name = "source";
      path = root;
      filter = p: _: builtins.any (f: under (toString f) p || under p (toString f)) fileset;
    };
  };
}
