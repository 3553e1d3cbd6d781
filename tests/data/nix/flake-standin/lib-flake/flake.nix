# The stand-in lib as a flake (the test copies lib.nix and lib-standin.nix next to it).
{ outputs = _: { lib = import ./lib.nix; }; }
