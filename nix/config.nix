# Reads configs/matrix.toml, configs/flavours.toml and configs/settings.toml: the one source of
# truth the Python side (workbench/configs/matrix.py, workbench/configs/settings.py) reads too. The patches
# are not here: patches/series.toml lists them, read by nix/series.nix.
#
# `configDir` is an argument so the tests can evaluate a modified copy of configs/ and check
# that the Nix side and the Python side change together; the flake passes its own source.
# It may be a path or a string (a flake's `self` is a store-path string).
#
# The checks below are deliberately a subset of the Python side's: enough that a broken config
# fails here with the file and key named, instead of deep inside a nixpkgs override.
{
  configDir ? ../configs,
}:
let
  lib = import ./lib.nix;
  inherit (builtins)
    all
    any
    attrNames
    concatStringsSep
    elem
    filter
    isBool
    isInt
    isList
    isString
    map
    typeOf
    ;

  read =
    file:
    let
      path = configDir + "/${file}";
    in
    if builtins.pathExists path then
      builtins.fromTOML (builtins.readFile path)
    else
      throw "workbench: ${toString path} does not exist (configDir = ${toString configDir})";

  # table.key, or a throw naming file, table and key.
  get =
    file: where: table: key:
    if table ? ${key} then table.${key} else throw "configs/${file}: ${where}: key \"${key}\" is missing";

  strings =
    file: where: value:
    if isList value && all isString value then
      value
    else
      throw "configs/${file}: ${where}: must be a list of strings, not a ${typeOf value}";

  tables =
    file: data: key:
    let
      value = data.${key} or [ ];
    in
    if isList value && value != [ ] then
      value
    else
      throw "configs/${file}: needs at least one [[${key}]] table";

  matrixData = read "matrix.toml";
  flavoursData = read "flavours.toml";
  settingsData = read "settings.toml";

  m = get "matrix.toml";
  floors = matrixData.driver_floors or { };

  isas = map (t: {
    name = m "[[isas]]" t "name";
    label = m "[[isas]] ${t.name or "?"}" t "label";
    flags = strings "matrix.toml" "[[isas]] ${t.name or "?"}.flags" (m "[[isas]]" t "flags");
    platform = m "[[isas]] ${t.name or "?"}" t "platform";
    hardware = t.hardware or "";
    use = t.use or "";
  }) (tables "matrix.toml" matrixData "isas");
  isaNames = map (isa: isa.name) isas;

  checkIsas =
    where: names:
    let
      unknown = filter (name: !(elem name isaNames)) names;
    in
    if unknown == [ ] then
      names
    else
      throw "configs/matrix.toml: ${where} names unknown ISAs ${concatStringsSep ", " unknown} (ISAs: ${concatStringsSep ", " isaNames})";

  # [nixpkgs_pin]: the CUDA package sets nixpkgs has at the pin (matrix.toml cites nixpkgs'
  # all-packages.nix and aliases.nix). A toolkit outside it is never looked up in nixpkgs: at the
  # pin that lookup is a `throw`, which no `or` catches.
  pin = m "top level" matrixData "nixpkgs_pin";
  pinCudaSets = strings "matrix.toml" "[nixpkgs_pin].cuda_package_sets" (
    m "[nixpkgs_pin]" pin "cuda_package_sets"
  );

  toolkits = map (
    t:
    let
      where = "[[toolkits]] ${t.name or "?"}";
      version = m where t "version";
      attr = m where t "nixpkgs_attr";
    in
    {
      name = m where t "name";
      inherit version;
      python = m where t "python";
      nixpkgs_attr = attr;
      atPin = elem attr pinCudaSets;
      instead = t.instead or null;
      min_driver =
        floors.${version}
          or (throw "configs/matrix.toml: toolkit ${version} has no entry in [driver_floors] (${concatStringsSep ", " (attrNames floors)})");
    }
  ) (tables "matrix.toml" matrixData "toolkits");

  sms = map (
    t:
    let
      where = "[[sms]] ${t.name or "?"}";
      capability = m where t "capability";
    in
    {
      name = m where t "name";
      inherit capability;
      cmakeArch = lib.capabilityToArch capability;
      family = m where t "family";
      gpus = strings "matrix.toml" "${where}.gpus" (m where t "gpus");
      isas = checkIsas where (strings "matrix.toml" "${where}.isas" (m where t "isas"));
      min_toolkit = m where t "min_toolkit";
    }
  ) (tables "matrix.toml" matrixData "sms");

  cpuOnly = m "top level" matrixData "cpu_only";

  knownArchitectures = strings "matrix.toml" "[cuda_architectures].known" (
    m "[cuda_architectures]" (matrixData.cuda_architectures or { }) "known"
  );

  flavours = map (
    t:
    let
      f = get "flavours.toml" "[[flavours]] ${t.name or "?"}" t;
    in
    let
      linkage = f "linkage";
    in
    {
      name = f "name";
      attr = f "attr";
      description = f "description";
      cuda = f "cuda";
      linkage =
        if elem linkage [
          "static"
          "hybrid"
          "shared"
        ] then
          linkage
        else
          throw "configs/flavours.toml: [[flavours]] ${t.name}.linkage: \"${toString linkage}\" is not static, hybrid or shared";
      shared = linkage == "shared";
      experimental = f "experimental";
      defines = strings "flavours.toml" "[[flavours]] ${t.name}.defines" (f "defines");
      cudaArchitectures = map (lib.normaliseArch knownArchitectures) (
        strings "flavours.toml" "[[flavours]] ${t.name}.cuda_architectures" (f "cuda_architectures")
      );
      produces = strings "flavours.toml" "[[flavours]] ${t.name}.produces" (f "produces");
    }
  ) (tables "flavours.toml" flavoursData "flavours");

  s = get "settings.toml" "settings" settingsData;

  wholeNumber =
    key: value:
    if isInt value && value >= 1 then value else throw "configs/settings.toml: ${key} must be a whole number >= 1, not ${builtins.toJSON value}";

  # Same rule as workbench/configs/settings.py: a plain flag, so nothing can smuggle a second word in.
  compilerFlag =
    flag:
    if isString flag && builtins.match "-[A-Za-z0-9_=.,+:/-]+" flag != null then
      flag
    else
      throw "configs/settings.toml: optimization_flags: ${builtins.toJSON flag} is not a plain compiler flag";

  # Only the keys below are read; others (such as the retired enabled_patches, now `enabled` in
  # patches/series.toml) are left to the Python side to judge.
  settings = {
    # ninja_jobs and max_jobs are read for completeness only: they reach Nix as
    # `nix build --cores N --max-jobs M` and must never end up in a derivation.
    ninja_jobs = s "ninja_jobs";
    max_jobs = s "max_jobs";
    nvcc_threads = wholeNumber "nvcc_threads" (s "nvcc_threads");
    # Normalised ("sm_90" -> "90") and de-duplicated; [] means "each variant's own SM".
    cuda_architectures = lib.unique (
      map (lib.normaliseArch knownArchitectures) (
        strings "settings.toml" "cuda_architectures" (s "cuda_architectures")
      )
    );
    optimization_flags = map compilerFlag (strings "settings.toml" "optimization_flags" (s "optimization_flags"));
    ccache =
      let
        value = s "ccache";
      in
      if isBool value then value else throw "configs/settings.toml: ccache must be true or false";
    # Off unless the file says true (older settings files lack the key).
    nvcc_host_isa_flags =
      let
        value = settingsData.nvcc_host_isa_flags or false;
      in
      if isBool value then value else throw "configs/settings.toml: nvcc_host_isa_flags must be true or false";
    linkage =
      let
        value = s "linkage";
      in
      if any (f: f.name == value) flavours then
        value
      else
        throw "configs/settings.toml: linkage \"${toString value}\" is not a flavour (${concatStringsSep ", " (map (f: f.name) flavours)})";
  };
in
{
  ortVersion = m "[onnxruntime]" (matrixData.onnxruntime or { }) "version";
  nixpkgsRev = m "[onnxruntime]" (matrixData.onnxruntime or { }) "nixpkgs_rev";
  driverFloors = floors;
  inherit pinCudaSets;
  cpuPython = m "[cpu_only]" cpuOnly "python";
  cpuIsas = checkIsas "[cpu_only]" (strings "matrix.toml" "[cpu_only].isas" (m "[cpu_only]" cpuOnly "isas"));
  inherit
    toolkits
    sms
    isas
    knownArchitectures
    flavours
    settings
    ;
}
