#!/usr/bin/env bash
# graphtune eval on many ranks under real mpirun, against one process of one thread:
#  - dp 2, pp 2, dp 2 x pp 2 and tp 2 (its ranks answer as replicas) through the launcher, and
#    dp 2 under a plain mpirun, write the one
#    rank's predictions.jsonl, metrics.json and GraphGPT result file byte for byte, greedy,
#    under GraphGPT's sampling protocol, and (pp 2, tp 2) greedy within the class names;
#  - a rank killed after a random number of batches stops the job within 10 s and leaves no
#    result file, only the committed answers; --resume at another layout ends with the same
#    files; a changed record file or projector on --resume is refused in one line;
#  - --max-restarts continues a killed eval by itself; Ctrl-C stops it and says how to continue;
#  - the prompt prefix the records share, computed once, changes no answer;
#  - the launcher shows the records answered and writes them, and the scores, to metrics.jsonl.
source "$(dirname "$0")/lib.sh"
need_mpirun 300
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CFG=$ROOT/configs/lm.toml
W=${GRAPHTUNE_WORKER:?set by ctest}
export OMP_NUM_THREADS=1

"$GT" train --config "$CFG" --model.max_seq_len 1024 --training.steps 5 --job.out_dir "$TMP/lm" >/dev/null 2>"$TMP/lm.txt"
for split in train test; do
  n=40; [ $split = test ] && n=16
  "$GT" data build --graph embedded --task node_classification --split $split --max-nodes 3 --max-records $n \
    --out "$TMP/$split.json" 2>/dev/null
done
"$GT" train --config "$CFG" --training.stage task --model.path "$TMP/lm/model" --data.instructions "$TMP/train.json" \
  --data.max_len 1024 --training.steps 3 --training.batch_size 4 --job.out_dir "$TMP/s2" >/dev/null 2>"$TMP/s2.txt"
check "the model to evaluate: stage task wrote graph_projector.bin" test -s "$TMP/s2/graph_projector.bin"

# One thread a rank everywhere: a matrix product's rounding may depend on the thread count.
EVAL=(eval --config "$CFG" --model.path "$TMP/lm/model" --data.max_len 1024 --eval.max_new_tokens 8
      --eval.batch_size 3 --model.projector "$TMP/s2/graph_projector.bin" --data.instructions "$TMP/test.json"
      --training.threads 1)
same_results() {  # same_results DIR REF: the three result files equal byte for byte
  cmp -s "$1/predictions.jsonl" "$2/predictions.jsonl" && cmp -s "$1/metrics.json" "$2/metrics.json" &&
    cmp -s "$1/graphgpt/synth_test_res_0_16.json" "$2/graphgpt/synth_test_res_0_16.json"
}

for protocol in graphtune graphgpt choices; do
  P=(--eval.protocol $protocol)
  [ $protocol = graphgpt ] && P+=(--eval.max_new_tokens 12)  # sampling at 0.2, seeded per record
  [ $protocol = choices ] && P=(--eval.answers choices --eval.max_new_tokens 0)  # greedy within the class names
  "$GT" "${EVAL[@]}" "${P[@]}" --out "$TMP/$protocol/one" >"$TMP/$protocol.one.out" 2>"$TMP/$protocol.one.err"
  check "$protocol: one rank exits 0 and answers the 16 records" \
    test $? -eq 0 -a "$(grep -c '' "$TMP/$protocol/one/predictions.jsonl" 2>/dev/null)" = 16
  layouts=("--np 2" "--pp 2" "--dp 2 --pp 2" "--tp 2")
  [ $protocol = choices ] && layouts=("--pp 2" "--tp 2")  # the choices live where the pick is: a pipeline's last stage
  for layout in "${layouts[@]}"; do
    name=$(echo "$layout" | tr -d ' -')
    # shellcheck disable=SC2086
    timeout 300 "$GT" "${EVAL[@]}" "${P[@]}" $layout --out "$TMP/$protocol/$name" >"$TMP/$protocol.$name.out" 2>&1
    rc=$?
    check "$protocol $layout: exits 0" test $rc -eq 0
    [ $rc -eq 0 ] || tail -5 "$TMP/$protocol.$name.out" | sed 's/^/    /'
    check "$protocol $layout: the one rank's result files, byte for byte" same_results "$TMP/$protocol/$name" "$TMP/$protocol/one"
  done
