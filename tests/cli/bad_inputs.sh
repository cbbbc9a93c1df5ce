#!/usr/bin/env bash
# The bad-input corpus (tests/bad_inputs/cases.tsv): every malformed file through the real CLI.
# Each case must end with its exit code (2 unless the manifest says otherwise: 1 for a machine
# that refuses a write) and exactly one line on stderr that names the input and
# contains the manifest's text; no crash, no hang (timeout 60), no sanitizer report (the same
# script runs against an ASan+UBSan build: GRAPHTUNE_BIN / GRAPHTUNE_WORKER point there), and
# nothing left behind: the {out} path does not exist, its parent and the working folder stay
# empty, and no file appears beside the inputs.
source "$(dirname "$0")/lib.sh"
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CORPUS=$ROOT/tests/bad_inputs
export GRAPHTUNE_WORKER=${GRAPHTUNE_WORKER:-$(dirname "$GT")/../worker/graphtune-worker}
ONLY=${1:-}  # a substring of the input paths to run only some cases (by hand)

listing() { (cd "$CORPUS" && find . -print | LC_ALL=C sort); }
before=$(listing)
declare -A kinds
skipped=0
n=0
while IFS=$'\t' read -r input want command exit_code; do
  exit_code=${exit_code:-2}
  [ -z "$input" ] || [ "${input:0:1}" = "#" ] && continue
  [ -n "$ONLY" ] && [[ "$input" != *"$ONLY"* ]] && continue
  n=$((n + 1))
  case_dir=$TMP/case_$n
  mkdir -p "$case_dir/cwd"
  path=$CORPUS/$input
  if [[ "$command" == *"{assets}"* ]] && [ ! -d "$ASSETS/llm" ]; then
    echo "skip $input: needs the shared assets at $ASSETS"
    skipped=$((skipped + 1))
    continue
  fi
  if [ ! -e "$path" ]; then
    echo "FAIL $input: the input is missing from the corpus (run tests/bad_inputs/make_binaries.py)"
    failures=$((failures + 1)); checks=$((checks + 1))
    continue
  fi
  kinds[${input%%/*}]=1
  cmd=${command//\{gt\}/$GT}
  cmd=${cmd//\{worker\}/$GRAPHTUNE_WORKER}
  cmd=${cmd//\{root\}/$ROOT}
  cmd=${cmd//\{assets\}/$ASSETS}
  cmd=${cmd//\{input\}/$path}
  # flags/*.args hold command-line arguments, not a file to read: {args} stands for them.
  [[ "$cmd" == *"{args}"* ]] && cmd=${cmd//\{args\}/$(tr '\n' ' ' <"$path")}
  cmd=${cmd//\{out\}/$case_dir/out}
  checks=$((checks + 1))
  # Word splitting of the template is the point: the manifest's commands hold no quotes.
  (cd "$case_dir/cwd" && printf '"a"\n' | timeout 60 $cmd >"$case_dir/stdout" 2>"$case_dir/stderr")
  rc=$?
  # A case whose setting this machine cannot make (a mount namespace) says so and exits 77.
  if [ "$rc" -eq 77 ] && grep -q '^skip: ' "$case_dir/stdout"; then
    echo "skip $input: $(sed 's/^skip: //' "$case_dir/stdout")"
    skipped=$((skipped + 1))
    continue
  fi
  lines=$(grep -c '' "$case_dir/stderr")
  err=$(head -c 2000 "$case_dir/stderr")
  problems=()
  [ "$rc" -eq 124 ] && problems+=("hung (killed after 60 s)")
  [ "$rc" -ne "$exit_code" ] && [ "$rc" -ne 124 ] && problems+=("exit code $rc, want $exit_code")
  [ "$lines" -ne 1 ] && problems+=("$lines lines on stderr, want 1")
  grep -qF -- "$want" "$case_dir/stderr" || problems+=("stderr lacks: $want")
  # A bad flag's line names the flag (the manifest's text has it), not the file holding it.
  if [ "${input%%/*}" != flags ]; then
    grep -qF -- "$(basename "$path")" "$case_dir/stderr" || problems+=("stderr does not name $(basename "$path")")
  fi
  grep -qE 'runtime error:|ERROR: AddressSanitizer|ERROR: LeakSanitizer' "$case_dir/stdout" "$case_dir/stderr" &&
    problems+=("sanitizer report")
  # A damaged file's bytes are echoed escaped: a raw ESC or CR in the message rewrites the terminal.
  LC_ALL=C grep -qP '[\x00-\x08\x0b-\x1f\x7f]' "$case_dir/stderr" && problems+=("control characters in the message")
  [ -e "$case_dir/out" ] && problems+=("left the output $case_dir/out behind")
  leftover=$(cd "$case_dir" && find . -mindepth 1 ! -name stdout ! -name stderr ! -name cwd | head -3)
  [ -n "$leftover" ] && problems+=("left $leftover beside the output")
  leftover=$(cd "$case_dir/cwd" && find . -mindepth 1 | head -3)
  [ -n "$leftover" ] && problems+=("left $leftover in the working folder")
  now=$(listing)
  if [ "$now" != "$before" ]; then
    problems+=("changed the corpus: $(diff <(echo "$before") <(echo "$now") | grep '^[<>]' | head -3 | tr '\n' ' ')")
    before=$now
  fi
  if [ ${#problems[@]} -eq 0 ]; then
    echo "ok   $input: $err"
  else
    failures=$((failures + 1))
    echo "FAIL $input: $(IFS=';'; echo "${problems[*]}")"
    sed 's/^/    stderr: /' "$case_dir/stderr" | head -6 | cat -v
  fi
done <"$CORPUS/cases.tsv"

echo "$n cases, ${#kinds[@]} kinds ($(echo "${!kinds[@]}" | tr ' ' '\n' | sort | tr '\n' ' ' | sed 's/ $//'))"
[ "$skipped" -gt 0 ] && [ "$skipped" -eq "$n" ] && { echo "SKIP: every case needs the shared assets"; exit 77; }
finish
