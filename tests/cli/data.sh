#!/usr/bin/env bash
# graphtune data synth: deterministic bytes, one-line errors with exit code 2, and an existing
# folder left alone unless --overwrite. Needs no assets.
source "$(dirname "$0")/lib.sh"

FILES="classes.tsv nodes.tsv edges.tsv features.npy meta.json"

same_files() {  # same_files DIR1 DIR2: every file byte-identical
  local f
  for f in $FILES; do cmp -s "$1/$f" "$2/$f" || { echo "    differs: $f"; return 1; }; done
}
one_line_mentioning() {  # one_line_mentioning FILE TEXT
  [ "$(grep -c '' "$1")" -eq 1 ] && grep -qF -- "$2" "$1"
}
no_leftovers() {  # nothing but the folders the test made
  [ -z "$(ls "$TMP" | grep -E '\.(tmp|old)\.')" ]
}

"$GT" data synth --out "$TMP/a" --seed 3 --nodes 500 2>"$TMP/log_a"
check "synth exits 0" [ $? -eq 0 ]
check "summary is one line with the counts" one_line_mentioning "$TMP/log_a" "500 nodes"
for f in $FILES; do check "wrote $f" [ -s "$TMP/a/$f" ]; done

"$GT" data synth --out "$TMP/b" --seed 3 --nodes 500 2>/dev/null
check "same seed, identical bytes" same_files "$TMP/a" "$TMP/b"
"$GT" data synth --out "$TMP/c" --seed 4 --nodes 500 2>/dev/null
differ() { ! cmp -s "$1" "$2"; }
check "another seed, other titles" differ "$TMP/a/nodes.tsv" "$TMP/c/nodes.tsv"

# meta.json's checksums are what sha256sum says.
meta_matches_sha256sum() {
  local f sum
  for f in classes.tsv nodes.tsv edges.tsv features.npy; do
    sum=$(sha256sum "$TMP/a/$f" | cut -d' ' -f1)
    grep -qF "\"sha256\": \"$sum\"" "$TMP/a/meta.json" || { echo "    $f: $sum not in meta.json"; return 1; }
  done
}
check "meta.json sha256 matches sha256sum" meta_matches_sha256sum

expect_fail "noise above 1" "--noise" -- "$GT" data synth --out "$TMP/bad" --noise 1.5
expect_fail "negative homophily" "--homophily" -- "$GT" data synth --out "$TMP/bad" --homophily -0.2
expect_fail "fewer nodes than classes" "--nodes" -- "$GT" data synth --out "$TMP/bad" --nodes 3 --classes 5
expect_fail "too many classes" "--classes" -- "$GT" data synth --out "$TMP/bad" --classes 13
check "nothing written for bad values" [ ! -e "$TMP/bad" ]

# An existing non-empty folder is refused and left exactly as it was.
sha_before=$(cd "$TMP/a" && sha256sum $FILES)
expect_fail "existing folder" "not empty" -- "$GT" data synth --out "$TMP/a" --seed 9 --nodes 500
check "refused folder untouched" [ "$(cd "$TMP/a" && sha256sum $FILES)" = "$sha_before" ]
check "no temporary folders left" no_leftovers

"$GT" data synth --out "$TMP/a" --seed 4 --nodes 500 --overwrite 2>/dev/null
check "--overwrite replaces it" same_files "$TMP/a" "$TMP/c"
check "no temporary folders left after overwrite" no_leftovers

# numpy reads the features as written (when the project's Python has numpy).
PY=${GRAPHTUNE_PYTHON:-python3}
if "$PY" -c "import numpy" 2>/dev/null; then
  check "numpy.load reads features.npy (500 x 128, unit rows)" "$PY" -c "
import numpy as np, sys
x = np.load(sys.argv[1])
assert x.shape == (500, 128) and x.dtype == np.float32, (x.shape, x.dtype)
assert abs(np.linalg.norm(x, axis=1) - 1).max() < 1e-5
" "$TMP/a/features.npy"
else
  echo "skip numpy check: no numpy in $PY"
fi

finish