done
check "pp 2: each rank held its stage and the pipeline says how busy its stages were" \
  grep -qE "pipeline of 2 stages, 3 batches in flight: stages busy [0-9]+%, [0-9]+%" "$TMP/graphtune/pp2/logs/workers.log"
check "dp 2 x pp 2: four ranks, each replica's last stage committed batches" \
  test "$(grep -cE 'rank [13]: its batch [0-9]+ \(of 6 in all\)' "$TMP/graphtune/dp2pp2/logs/workers.log")" -ge 2

# The prompt prefix the records share, computed once (the default), against every prompt whole.
check "the shared prompt prefix is computed once" \
  grep -qE "a prefix of [0-9]+ tokens shared by 16 of 16 prompts is computed once" "$TMP/graphtune/one/logs/workers.log"
"$GT" "${EVAL[@]}" --eval.prefix_cache false --out "$TMP/whole" >/dev/null 2>&1
check "--eval.prefix_cache false: the same result files" same_results "$TMP/whole" "$TMP/graphtune/one"

# Plain mpirun, the layout from [parallelism]: the same files.
"${MPIRUN[@]}" -np 2 "$W" "${EVAL[@]}" --parallelism.dp 2 --out "$TMP/plain" >"$TMP/plain.out" 2>&1
check "plain mpirun -np 2: exits 0 with the one rank's result files" same_results "$TMP/plain" "$TMP/graphtune/one"

# The launcher's view: records answered, the summary, metrics.jsonl's progress and scores.
check "the launcher shows records answered of all" grep -qE "^eval 16/16 records  answers/s [0-9.]+" "$TMP/graphtune.np2.out"
check "its summary names the records and the answers per second" \
  grep -qE "^graphtune: eval finished: .*16 of 16 records answered, [0-9.]+ answers/s, accuracy [01]\.[0-9]{4}" \
  "$TMP/graphtune.np2.out"
check "metrics.jsonl: progress from both ranks and the scores" "${GRAPHTUNE_PYTHON:-python3}" - "$TMP/graphtune/np2/metrics.jsonl" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
progress = [r for r in rows if r.get("event") == "eval_progress"]
assert {r["rank"] for r in progress} == {0, 1}, progress
assert progress[-1]["answered"] == 16 and progress[-1]["records"] == 16, progress[-1]
evals = [r for r in rows if r.get("event") == "eval"]
assert len(evals) == 1 and evals[0]["metrics"]["n"] == 16, evals
PYEOF
check "TensorBoard events for the eval" bash -c "ls '$TMP/graphtune/np2/tensorboard/'events.out.tfevents.* >/dev/null"

# --- A rank killed after a random number of its batches (3 records a batch: 6 batches, 3 a rank).
# The ranks claim batches as each becomes free, so on a loaded machine rank 0 could answer every
# batch rank 1 did not before rank 1 reached its k-th, and the eval would end whole. A pause after
# each commit paces both ranks by the clock rather than by their share of the cores.
k=$((RANDOM % 2 + 1))
GRAPHTUNE_TEST_KILL_IN_EVAL=1:$k GRAPHTUNE_TEST_EVAL_SLOW_MS=400 timeout 120 "$GT" "${EVAL[@]}" --np 2 --out "$TMP/killed" >"$TMP/killed.out" 2>&1
rc=$?
end=$(date +%s.%N)
check "killed after $k batches: the launcher exits 1" test $rc -eq 1
killed_at=$(sed -n 's/^graphtune: test: rank 1 killed after [0-9]* committed batches at \([0-9.]*\)$/\1/p' \
  "$TMP/killed/logs/workers.log")
check "the job stopped within 10 s of the kill" python3 -c "import sys; d = float(sys.argv[2]) - float(sys.argv[1]); print('     stopped %.1f s after the kill' % d); assert d < 10" "${killed_at:-0}" "$end"
check "the launcher names the rank that died" grep -qE "rank 1 \(pid [0-9]+ on .*\) exited without finishing" "$TMP/killed.out"
check "no result file that looks whole: no predictions.jsonl, metrics.json or graphgpt/" \
  test ! -e "$TMP/killed/predictions.jsonl" -a ! -e "$TMP/killed/metrics.json" -a ! -e "$TMP/killed/graphgpt"
