# The variant matrix expanded into build specs: plain data, no nixpkgs.
#
# The order and the names must match workbench/configs/variants.py's expand() exactly (the tests compare
# the two): for each toolkit (file order), each SM (file order), each ISA of that SM (its list
# order); then the CPU-only ISAs. A spec carries everything nix/overrides.nix needs, so adding
# a variant is a change to configs/matrix.toml only, never a new .nix file.
{
  configDir ? ../configs,
}:
let
  lib = import ./lib.nix;
  config = import ./config.nix { inherit configDir; };
  # configs/releases.toml: the pin's own release (config.ortVersion) keeps the seeds' names;
  # each other offered release gets its own specs, whose names carry the release.
  releases = import ./releases.nix { inherit configDir; };
  inherit (builtins) concatLists concatStringsSep elem filter map;

  isaByName =
    name:
    let
      found = filter (isa: isa.name == name) config.isas;
    in
    if found == [ ] then throw "configs/matrix.toml: no [[isas]] entry called ${name}" else builtins.head found;

  take = n: list: if builtins.length list <= n then list else builtins.genList (builtins.elemAt list) n;

  # The Flox matrix's header line; the same text as Variant.description on the Python side.
  gpuDescription =
    ortVersion: toolkit: sm: isa:
    "ONNX Runtime ${ortVersion} for NVIDIA ${sm.family} "
    + "(${lib.toUpper sm.name}: ${concatStringsSep ", " (take 3 sm.gpus)}) + ${isa.label} [CUDA ${toolkit.version}]";

  # nvcc older than the architecture cannot target it (cuda12_4 + Blackwell): the matrix keeps
  # those names for the seeds' sake, the packages are marked broken with this as the reason.
  caveatOf =
    toolkit: sm:
    if builtins.compareVersions toolkit.version sm.min_toolkit < 0 then
      "nvcc ${toolkit.version} cannot target ${sm.name} (${sm.family} needs CUDA ${sm.min_toolkit} or newer)"
    else
      null;

  # The same sentence as workbench/planning/availability.py's unavailable_reason.
  shortRev = builtins.substring 0 7 config.nixpkgsRev;
  pinVersions = concatStringsSep ", " (
    map (
      set: builtins.replaceStrings [ "cudaPackages_" "_" ] [ "" "." ] set
    ) config.pinCudaSets
  );
  unavailableOf =
    toolkit:
    if toolkit.atPin then
      null
    else
      "CUDA ${toolkit.version} is not in nixpkgs at the pin ${shortRev}: ${toolkit.nixpkgs_attr} was removed "
      + "from nixpkgs (pkgs/top-level/aliases.nix makes it a throw since 2025-08-08; the pin has ${pinVersions}); "
      + "nixos-cuda/cuda-legacy's overlay provides it, but this flake does not take that overlay as an input (README: CUDA 12.4)";

  # A release that cannot build an SM (CUTLASS without Blackwell kernels) names why.
  releaseUnavailable =
    release: sm:
    if sm != null && elem sm.name release.unsupportedSms then
      "ONNX Runtime ${release.version} cannot build ${sm.name}: ${release.unsupportedSmsWhy}"
    else
      null;
  firstOf = a: b: if a != null then a else b;

  gpuVariant =
    release: toolkit: sm: isaName:
    let
      isa = isaByName isaName;
      ortVersion = release.version;
    in
    {
      name = "onnxruntime-python${lib.pythonTag toolkit.python}-${toolkit.name}-${sm.name}-${isa.name}${release.suffix}";
      baseName = "onnxruntime-python${lib.pythonTag toolkit.python}-${toolkit.name}-${sm.name}-${isa.name}";
      inherit release;
      kind = "gpu";
      cuda = true;
      python = toolkit.python;
      pythonPackages = lib.pythonPackagesAttr toolkit.python;
      inherit toolkit sm isa ortVersion;
      cmakeCudaArchitectures = sm.cmakeArch;
      platform = isa.platform;
      description = gpuDescription ortVersion toolkit sm isa;
      caveat = caveatOf toolkit sm;
      unavailable = firstOf (unavailableOf toolkit) (releaseUnavailable release sm);
    };

  cpuVariant =
    release: isaName:
    let
      isa = isaByName isaName;
      ortVersion = release.version;
    in
    {
      name = "onnxruntime-python${lib.pythonTag config.cpuPython}-cpu-${isa.name}${release.suffix}";
      baseName = "onnxruntime-python${lib.pythonTag config.cpuPython}-cpu-${isa.name}";
      inherit release;
      kind = "cpu";
      cuda = false;
      python = config.cpuPython;
      pythonPackages = lib.pythonPackagesAttr config.cpuPython;
      toolkit = null;
      sm = null;
      inherit isa ortVersion;
      cmakeCudaArchitectures = null;
      platform = isa.platform;
      description = "ONNX Runtime ${ortVersion} CPU-only + ${isa.label}";
      caveat = null;
      unavailable = null;
    };

  variantsOf =
    release:
    concatLists (
      map (toolkit: concatLists (map (sm: map (gpuVariant release toolkit sm) sm.isas) config.sms)) config.toolkits
    )
    ++ map (cpuVariant release) config.cpuIsas;

  pinRelease =
    if releases.default == config.ortVersion then
      releases.release releases.default
    else
      throw "configs/releases.toml: default = \"${releases.default}\" but configs/matrix.toml's [onnxruntime] version (the pin's) is ${config.ortVersion}";
  # The other releases that are offered, in file order.
  otherReleases = filter (release: release.version != config.ortVersion) releases.offered;

  variants = variantsOf pinRelease;

  # The builder flake's linkage flavours are not tied to an SM or ISA. CUDA ones use the newest
  # toolkit of the matrix; their architectures come from settings.toml's cuda_architectures, or,
  # when that is empty, from the flavour's own cuda_architectures in configs/flavours.toml, never
  # nixpkgs' every-architecture default (see nix/overrides.nix).
  newestToolkit = builtins.foldl' (
    best: toolkit: if best == null || builtins.compareVersions toolkit.version best.version > 0 then toolkit else best
  ) null (builtins.filter (toolkit: toolkit.atPin) config.toolkits);

  flavoursOf =
    release:
    map (
    flavour:
    flavour
    // {
      name = flavour.name + release.suffix;
      attr = flavour.attr + release.suffix;
      baseName = flavour.name;
      kind = "flavour";
      toolkit = if flavour.cuda then newestToolkit else null;
      inherit release;
      ortVersion = release.version;
      unavailable =
        if elem flavour.name release.flavoursNotOffered then
          "ONNX Runtime ${release.version} is not offered as ${flavour.name}: ${release.flavoursWhy}"
        else
          null;
      # C/C++ libraries for the builder flake's consumers: built wherever nixpkgs' onnxruntime is.
      platforms = [
        "x86_64-linux"
        "aarch64-linux"
      ];
    }
  ) config.flavours;

  flavours = flavoursOf pinRelease;
in
{
  inherit (config)
    ortVersion
    nixpkgsRev
    driverFloors
    toolkits
    sms
    isas
    settings
    ;
  inherit variants flavours;
  # Every other offered release's variants and flavours (names with -ort1_24_2 and so on).
  releaseVariants = concatLists (map variantsOf otherReleases);
  releaseFlavours = concatLists (map flavoursOf otherReleases);
  inherit releases;
  # The platforms that have at least one variant, in first-seen order (the flake's systems).
  platforms = lib.unique (map (variant: variant.platform) variants);
}
