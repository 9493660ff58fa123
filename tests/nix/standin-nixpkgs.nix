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
# FAITHFUL where nix/ depends on nixpkgs' behaviour. Each modelled behaviour cites the nixpkgs
# file it models. The nixpkgs pin is ed142ab1b3a092c4d149245d0c4126a5d7ea00b0; the files were
# read at the nearest revisions the reference store holds, named with each behaviour below:
#   - CUDA package sets: pkgs/top-level/all-packages.nix (cudaPackages_12_6/_12_8/_12_9/_13_0;
#     cudaPackages = cudaPackages_12 = cudaPackages_12_8) and pkgs/top-level/aliases.nix
#     (cudaPackages_12_0 ... _12_5 = throw "CUDA 12.x has been removed from Nixpkgs, ...",
#     added 2025-08-08); read at aliases.nix 51cf5b747fa2b5c5364a17a0b13210965e4191cd.
#   - onnxruntime: pkgs/by-name/on/onnxruntime/package.nix at
#     02688433ee15c0ca0913e2955e0c44a7477e497d: onnxruntime_ENABLE_LTO on unless CUDA >= 12.8,
#     doCheck (and onnxruntime_BUILD_UNIT_TESTS) on for CPU builds off aarch64-linux,
#     requiredSystemFeatures big-parallel and disallowedRequisites = [ (getBin cuda_nvcc) ] for
#     CUDA, with postFixup's remove-references-to on libonnxruntime_providers_cuda.so; `env`.
#   - python3Packages.onnxruntime: pkgs/development/python-modules/onnxruntime/default.nix at
#     0145c6da2896513d94440e7fb41c11487aa3de16: pythonImportsCheck = [ "onnxruntime" ] except on
#     aarch64-linux (it runs the library on the build machine).
#   - mkDerivation's `env` and `__structuredAttrs`: pkgs/stdenv/generic/make-derivation.nix:
#     a name in both `env` and the derivation's attributes is refused ("The `env` attribute set
#     cannot contain any attributes passed to derivation"); `env` values must be strings (or
#     bools, ints, derivations); with __structuredAttrs only `env` becomes environment variables.
#   - the cc-wrapper: pkgs/build-support/cc-wrapper/cc-wrapper.sh runs
#     `cc $NIX_CFLAGS_COMPILE_BEFORE <the command line> $NIX_CFLAGS_COMPILE`, so those flags come
#     AFTER CMake's and win; nvcc's host compiler is that same wrapped compiler. CMake puts
#     CFLAGS/CXXFLAGS (read at configure) into CMAKE_<LANG>_FLAGS, followed by
#     CMAKE_<LANG>_FLAGS_RELEASE ("-O3 -DNDEBUG"); CUDAFLAGS reach nvcc, whose -Xcompiler
#     arguments reach its host compiles. `derived.compileLines` is that order, per kind of file.
#   - pythonRuntimeDepsCheckHook: pkgs/development/interpreters/python/hooks/
#     python-runtime-deps-check-hook.py at 0137840114d1444c766db37c01e96258e4edf5fb: every
#     requirement in the wheel's METADATA (pyproject's dependencies; markers evaluated) must be
#     installed and its version inside the specifier, else the build fails with
#     "  - NAME<spec> not satisfied by version V". The real hook fails the build; here the same
#     check fails evaluation of the package, with the same message.
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
    let
      # A real derivation that `nix build` builds here: it records what it was given and lays
      # out the files the workbench looks for afterwards (a flavour's promised layout). Its out
      # path hashes every attribute, so asking for it forces them all, and make-derivation's
      # checks with them.
      # mkDerivation's name when only pname and version are given (pkgs/stdenv/generic/
      # make-derivation.nix): `flox build` reads it, and nix-instantiate needs it.
      name = attrs.name or "${attrs.pname}-${attrs.version}";
      built = standinDerivation name attrs;
    in
    (attrs.passthru or { })
    // attrs
    // {
      inherit name;
      inherit (built) type drvPath outputName;
      outputs = [ "out" ];
      outPath = builtins.deepSeq (describe attrs) (builtins.seq (derive attrs) built.outPath);
      standinRecord = {
        inherit standin importArgs;
        overrideArgs = describe args;
        overrideAttrsCalls = builtins.length layers;
        attrs = describe attrs;
        derived = describe (derive attrs);
      };
      override = more: overridable standin base (args // more) layers;
      overrideAttrs = layer: overridable standin base args (layers ++ [ layer ]);
    };

  # What `nix build` of a stand-in package really builds: no ORT (it cannot be built here), but
  # its record as nix-support/workbench-standin.json, a flavour's promised files (each glob with
  # its `*` as "standin", so the workbench's layout check finds them) and, for a Python
  # environment, bin/python running the Python on the build's PATH.
  standinDerivation =
    name: attrs:
    derivation {
      inherit name system;
      builder = "/bin/sh";
      PATH = "/usr/local/bin:/usr/bin:/bin";
      record = builtins.toJSON (describe attrs);
      produces = builtins.concatStringsSep " " (
        map (builtins.replaceStrings [ "*" ] [ "standin" ]) (attrs.passthru.workbench.produces or [ ])
      );
      pythonEnvironment = if attrs.standinPythonEnvironment or false then "1" else "";
      args = [
        "-c"
        ''
          set -e
          mkdir -p "$out/nix-support"
          printf '%s' "$record" > "$out/nix-support/workbench-standin.json"
          for path in $produces; do
            mkdir -p "$out/$(dirname "$path")"
            echo "stand-in $path" > "$out/$path"
          done
          if [ -n "$pythonEnvironment" ]; then
            mkdir -p "$out/bin"
            printf '#!/bin/sh\nexec python3 "$@"\n' > "$out/bin/python"
            chmod +x "$out/bin/python"
          fi
        ''
      ];
    };

  # python.withPackages: an environment whose bin/python imports the packages chosen.
  pythonWithPackages =
    label: set: choose:
    let
      chosen = choose set;
      built = standinDerivation "${label}-env" {
        standinPythonEnvironment = true;
        packages = chosen;
      };
    in
    recordedCall "${label}.withPackages" "${label}-env" chosen
    // {
      inherit (built) type drvPath outPath outputName;
    };

  # The parts of nixpkgs' onnxruntime package.nix that nix/overrides.nix touches.
  ortBase =
    args:
    let
      cuda = args.cudaSupport;
      nvcc = args.cudaPackages.cuda_nvcc;
      doCheck = !(cuda || system == "aarch64-linux");
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
      ++ (if cuda then [ nvcc ] else [ ]);
      # package.nix's buildInputs, the parts nix/ cares about: the protobuf and cpuinfo that
      # ORT finds (FETCHCONTENT_TRY_FIND_PACKAGE_MODE=ALWAYS) and the CUDA libraries' default
      # (shared) outputs.
      buildInputs = [
        (args.protobuf or pkgs.protobuf)
        pkgs.cpuinfo
      ]
      ++ (
        if cuda then
          map (name: args.cudaPackages.${name}) [
            "libcublas"
            "libcurand"
            "libcusparse"
            "libcufft"
            "cudnn"
          ]
        else
          [ ]
      );
      cmakeFlags = [
        "-DFETCHCONTENT_FULLY_DISCONNECTED:BOOL=TRUE"
        "-DFETCHCONTENT_TRY_FIND_PACKAGE_MODE:STRING=ALWAYS"
        "-Donnxruntime_BUILD_SHARED_LIB:BOOL=TRUE"
        "-Donnxruntime_BUILD_UNIT_TESTS:BOOL=${if doCheck then "TRUE" else "FALSE"}"
        "-Donnxruntime_USE_CUDA:BOOL=${if cuda then "TRUE" else "FALSE"}"
        "-Donnxruntime_ENABLE_LTO:BOOL=${
          if !cuda || args.cudaPackages.cudaOlder "12.8" then "TRUE" else "FALSE"
        }"
        "-Donnxruntime_USE_NCCL:BOOL=${if cuda && (args.ncclSupport or cuda) then "TRUE" else "FALSE"}"
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
      env = { };
      outputs = [
        "out"
        "dev"
      ]
      ++ (if args.pythonSupport then [ "dist" ] else [ ]);
      postInstall = "install -m644 -Dt $out/include ../include/onnxruntime/core/session/onnxruntime_*.h";
      inherit doCheck;
      enableParallelBuilding = true;
      requiredSystemFeatures = if cuda then [ "big-parallel" ] else [ ];
      postFixup =
        if cuda then
          "remove-references-to -t \"${nvcc.bin.outPath}\" \${!outputLib}/lib/libonnxruntime_providers_cuda.so"
        else
          "";
      disallowedRequisites = if cuda then [ nvcc.bin ] else [ ];
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

  words = text: builtins.filter (w: builtins.isString w && w != "") (builtins.split " +" text);

  # -DNAME[:TYPE]=VALUE of a cmakeFlags list, or null.
  cmakeValue =
    flags: name:
    let
      found = builtins.filter (m: m != null) (
        map (flag: builtins.match "-D${name}(:[A-Z]+)?=(.*)" flag) flags
      );
    in
    if found == [ ] then null else builtins.elemAt (builtins.head found) 1;

  # What make-derivation.nix and the cc-wrapper make of the final attributes: environment,
  # compile lines, build-time runs and the closure check. Throws where nixpkgs refuses.
  derive =
    attrs:
    let
      env = attrs.env or { };
      topLevel = builtins.removeAttrs attrs [
        "env"
        "passthru"
        "meta"
      ];
      overlapping = builtins.filter (name: topLevel ? ${name}) (builtins.attrNames env);
      badEnv = builtins.filter (
        name:
        let
          v = env.${name};
        in
        !(builtins.isString v || builtins.isBool v || builtins.isInt v || (builtins.isAttrs v && v ? outPath))
      ) (builtins.attrNames env);
      structured = attrs.__structuredAttrs or false;
      environment =
        if structured then
          env
        else
          env // builtins.mapAttrs (_: toString) (
            builtins.removeAttrs (
              builtins.listToAttrs (
                map (name: {
                  inherit name;
                  value = topLevel.${name};
                }) (builtins.filter (name: builtins.isString topLevel.${name}) (builtins.attrNames topLevel))
              )
            ) [ ]
          );
      var = name: environment.${name} or "";
      flags = attrs.cmakeFlags or [ ];
      release = lang: let v = cmakeValue flags "CMAKE_${lang}_FLAGS_RELEASE"; in if v == null then [ "-O3" "-DNDEBUG" ] else words v;
      xcompiler = builtins.concatLists (
        map (w: let m = builtins.match "-Xcompiler=(.*)" w; in if m == null then [ ] else builtins.filter builtins.isString (builtins.split "," (builtins.head m))) (words (var "CUDAFLAGS"))
      );
      wrapped = line: words (var "NIX_CFLAGS_COMPILE_BEFORE") ++ line ++ words (var "NIX_CFLAGS_COMPILE");
      cuda = cmakeValue flags "onnxruntime_USE_CUDA" == "TRUE";
      staticLibs = cmakeValue flags "onnxruntime_BUILD_SHARED_LIB" == "FALSE";
      fixup = attrs.postFixup or "";
      # nixpkgs' own scrub names libonnxruntime_providers_cuda.so alone; archives need every
      # file of the output scrubbed.
      scrubs =
        builtins.match ".*remove-references-to.*" fixup != null
        && (if staticLibs then builtins.match ".*find \"[$]out\" -type f.*" fixup != null else true);
    in
    if overlapping != [ ] then
      throw "The `env` attribute set cannot contain any attributes passed to derivation. The following attributes are overlapping: ${builtins.concatStringsSep ", " overlapping}"
    else if badEnv != [ ] then
      throw "The `env` attribute set can only contain derivation, string, boolean or integer attributes. The `${builtins.head badEnv}` attribute is of type ${builtins.typeOf env.${builtins.head badEnv}}."
    else
      {
        inherit environment;
        compileLines = {
          c = wrapped (words (var "CFLAGS") ++ release "C");
          cxx = wrapped (words (var "CXXFLAGS") ++ release "CXX");
          # nvcc runs the wrapped host compiler with its -Xcompiler flags and -O3; CFLAGS and
          # CXXFLAGS never reach it.
          cudaHost = if cuda then wrapped (xcompiler ++ [ "-O3" ]) else null;
        };
        runsTestsAtBuild = attrs.doCheck or false;
        runsImportCheckAtBuild = (attrs.pythonImportsCheck or [ ]) != [ ];
        # A CUDA build's libraries embed nvcc's store path until scrubbed; nixpkgs forbids it.
        violatesDisallowedRequisites = cuda && (attrs.disallowedRequisites or [ ]) != [ ] && !scrubs;
      };

  cudaSet = attr: version: {
    standinSet = attr;
    cudaVersion = version;
    # lib.versionOlder on the set's version, as cudaPackages.cudaOlder.
    cudaOlder = other: builtins.compareVersions version other < 0;
    # Different from every SM of the matrix, so a test can tell nixpkgs' value from ours.
    flags.cmakeCudaArchitecturesString = "52;standin-default";
    cuda_nvcc = leaf "${attr}.cuda_nvcc" // {
      bin = leaf "${attr}.cuda_nvcc.bin";
    };
    cudnn = leaf "${attr}.cudnn" // {
      lib = leaf "${attr}.cudnn.lib";
    };
  }
  # The CUDA redistributables' outputs (pkgs/development/cuda-modules: a package whose redist
  # has lib/*.a gets a `static` output): the math libraries ORT links.
  // builtins.listToAttrs (
    map
      (name: {
        inherit name;
        value = leaf "${attr}.${name}" // {
          static = leaf "${attr}.${name}.static";
        };
      })
      [
        "libcublas"
        "libcurand"
        "libcusparse"
        "libcufft"
      ]
  );

  # aliases.nix at the pin: the removed toolkits are throws, which `or` does not catch.
  removedCuda =
    version:
    throw "CUDA ${version} has been removed from Nixpkgs, as it is unmaintained upstream and depends on unsupported compilers";

  pythonSet =
    attr: version:
    let
      set = {
        standinSet = attr;
        pythonVersion = version;
        python = leaf "python${version}" // {
          withPackages = pythonWithPackages "python${version}" set;
        };
        # As in nixpkgs' python-packages.nix: the module wraps the C++ package built with
        # this Python.
        onnxruntime = overridable "${attr}.onnxruntime" (args: {
          pname = "onnxruntime";
          inherit (args.onnxruntime) version;
          name = "python${version}-onnxruntime-${args.onnxruntime.version}";
          buildInputs = [ args.onnxruntime ];
          pythonImportsCheck = if system == "aarch64-linux" then [ ] else [ "onnxruntime" ];
          meta = {
            description = "Cross-platform, high performance scoring engine for ML models";
          };
        }) { onnxruntime = pkgs.onnxruntime.override { python3Packages = set; pythonSupport = true; }; } [ ];
        buildPythonApplication =
          args:
          let
            # The wheel's Requires-Dist is pyproject.toml's [project] dependencies.
            declared = (builtins.fromTOML (builtins.readFile "${args.src}/pyproject.toml")).project.dependencies;
            failures = runtimeDepsFailures declared;
          in
          if failures != [ ] then
            throw "pythonRuntimeDepsCheckHook: checking runtime dependencies for ${args.pname}-${args.version}-py3-none-any.whl\n${builtins.concatStringsSep "\n" failures}"
          else
            {
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
            value = leaf "${attr}.${name}" // {
              version = pinVersions.${name} or "0";
            };
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

  # The Python packages the workbench needs, at the versions the pin has (no higher). textual:
  # pkgs/development/python-modules/textual/default.nix read at
  # 0177fbb41ef7aba03aba3911861b1bb47b9eed07 (6.2.1; textual 8.2.0 was released after the pin).
  # The others could not be read at the pin here; these are releases that nixpkgs had already
  # packaged before the pin (2025-10), so the pin has them or newer.
  pinVersions = {
    textual = "6.2.1";
    rich = "14.1.0";
    psutil = "7.0.0";
    pygdbmi = "0.11.0.0";
    tomlkit = "0.13.2";
    platformdirs = "4.3.6";
    unidiff = "0.7.5";
  };

  # The hook's test_requirement for the specifier forms pyproject uses (>=, >, <=, <, ==, !=,
  # joined by commas); a requirement with a marker (`; python_version < '3.11'`) is skipped,
  # as the real hook skips markers that do not hold on the pin's Python 3.13.
  runtimeDepsFailures =
    requirements:
    let
      one =
        requirement:
        let
          parsed = builtins.match "([A-Za-z0-9_.-]+)([^;]*)(;.*)?" requirement;
          name = builtins.elemAt parsed 0;
          spec = builtins.replaceStrings [ " " ] [ "" ] (builtins.elemAt parsed 1);
          marker = builtins.elemAt parsed 2;
          clauses = builtins.filter (c: builtins.isString c && c != "") (builtins.split "," spec);
          have = pinVersions.${name} or null;
          holds =
            clause:
            let
              m = builtins.match "(>=|<=|==|!=|>|<)(.*)" clause;
              op = builtins.elemAt m 0;
              order = builtins.compareVersions have (builtins.elemAt m 1);
            in
            if op == ">=" then
              order >= 0
            else if op == "<=" then
              order <= 0
            else if op == ">" then
              order > 0
            else if op == "<" then
              order < 0
            else if op == "==" then
              order == 0
            else
              order != 0;
        in
        if marker != null then
          [ ]
        else if have == null then
          [ "  - ${name} not installed" ]
        else if builtins.all holds clauses then
          [ ]
        else
          [ "  - ${name}${spec} not satisfied by version ${have}" ];
    in
    builtins.concatMap one requirements;

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

    cudaPackages_12_6 = cudaSet "cudaPackages_12_6" "12.6";
    cudaPackages_12_8 = cudaSet "cudaPackages_12_8" "12.8";
    cudaPackages_12_9 = cudaSet "cudaPackages_12_9" "12.9";
    cudaPackages_13_0 = cudaSet "cudaPackages_13_0" "13.0";
    cudaPackages_12 = pkgs.cudaPackages_12_8;
    cudaPackages = cudaSet "cudaPackages" "12.8";
    cudaPackages_12_0 = removedCuda "12.0";
    cudaPackages_12_1 = removedCuda "12.1";
    cudaPackages_12_2 = removedCuda "12.2";
    cudaPackages_12_3 = removedCuda "12.3";
    cudaPackages_12_4 = removedCuda "12.4";
    cudaPackages_12_5 = removedCuda "12.5";

    python312Packages = pythonSet "python312Packages" "3.12";
    python313Packages = pythonSet "python313Packages" "3.13";
    python3Packages = pkgs.python313Packages;
    python3 = leaf "python3" // {
      withPackages = pythonWithPackages "python3" pkgs.python3Packages;
    };

    # pkgs/development/libraries/protobuf/generic.nix: `enableShared ? !isStatic` (shared
    # libraries only, unless overridden); the override is recorded.
    protobuf = leaf "protobuf" // {
      override =
        args:
        leaf "protobuf" // {
          outPath = storePath "protobuf-overridden";
          standinRecord = {
            standin = "protobuf";
            overrideArgs = describe args;
          };
        };
    };
    cpuinfo = leaf "cpuinfo";
    ninja = leaf "ninja";
    cmake = leaf "cmake";
    pkg-config = leaf "pkg-config";
    gdb = leaf "gdb";
    ccache = leaf "ccache";
    ruff = leaf "ruff";

    # callPackage as Flox calls a .flox/pkgs file: its arguments, by name, from this set.
    callPackage =
      fn: overrides:
      let
        f = if builtins.isFunction fn then fn else import fn;
      in
      f (builtins.intersectAttrs (builtins.functionArgs f) pkgs // overrides);

    mkShell = args: recordedCall "mkShell" "shell" args;
    writeShellApplication = args: recordedCall "writeShellApplication" args.name args;
  };
in
pkgs
