# Test helper: nix/overrides.nix applied to every spec of nix/variants.nix against the STAND-IN
# for nixpkgs, exposing what the stand-in recorded as plain data:
#
#   nix-instantiate --eval --strict --json tests/nix/probe.nix \
#     --argstr configDir /copy/of/configs --argstr patchDir /copy/of/patches \
#     -A variants.onnxruntime-python313-cuda12_9-sm90-avx512.cpp
#
# variants.<name>.cpp     the C++ package (pkgs.onnxruntime overridden)
# variants.<name>.python  the Python package (pythonXXXPackages.onnxruntime overridden)
# variants.<name>.spec    the spec itself
# releaseVariants.<name>  the same for the other releases (names ending -ort1_24_2, ...)
# releaseNames            their names, less what a release cannot build
# flavours.<attr>         a linkage flavour's package (onnxruntime-cpu, onnxruntime-cuda-dyn,
#                         onnxruntime)
# built.<attr>            a flavour's or variant's derivation as Nix sees it: its outputs
#                         (mkDerivation's, `debug` included) and the store paths of the
#                         protobuf it was built with (passthru.protobuf) and of the static
#                         protobuf a static core passes in
# series.names            patches/series.toml's names, in order, enabled or not (checked)
# series.applied.<target> the names nix/series.nix selects for a flavour name (cpu, cuda-dyn,
#                         cuda-static) or a variant name, in order; no patch file is read
{
  configDir ? ../../configs,
  patchDir ? ../../patches,
  system ? "x86_64-linux",
}:
let
  pkgs = import ./standin-nixpkgs.nix { inherit system; };
  matrix = import ../../nix/variants.nix { inherit configDir; };
  series = import ../../nix/series.nix { inherit patchDir matrix; };
  build = import ../../nix/overrides.nix {
    inherit pkgs series;
    inherit (matrix) settings;
  };
  entry = name: value: { inherit name value; };
  namesOf = map (patch: patch.name);
in
{
  inherit (matrix) settings;
  series = {
    inherit (series) names;
    applied = builtins.listToAttrs (
      map (spec: entry spec.name (namesOf (series.forFlavour spec.name))) matrix.flavours
      ++ map (spec: entry spec.name (namesOf (series.forVariant spec.name))) matrix.variants
    );
  };
  variants = builtins.listToAttrs (
    map (
      spec:
      entry spec.name (
        { inherit spec; }
        # As the flake: an unavailable variant is never built, so it is never looked up.
        // (
          if spec.unavailable != null then
            { inherit (spec) unavailable; }
          else
            {
              cpp = (build.variantCpp spec).standinRecord;
              python = (build.variant spec).standinRecord;
            }
        )
      )
    ) matrix.variants
  );
  # The same for every other release's variants (names ending -ort1_24_2 and so on).
  releaseVariants = builtins.listToAttrs (
    map (
      spec:
      entry spec.name (
        { inherit spec; }
        // (
          if spec.unavailable != null then
            { inherit (spec) unavailable; }
          else
            {
              cpp = (build.variantCpp spec).standinRecord;
              python = (build.variant spec).standinRecord;
            }
        )
      )
    ) matrix.releaseVariants
  );
  # The names of every other release's variants that the flake offers (on any platform).
  releaseNames = map (spec: spec.name) (
    builtins.filter (spec: spec.unavailable == null) matrix.releaseVariants
  );
  # Flavours of every release (onnxruntime-cpu, onnxruntime-cpu-ort1_24_2, ...); one a release
  # does not offer gives its reason instead.
  flavours = builtins.listToAttrs (
    map (
      spec:
      entry spec.attr (
        if spec.unavailable or null != null then
          { inherit (spec) unavailable; }
        else
          (build.flavour spec).standinRecord
      )
    ) (matrix.flavours ++ matrix.releaseFlavours)
  );
  built = builtins.listToAttrs (
    map (
      spec:
      let
        package = build.flavour spec;
      in
      entry spec.attr {
        inherit (package) outputs;
        protobuf = package.protobuf.outPath;
        protobufRecord = package.protobuf.standinRecord;
        staticProtobuf = (pkgs.protobuf.override { enableShared = false; }).outPath;
        outPaths = builtins.listToAttrs (map (output: entry output package.${output}.outPath) package.outputs);
      }
    ) matrix.flavours
    ++ map (
      spec:
      let
        package = build.variantCpp spec;
      in
      entry spec.name {
        inherit (package) outputs;
        protobuf = package.protobuf.outPath;
        python = (build.variant spec).outputs;
      }
    ) (builtins.filter (spec: spec.unavailable == null) matrix.variants)
  );
}
