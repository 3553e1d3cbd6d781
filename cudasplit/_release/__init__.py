"""Release-level tools over manifests, tarballs and split outputs: NVIDIA manifests, feature
manifests, closure and loader views, release diffs, repacking, and Nix expressions."""