committed=$(ls "$TMP/killed/progress" | grep -c '^batch_.*\.json$')
check "the answers committed before the kill are kept ($committed batches)" test "$committed" -ge "$k"
expect_fail "without --resume, the interrupted eval is not overwritten" "--resume continues it, --overwrite starts over" -- \
  "$GT" "${EVAL[@]}" --out "$TMP/killed"
cp -r "$TMP/killed" "$TMP/killed2"
cp "$TMP/test.json" "$TMP/test_changed.json"
sed -i 's/synth_test_/synth_test_x/' "$TMP/test_changed.json"
expect_fail "--resume with a changed record file is refused, naming it" "[data].instructions (its content differs) changed" -- \
  "$GT" "${EVAL[@]}" --data.instructions "$TMP/test_changed.json" --out "$TMP/killed" --resume
cp "$TMP/s2/graph_projector.bin" "$TMP/other_projector.bin"
printf 'x' >>"$TMP/other_projector.bin"
expect_fail "--resume with another projector is refused, naming it" "[model].projector (its content differs) changed" -- \
  "$GT" "${EVAL[@]}" --model.projector "$TMP/other_projector.bin" --out "$TMP/killed" --resume
timeout 300 "$GT" "${EVAL[@]}" --pp 2 --out "$TMP/killed" --resume >"$TMP/resumed.out" 2>&1
check "--resume at pp 2 (killed at dp 2) exits 0" test $? -eq 0
check "it answered only what was missing" grep -qE "^graphtune: eval finished: .*16 of 16 records answered \([0-9]+ before this attempt\)" "$TMP/resumed.out"
check "and ends with the uninterrupted run's files, the progress gone" \
  bash -c "cmp -s '$TMP/killed/predictions.jsonl' '$TMP/graphtune/one/predictions.jsonl' && cmp -s '$TMP/killed/metrics.json' '$TMP/graphtune/one/metrics.json' && test ! -e '$TMP/killed/progress'"
timeout 300 "$GT" "${EVAL[@]}" --out "$TMP/killed2" --resume >"$TMP/resumed2.out" 2>&1
check "--resume at one rank ends the same" same_results "$TMP/killed2" "$TMP/graphtune/one"

# --- The launcher restarts a killed eval by itself, keeping what was committed.
GRAPHTUNE_TEST_KILL_IN_EVAL=0:1 timeout 300 "$GT" "${EVAL[@]}" --np 2 --max-restarts 1 --out "$TMP/restarted" \
  >"$TMP/restarted.out" 2>&1
check "--max-restarts 1: exits 0 after one restart" test $? -eq 0 -a "$(grep -c 'restart 1 of 1, keeping the' "$TMP/restarted.out")" = 1
check "with the uninterrupted run's files" same_results "$TMP/restarted" "$TMP/graphtune/one"

# --- Ctrl-C: the ranks finish the batch at hand and stop; the launcher says how to continue.
GRAPHTUNE_TEST_EVAL_SLOW_MS=1500 "$GT" "${EVAL[@]}" --np 2 --out "$TMP/sigint" >"$TMP/sigint.out" 2>&1 &
launcher=$!
for _ in $(seq 600); do
  [ "$(ls "$TMP/sigint/progress" 2>/dev/null | grep -c '^batch_.*\.json$')" -ge 1 ] && break
  sleep 0.1
done
kill -INT $launcher
wait $launcher
check "Ctrl-C: the launcher exits 130" test $? -eq 130
check "Ctrl-C: no result file, the committed answers kept" \
  test ! -e "$TMP/sigint/predictions.jsonl" -a -e "$TMP/sigint/progress/manifest.json"
resume=$(sed -n 's/^graphtune: [0-9]* of 16 records answered and committed; to continue: graphtune //p' "$TMP/sigint.out")
check "Ctrl-C: the launcher prints the command that continues" test -n "$resume"
eval "\"$GT\" $resume" >"$TMP/sigint.resume.out" 2>&1
check "that command finishes the eval with the uninterrupted run's files" same_results "$TMP/sigint" "$TMP/graphtune/one"
check "no worker of these evals is left" bash -c "! pgrep -f 'graphtune-worke[r] eval .*$TMP' >/dev/null"
finish
