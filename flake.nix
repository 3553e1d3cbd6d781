{
  description = "cudasplit: split NVIDIA CUDA redistributables into Nix outputs in one pass";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
    in
    {
      # `nixpkgs.overlays = [ cudasplit.overlays.default ];` gives pkgs.cudasplit.
      overlays.default = final: _prev: {
        cudasplit = final.callPackage ./nix/package.nix { };
      };

      packages = forAllSystems (pkgs: rec {
        cudasplit = pkgs.callPackage ./nix/package.nix { };
        default = cudasplit;
      });
    };
}
