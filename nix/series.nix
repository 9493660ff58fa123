# patches/series.toml, read with builtins.fromTOML and checked: the ONE source of truth for the
# patches the flake applies. workbench/patches/series.py reads the same file (and `workbench
# patches enable|disable|new` edit it); tests/configs/test_nix_matrix.py checks that both sides select
# the same patches for every flavour and variant.
#
# What a package gets (nix/overrides.nix asks for it by name):
#   forFlavour NAME   the enabled patches whose `flavours` list holds NAME (a linkage flavour
#                     of configs/flavours.toml)
#   forVariant NAME   the enabled patches with a `variants` pattern matching NAME (a variant
#                     name; '*' matches any run of characters)
# both in series order (the file's order), as the checked [[patches]] tables. `fileOf` turns
# one of them into its patch file in the store, or throws saying how to get the file.
#
# Arguments:
#   patchDir  the folder holding series.toml and the patch files: the repository's patches/,
#             or a modified copy in the tests. A path or a string (a flake's `self` is a string).
#   matrix    nix/variants.nix's output for the configs in use: `flavours` may only name its
#             flavours, and a `variants` pattern must match at least one of its variants.
#
# Errors name the file, the patch and the key, like nix/config.nix's: a broken series fails
# here, on the first package that asks for its patches, and not deep inside a nixpkgs override.
# The checks are a subset of the Python side's (which also knows line numbers).
{
  patchDir ? ../patches,
  configDir ? ../configs,
  matrix ? import ./variants.nix { inherit configDir; },
}:
let
  inherit (builtins)
    any
    all
    attrNames
    concatStringsSep
    deepSeq
    elem
    elemAt
    filter
    genList
    head
    isAttrs
    isBool
    isList
    isString
    length
    map
    match
    replaceStrings
    toJSON
    typeOf
    ;

  # How messages name the file, whichever copy patchDir points at.
  label = "patches/series.toml";
  seriesPath = patchDir + "/series.toml";

  keys = [
    "name"
    "file"
    "group"
    "fixes"
    "flavours"
    "variants"
    "enabled"
    # optional: the releases of configs/releases.toml the patch is for (absent: every release)
    "releases"
  ];
  optionalKeys = [ "releases" ];
  releaseVersions = matrix.releases.versions;

  flavourNames = map (flavour: flavour.name) matrix.flavours;
  variantNames = map (variant: variant.name) matrix.variants;

  # The same rules as workbench/patches/series.py.
  namePattern = "[a-z0-9][a-z0-9._-]*";
  filePattern = "[A-Za-z0-9][A-Za-z0-9._-]*\\.patch";
  variantPattern = "[a-z0-9_*-]+";
  groupPattern = "[a-z0-9][a-z0-9-]*";
  # Something other than white space, over any number of lines.
  sentencePattern = "(.|\n)*[^[:space:]](.|\n)*";

  # A `variants` pattern as a regex for builtins.match (which matches the whole name): '*' is
  # any run of characters. The checked pattern holds no other character a regex treats
  # specially ('-' and '_' are literal outside brackets), so nothing else needs escaping.
  globRegex = pattern: replaceStrings [ "*" ] [ ".*" ] pattern;
  globMatches = pattern: name: match (globRegex pattern) name != null;

  data =
    # Nix reports a TOML syntax error without the file's name, but shows the line below: its
    # comment names the file for the reader.
    if builtins.pathExists seriesPath then
      builtins.fromTOML (builtins.readFile seriesPath) # malformed TOML in patches/series.toml
    else
      throw (
        "workbench: ${label}: ${toString seriesPath} does not exist (patchDir = ${toString patchDir}). "
        + "It lists the patches the flake applies; restore it (a series without patches is a file with no [[patches]] tables). "
        + "In a git checkout, also `git add` it: a flake only sees tracked files."
      );

  tables =
    let
      unknown = filter (key: key != "patches") (attrNames data);
      value = data.patches or [ ];
    in
    if unknown != [ ] then
      throw "${label}: unknown top-level key \"${head unknown}\"; the file holds only [[patches]] tables"
    else if isList value && all isAttrs value then
      value
    else
      throw "${label}: patches must be [[patches]] tables, not a ${typeOf value}";

  # One [[patches]] table, checked: the same attributes, or a throw naming the patch and key.
  # `index` counts from 0; messages count from 1, as a reader of the file does.
  checkTable =
    index: table:
    let
      number = toString (index + 1);
      where =
        if isString (table.name or null) then
          "${label}: patch \"${table.name}\" ([[patches]] table ${number})"
        else
          "${label}: [[patches]] table ${number}";
      fail = key: problem: throw "${where}: ${key}: ${problem}";
      show = toJSON;

      unknown = filter (key: !(elem key keys)) (attrNames table);
      missing = filter (key: !(table ? ${key}) && !(elem key optionalKeys)) keys;

      string =
        key: pattern: allowed:
        let
          value = table.${key};
        in
        if isString value && match pattern value != null then
          value
        else
          fail key "${show value} is not allowed: ${allowed}";

      stringList =
        key: allowed:
        let
          value = table.${key};
        in
        if isList value && all isString value then value else fail key "${show value} is not ${allowed}";

      flavours = map (
        flavour:
        if elem flavour flavourNames then
          flavour
        else
          fail "flavours" "\"${flavour}\" is not a flavour of configs/flavours.toml (${concatStringsSep ", " flavourNames})"
      ) (stringList "flavours" "a list of flavour names");

      variants = map (
        pattern:
        if match variantPattern pattern == null then
          fail "variants" "${show pattern} is not a variant name or pattern: lower-case letters, digits, '_', '-' and '*' only"
        else if !(any (globMatches pattern) variantNames) then
          fail "variants" "\"${pattern}\" matches no variant (`workbench variants --names` lists them)"
        else
          pattern
      ) (stringList "variants" "a list of variant names or patterns with '*'");
    in
    if unknown != [ ] then
      fail (head unknown) "unknown key (the keys are ${concatStringsSep ", " keys})"
    else if missing != [ ] then
      throw "${where}: key \"${head missing}\" is missing"
    else
      {
        name = string "name" namePattern "lower-case letters, digits, '.', '_' and '-', starting with a letter or digit";
        file = string "file" filePattern "a plain file name in patches/ ending in .patch (no directories)";
        group = string "group" groupPattern "a word such as static-init, bridge-loop, build-system, portability, local";
        fixes = string "fixes" sentencePattern "a sentence saying what the patch fixes";
        inherit flavours variants;
        releases =
          if table ? releases then
            map (
              version:
              if elem version releaseVersions then
                version
              else
                fail "releases" "\"${version}\" is not a release of configs/releases.toml (${concatStringsSep ", " releaseVersions})"
            ) (stringList "releases" "a list of ONNX Runtime versions")
          else
            null;
        enabled =
          if isBool table.enabled then table.enabled else fail "enabled" "${show table.enabled} is not true or false";
      };

  checked = genList (index: checkTable index (elemAt tables index)) (length tables);

  names = map (patch: patch.name) checked;
  repeated = filter (name: length (filter (other: other == name) names) > 1) names;
  # "2 and 5": the tables (counted from 1) that use `name`.
  tablesUsing =
    name:
    let
      numbers = genList (index: index + 1) (length names);
    in
    concatStringsSep " and " (map toString (filter (number: elemAt names (number - 1) == name) numbers));

  # Every table checked, all at once: a broken entry fails every package's evaluation, not only
  # the packages it would apply to (it would otherwise go unnoticed until someone built those).
  patches =
    if repeated != [ ] then
      throw "${label}: patch \"${head repeated}\": name: used by [[patches]] tables ${tablesUsing (head repeated)}; names must be unique"
    else
      deepSeq checked checked;

  enabled = filter (patch: patch.enabled) patches;
  appliesAt = version: patch: patch.releases == null || elem version patch.releases;

  # The patches for a flavour or variant (its name without a release suffix) at a release:
  # an entry with `releases` applies only to those; the plain forms are at the pin's release.
  forFlavourAt =
    version: flavour: filter (appliesAt version) (filter (patch: elem flavour patch.flavours) enabled);
  forVariantAt =
    version: variant:
    filter (appliesAt version) (filter (patch: any (pattern: globMatches pattern variant) patch.variants) enabled);
  forFlavour = flavour: forFlavourAt matrix.ortVersion flavour;
  forVariant = variant: forVariantAt matrix.ortVersion variant;
in
{
  inherit patches patchDir;

  # The series' names, in order, enabled or not.
  names = map (patch: patch.name) patches;

  inherit forFlavourAt forVariantAt forFlavour forVariant;

  # One patch file as its own store path. builtins.path with a fixed name copies just that
  # file, so a derivation depends on the patch's contents only: interpolating a path inside the
  # flake source would make every build depend on the whole repository (editing settings.toml
  # would rebuild ORT). Only the selected patches are looked up, so a patch applied nowhere may
  # lack its file.
  fileOf =
    patch:
    let
      path = patchDir + "/${patch.file}";
    in
    if builtins.pathExists path then
      builtins.path {
        inherit path;
        name = patch.file;
      }
    else
      throw (
        "workbench: patch ${patch.name} (file ${patch.file}, in ${label}) is missing: ${toString path} does not exist. "
        + "Import it with the others: `workbench patches import DIR --source ORT_SOURCE` (DIR such as your onnxruntime-builder checkout's patches/), "
        + "or disable it in ${label} (`workbench patches disable ${patch.name}`). "
        + "(In a git checkout, also `git add` it: a flake only sees tracked files.)"
      );
}
