# A release of configs/releases.toml (nix/releases.nix) as a source override of nixpkgs'
# onnxruntime: one overrideAttrs layer that nix/overrides.nix applies right after
# `.override { cudaSupport ... }` and before its own layer, so the workbench's flags, patches
# and install steps go on top of whichever release it is, exactly as on the pin's own.
#
# What the layer changes, as each Flox ort-1.x branch does by hand in 66 files:
#   version, src      ORT's tag and hash (fetchSubmodules: the tree `git clone --recursive` has)
#   patches           nixpkgs' own patches are for its release (1.23.2): none of them; the
#                     workbench's series patches are added after this layer (patches/series.toml,
#                     each entry saying which releases it is for)
#   postPatch         the release's fixes in order (replacing nixpkgs' postPatch, also 1.23.2's);
#                     CUDA-only ones only in CUDA builds
#   cmakeFlags        each bundled dependency as FETCHCONTENT_SOURCE_DIR_<NAME> (ORT finds it
#                     there instead of downloading; CUDA-only ones in CUDA builds), and the
#                     release's flags; an earlier value of any of these variables is dropped
#   env.CXXFLAGS      the release's compiler flags (-Wno-error for the legacy releases)
#   doCheck           off when the release's flags turn ORT's unit tests off (nothing to run)
#
# The pin's own release (nixpkgs_own) gives no layer at all: nixpkgs' recipe as it is.
{
  pkgs,
  release,
  cuda,
}:
let
  lib = import ./lib.nix;
  inherit (builtins) concatStringsSep filter map;

  fetch =
    pkgs.fetchFromGitHub
      or (throw "workbench: this nixpkgs has no fetchFromGitHub (needed for ONNX Runtime ${release.version})");

  forThisBuild = items: filter (item: cuda || !item.cudaOnly) items;

  deps = forThisBuild release.deps;
  fixes = forThisBuild release.fixes;

  source = fetch {
    owner = "microsoft";
    repo = "onnxruntime";
    inherit (release) tag hash;
    fetchSubmodules = true;
  };

  depSource =
    dep:
    fetch (
      {
        name = "${dep.repo}-src";
        inherit (dep) owner repo hash;
      }
      // (if dep.tag != null then { inherit (dep) tag; } else { inherit (dep) rev; })
    );

  depFlags = map (dep: "-DFETCHCONTENT_SOURCE_DIR_${dep.fetchcontent}:PATH=${depSource dep}") deps;
  replaced = map (dep: "FETCHCONTENT_SOURCE_DIR_${dep.fetchcontent}") deps ++ map (f: f.name) release.cmakeFlags;
  releaseFlags = map (f: f.flag) release.cmakeFlags;
  unitTestsOff = builtins.elem "-Donnxruntime_BUILD_UNIT_TESTS:BOOL=FALSE" releaseFlags;

  postPatch = concatStringsSep "\n" (
    map (fix: "# workbench: ${fix.name} (ONNX Runtime ${release.version}): ${fix.why}\n${fix.script}") fixes
  );
in
{
  # What passthru.workbench.release says (the workbench shows it; the tests check it).
  info = {
    inherit (release) version tag hash nixpkgsOwn suffix;
    deps = map (dep: {
      inherit (dep) fetchcontent owner repo tag rev hash;
    }) deps;
    fixes = map (fix: { inherit (fix) name why; }) fixes;
    cmakeFlags = releaseFlags;
    inherit (release) cxxflags;
  };

  layer =
    if release.nixpkgsOwn then
      null
    else
      old:
      {
        inherit (release) version;
        src = source;
        patches = [ ];
        inherit postPatch;
        cmakeFlags = lib.dropCmakeVars replaced (old.cmakeFlags or [ ]) ++ depFlags ++ releaseFlags;
        env = (old.env or { }) // lib.optionalAttrs (release.cxxflags != [ ]) {
          CXXFLAGS = lib.joinWords [
            (old.env.CXXFLAGS or "")
            (concatStringsSep " " release.cxxflags)
          ];
        };
      }
      // lib.optionalAttrs unitTestsOff { doCheck = false; };
}
