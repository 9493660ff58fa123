# STAND-IN FOR NIXPKGS, for tests only. It builds nothing.
#
# nixpkgs cannot be fetched where the tests run (no network), so this file offers the few
# attributes nix/ uses, with nixpkgs' calling conventions, and RECORDS what it is given:
#   - pkgs.onnxruntime and pythonXXXPackages.onnxruntime have `override` (arguments are merged,
#     as with callPackage) and `overrideAttrs` (old: { ... }, applied in order, as in
#     mkDerivation); their base attributes imitate nixpkgs' onnxruntime where nix/ cares
#     (cmakeFlags with CMAKE_CUDA_ARCHITECTURES / onnxruntime_NVCC_THREADS when CUDA is on,
#     nixpkgs' own patch, postFixup, passthru merged into the package);
#   - every package-like value has `standinRecord`: plain data describing it, so a test can
#     evaluate `(...).standinRecord` with `nix-instantiate --eval --strict --json`.
# Package sets (cudaPackages_12_9, python313Packages) record as "<name>".
#
# Used as `import ./standin-nixpkgs.nix { system = ...; config = ...; }`, like nixpkgs.
{
  system ? "x86_64-linux",
  config ? { },
  overlays ? [ ],
  ...
}:
let
  inherit (builtins)
    foldl'
    isAttrs
    isFunction
    isList
    isPath
    mapAttrs
    ;

  # Any value -> JSON-able data. Paths become strings (no copy into the store), functions a
  # marker, stand-in packages their record.
  describe =
    value:
    if isFunction value then
      "<function>"
    else if isPath value then
      toString value
    else if isList value then
      map describe value
    else if isAttrs value then
      if value ? standinRecord then
        value.standinRecord
      else if value ? standinSet then
        "<${value.standinSet}>"
      else
        mapAttrs (_: describe) value
    else
      value;

  storePath = name: "/nix/store/00000000000000000000000000000000-standin-${name}";

  # A package nothing overrides: records as its name.
  leaf = name: {
    inherit name;
    pname = name;
    outPath = storePath name;
    standinRecord = name;
    meta = { };
  };

  # callPackage + mkDerivation in miniature: `base args` gives the attributes, overrideAttrs
  # functions apply on top in order, passthru is merged into the package.
  overridable =
    standin: base: args: layers:
    let
      attrs = foldl' (acc: layer: acc // layer acc) (base args) layers;
    in
    (attrs.passthru or { })
    // attrs
    // {
      outPath = storePath (attrs.name or "${attrs.pname}-${attrs.version}");
      standinRecord = {
        inherit standin importArgs;
        overrideArgs = describe args;
        overrideAttrsCalls = builtins.length layers;
        attrs = describe attrs;
      };
      override = more: overridable standin base (args // more) layers;
      overrideAttrs = layer: overridable standin base args (layers ++ [ layer ]);
    };

  # The parts of nixpkgs' onnxruntime package.nix that nix/overrides.nix touches.
  ortBase =
    args:
    let
      cuda = args.cudaSupport;
    in
    {
      pname = "onnxruntime";
      version = "1.23.2";
      patches = [ "nixpkgs/pkgs/by-name/on/onnxruntime/cpuinfo-logging.patch" ];
      nativeBuildInputs = [
        pkgs.cmake
        pkgs.pkg-config
        args.python3Packages.python
      ]
      ++ (if cuda then [ args.cudaPackages.cuda_nvcc ] else [ ]);
      cmakeFlags = [
        "-DFETCHCONTENT_FULLY_DISCONNECTED:BOOL=TRUE"
        "-Donnxruntime_BUILD_SHARED_LIB:BOOL=TRUE"
        "-Donnxruntime_USE_CUDA:BOOL=${if cuda then "TRUE" else "FALSE"}"
      ]
      ++ (if args.pythonSupport then [ "-Donnxruntime_ENABLE_PYTHON:BOOL=TRUE" ] else [ ])
      ++ (
        if cuda then
          [
            "-DCMAKE_CUDA_ARCHITECTURES:STRING=${args.cudaPackages.flags.cmakeCudaArchitecturesString}"
            "-Donnxruntime_NVCC_THREADS:STRING=1"
          ]
        else
          [ ]
      );
      enableParallelBuilding = true;
      postFixup =
        if cuda then "remove-references-to -t nvcc $out/lib/libonnxruntime_providers_cuda.so" else "";
      passthru = {
        inherit (args) cudaSupport cudaPackages;
      };
      meta = {
        description = "Cross-platform, high performance scoring engine for ML models";
        platforms = [
          "x86_64-linux"
          "aarch64-linux"
          "aarch64-darwin"
        ];
      };
    };

  cudaSet = attr: version: {
    standinSet = attr;
    cudaVersion = version;
    # Different from every SM of the matrix, so a test can tell nixpkgs' value from ours.
    flags.cmakeCudaArchitecturesString = "52;standin-default";
    cuda_nvcc = leaf "${attr}.cuda_nvcc";
  };

  pythonSet =
    attr: version:
    let
      set = {
        standinSet = attr;
        pythonVersion = version;
        python = leaf "python${version}";
        # As in nixpkgs' python-packages.nix: the module wraps the C++ package built with
        # this Python.
        onnxruntime = overridable "${attr}.onnxruntime" (args: {
          pname = "onnxruntime";
          inherit (args.onnxruntime) version;
          name = "python${version}-onnxruntime-${args.onnxruntime.version}";
          buildInputs = [ args.onnxruntime ];
          meta = {
            description = "Cross-platform, high performance scoring engine for ML models";
          };
        }) { onnxruntime = pkgs.onnxruntime.override { python3Packages = set; pythonSupport = true; }; } [ ];
        buildPythonApplication = args: {
          inherit (args) pname version;
          name = "${args.pname}-${args.version}";
          outPath = storePath "${args.pname}-${args.version}";
          meta = args.meta or { };
          standinRecord = {
            standin = "${attr}.buildPythonApplication";
            inherit importArgs;
            args = describe args;
          };
        };
      }
      // builtins.listToAttrs (
        map
          (name: {
            inherit name;
            value = leaf "${attr}.${name}";
          })
          [
            "hatchling"
            "textual"
            "psutil"
            "pygdbmi"
            "rich"
            "tomlkit"
            "platformdirs"
            "unidiff"
            "pytest"
            "pytest-timeout"
            "hypothesis"
          ]
      );
    in
    set;

  recordedCall = standin: name: args: {
    inherit name;
    outPath = storePath name;
    standinRecord = {
      inherit standin importArgs;
      args = describe args;
    };
  };

  # What `import nixpkgs { ... }` was given, in every record: the flake must set allowUnfree
  # (CUDA is unfree) and must not set cudaSupport globally.
  importArgs = describe { inherit system config overlays; };

  pkgs = {
    standinSet = "standin-nixpkgs";
    inherit system;

    onnxruntime = overridable "onnxruntime" ortBase {
      cudaSupport = config.cudaSupport or false;
      pythonSupport = true;
      cudaPackages = pkgs.cudaPackages;
      python3Packages = pkgs.python3Packages;
    } [ ];

    cudaPackages = cudaSet "cudaPackages" "12.8";
    cudaPackages_12_4 = cudaSet "cudaPackages_12_4" "12.4";
    cudaPackages_12_9 = cudaSet "cudaPackages_12_9" "12.9";

    python312Packages = pythonSet "python312Packages" "3.12";
    python313Packages = pythonSet "python313Packages" "3.13";
    python3Packages = pkgs.python313Packages;
    python3 = leaf "python3" // {
      withPackages = choose: recordedCall "python3.withPackages" "python3-env" (choose pkgs.python3Packages);
    };

    ninja = leaf "ninja";
    cmake = leaf "cmake";
    pkg-config = leaf "pkg-config";
    gdb = leaf "gdb";
    ccache = leaf "ccache";
    ruff = leaf "ruff";

    mkShell = args: recordedCall "mkShell" "shell" args;
    writeShellApplication = args: recordedCall "writeShellApplication" args.name args;
  };
in
pkgs
