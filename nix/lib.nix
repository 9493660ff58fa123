# Small pure helpers for the rest of nix/.
#
# Everything here uses builtins only, never nixpkgs' `lib`: the variant matrix must evaluate
# without nixpkgs (`nix-instantiate --eval nix/matrix.nix` in the tests and on machines where
# nixpkgs has not been fetched yet), and the overrides must work unchanged against the test
# stand-in for nixpkgs, which has no `lib`.
let
  inherit (builtins)
    concatStringsSep
    elem
    filter
    foldl'
    isString
    match
    replaceStrings
    stringLength
    substring
    ;

  hasPrefix = prefix: text: substring 0 (stringLength prefix) text == prefix;

  upper = [ "A" "B" "C" "D" "E" "F" "G" "H" "I" "J" "K" "L" "M" "N" "O" "P" "Q" "R" "S" "T" "U" "V" "W" "X" "Y" "Z" ];
  lower = [ "a" "b" "c" "d" "e" "f" "g" "h" "i" "j" "k" "l" "m" "n" "o" "p" "q" "r" "s" "t" "u" "v" "w" "x" "y" "z" ];

  # The same forms workbench/configs/cuda_arch.py accepts ("sm_90", "compute_90", "9.0", "90a",
  # "90-real"), so a settings.toml the Python side accepts means the same thing here.
  archForm = "(sm_|compute_|sm|compute)?([0-9]{1,3})(\\.([0-9]))?([af])?(-real|-virtual)?";
in
rec {
  inherit hasPrefix;

  toLower = replaceStrings upper lower;
  toUpper = replaceStrings lower upper;

  # "3.13" -> "313": the Python part of a variant name.
  pythonTag = python: replaceStrings [ "." ] [ "" ] python;

  # "3.12" -> "python312Packages". Always the versioned set, never python3Packages: which
  # Python `python3Packages` means moves with the nixpkgs pin, the matrix's choice must not.
  pythonPackagesAttr = python: "python${pythonTag python}Packages";

  # "9.0" -> "90": CMAKE_CUDA_ARCHITECTURES is the compute capability without the dot.
  capabilityToArch = capability: replaceStrings [ "." ] [ "" ] capability;

  optional = condition: value: if condition then [ value ] else [ ];
  optionals = condition: values: if condition then values else [ ];
  optionalAttrs = condition: attrs: if condition then attrs else { };

  # Drop duplicates, keeping the first occurrence (and so the order).
  unique = foldl' (kept: item: if elem item kept then kept else kept ++ [ item ]) [ ];

  # Join the non-empty words with spaces (compiler-flag strings).
  splitSemicolons = text: filter (part: isString part && part != "") (builtins.split ";" text);

  joinWords = words: concatStringsSep " " (filter (word: word != "" && word != null) words);

  # cmakeFlags without any -D for the named cache variables. nixpkgs writes them with
  # lib.cmakeFeature / lib.cmakeBool ("-DNAME:STRING=..."), others write "-DNAME=...": both go.
  # Replacing rather than appending keeps one value per variable in the configure log, so the
  # log shows what the build used instead of relying on "last -D wins".
  dropCmakeVars =
    names: flags:
    filter (
      flag:
      !(isString flag && builtins.any (name: hasPrefix "-D${name}=" flag || hasPrefix "-D${name}:" flag) names)
    ) flags;

  # One CUDA architecture in CMAKE_CUDA_ARCHITECTURES form, or a throw that says what is valid.
  # Matched groups (from 0): 0 prefix, 1 major, 3 minor, 4 "a"/"f" suffix, 5 -real/-virtual.
  normaliseArch =
    known: text:
    let
      found = match archForm (toLower text);
      group = index: orEmpty (builtins.elemAt found index);
      arch = if found == null then null else group 1 + group 3 + group 4;
    in
    if arch != null && elem arch known then
      arch + group 5
    else
      throw (
        "configs/settings.toml: cuda_architectures: unknown CUDA architecture \"${text}\"; valid values: "
        + concatStringsSep ", " known
        + " (also written sm_90, compute_90, 9.0, 90-real, 90-virtual)"
      );

  # An optional regex group: null when it did not take part in the match.
  orEmpty = value: if value == null then "" else value;

}
