# configs/releases.toml as checked data: the ONNX Runtime releases the flake builds, the same
# file workbench/configs/releases.py reads. Plain data, no nixpkgs (nix/variants.nix uses it).
#
# Returns { default; byVersion; offered; versions; suffixOf; release; }:
#   default      the pin's own release ("1.23.2"): its packages keep the seeds' names
#   offered      the releases that are built (offered = true), file order
#   suffixOf v   "" for the default, else "-ort1_24_2": attribute and out-link names carry it
#   release v    the release record, or a throw naming the file and the known versions
{
  configDir ? ../configs,
}:
let
  inherit (builtins)
    all
    attrNames
    concatStringsSep
    elem
    filter
    isBool
    isList
    isString
    listToAttrs
    map
    replaceStrings
    ;

  path = configDir + "/releases.toml";
  data =
    if builtins.pathExists path then
      builtins.fromTOML (builtins.readFile path)
    else
      throw "workbench: ${toString path} does not exist (configDir = ${toString configDir})";

  fail = where: problem: throw "configs/releases.toml: ${where}: ${problem}";
  get =
    where: table: key:
    if table ? ${key} then table.${key} else fail where "key \"${key}\" is missing";
  strings =
    where: value:
    if isList value && all isString value then value else fail where "must be a list of strings";
  bool = where: value: if isBool value then value else fail where "must be true or false";

  fixes = data.fixes or { };
  fixOf =
    where: name:
    if fixes ? ${name} then
      let
        fix = fixes.${name};
        at = "[fixes.${name}]";
      in
      {
        inherit name;
        why = get at fix "why";
        cudaOnly = bool "${at}.cuda_only" (get at fix "cuda_only");
        script = get at fix "script";
      }
    else
      fail where "fix \"${name}\" has no [fixes.${name}] table (fixes: ${concatStringsSep ", " (attrNames fixes)})";

  # One CMake definition, NAME[:TYPE]=VALUE: the name is what an earlier value is dropped by.
  cmakeFlag =
    where: text:
    let
      found = builtins.match "([A-Za-z_][A-Za-z0-9_]*)(:[A-Z]+)?=(.*)" text;
    in
    if found == null then
      fail where "\"${text}\" is not NAME[:TYPE]=VALUE"
    else
      {
        name = builtins.head found;
        flag = "-D${text}";
      };

  depOf =
    where: dep:
    let
      tag = dep.tag or null;
      rev = dep.rev or null;
    in
    if (tag == null) == (rev == null) then
      fail where "give exactly one of tag or rev"
    else
      {
        fetchcontent = get where dep "fetchcontent";
        owner = get where dep "owner";
        repo = get where dep "repo";
        inherit tag rev;
        hash = get where dep "hash";
        cudaOnly = bool "${where}.cuda_only" (get where dep "cuda_only");
      };

  releaseOf =
    table:
    let
      version = get "[[releases]]" table "version";
      where = "[[releases]] ${version}";
      own = bool "${where}.nixpkgs_own" (get where table "nixpkgs_own");
      offered = bool "${where}.offered" (get where table "offered");
    in
    {
      inherit version offered;
      nixpkgsOwn = own;
      why = get where table "why";
      floxBranch = table.flox_branch or "";
      suffix = if version == defaultVersion then "" else "-ort" + replaceStrings [ "." ] [ "_" ] version;
    }
    // (
      if own then
        {
          tag = null;
          hash = null;
          fixes = [ ];
          cmakeFlags = [ ];
          cxxflags = [ ];
          deps = [ ];
          unsupportedSms = [ ];
          unsupportedSmsWhy = "";
          flavoursNotOffered = [ ];
          flavoursWhy = "";
        }
      else
        {
          tag = get where table "tag";
          hash = get where table "hash";
          fixes = map (fixOf "${where}.fixes") (strings "${where}.fixes" (get where table "fixes"));
          cmakeFlags = map (cmakeFlag "${where}.cmake_flags") (
            strings "${where}.cmake_flags" (get where table "cmake_flags")
          );
          cxxflags = strings "${where}.cxxflags" (get where table "cxxflags");
          deps = map (depOf "${where} [[releases.deps]]") (table.deps or [ ]);
          unsupportedSms = strings "${where}.unsupported_sms" (get where table "unsupported_sms");
          unsupportedSmsWhy = get where table "unsupported_sms_why";
          flavoursNotOffered = strings "${where}.flavours_not_offered" (get where table "flavours_not_offered");
          flavoursWhy = get where table "flavours_why";
        }
    );

  defaultVersion = get "top level" data "default";
  all' = map releaseOf (data.releases or [ ]);
  versions = map (r: r.version) all';
  byVersion = listToAttrs (
    map (r: {
      name = r.version;
      value = r;
    }) all'
  );
  checkedDefault =
    if !(elem defaultVersion versions) then
      fail "default" "\"${defaultVersion}\" is not a [[releases]] version (${concatStringsSep ", " versions})"
    else if !byVersion.${defaultVersion}.nixpkgsOwn then
      fail "default" "the default release must be the pin's own (nixpkgs_own = true)"
    else
      defaultVersion;
  release =
    version:
    byVersion.${version}
      or (fail "release" "no release ${version} (releases: ${concatStringsSep ", " versions})");
in
{
  default = checkedDefault;
  inherit versions byVersion release;
  offered = filter (r: r.offered) all';
  suffixOf = version: (release version).suffix;
}
