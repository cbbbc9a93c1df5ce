#!/usr/bin/env bash
# graphtune pipeline: stage 1 -> stage 2 -> evaluation (and the text-only baseline) in one run
# folder on 2 ranks as pipeline stages; --dry-run prints every stage's command; SIGTERM during
# stage 2 saves and stops, and the printed `--resume` command skips stage 1, resumes stage 2 and
# ends with the uninterrupted pipeline's projector and scores.
source "$(dirname "$0")/lib.sh"
need_mpirun 300
train_fixture 24 >/dev/null
"$GT" data build --graph embedded --task node_classification --split train --max-nodes 4 --max-records 48 \
  --out "$TMP/nc_train.json" 2>/dev/null
"$GT" data build --graph embedded --task node_classification --split test --max-nodes 4 --max-records 6 \
  --out "$TMP/nc_test.json" 2>/dev/null
for s in 1 2; do
  stage=$([ $s = 1 ] && echo graph_matching || echo task)
  records=$([ $s = 1 ] && echo "$TMP/gm.json" || echo "$TMP/nc_train.json")
  cat >"$TMP/stage$s.toml" <<TOML
[model]
path = "$TMP/base/model"
[data]
instructions = "$records"
max_len = 1024
num_workers = 0
[training]
stage = "$stage"
steps = $([ $s = 1 ] && echo 4 || echo 12)
batch_size = 4
log_every = 1
[optimizer]
lr = 1e-2
[checkpoint]
every = 2
[eval]
batch_size = 6
max_new_tokens = 4
TOML
done
printf '[pipeline]\nstage1 = "stage1.toml"\nstage2 = "stage2.toml"\neval_instructions = "%s"\neval_text_only = true\n' \
  "$TMP/nc_test.json" >"$TMP/pipe.toml"

"$GT" pipeline -c "$TMP/pipe.toml" --pp 2 --pipeline.out_dir "$TMP/dry" --dry-run >"$TMP/dry.out" 2>&1
check "--dry-run prints the four commands" test "$(grep -c '' "$TMP/dry.out")" -eq 4
check "stage 2 starts from stage 1's projector" grep -q -- "--model.projector $TMP/dry/stage1/graph_projector.bin" "$TMP/dry.out"
check "the training stages and the evaluations all run on the job's 2 ranks, as 2 pipeline stages" \
  test "$(grep -c '^mpirun -np 2 ' "$TMP/dry.out")" -eq 4 -a \
  "$(grep -c 'graphtune-worker eval .*--parallelism.pp 2' "$TMP/dry.out")" -eq 2
check "--dry-run starts nothing" test ! -e "$TMP/dry"
expect_fail "a pipeline file without stage2" "[pipeline].stage2: is required" -- \
  bash -c "printf '[pipeline]\nstage1 = \"stage1.toml\"\n' >'$TMP/bad.toml'; '$GT' pipeline -c '$TMP/bad.toml'"

# The uninterrupted pipeline.
"$GT" pipeline -c "$TMP/pipe.toml" --pp 2 --pipeline.out_dir "$TMP/ref" >"$TMP/ref.out" 2>"$TMP/ref.err"
check "the pipeline finishes" test $? -eq 0
for s in stage1 stage2 eval "eval (text only)"; do
  check "it ran $s" grep -qE "^$(printf '%s' "$s" | sed 's/[()]/\\&/g') +done " "$TMP/ref.out"
done
check "stage 2 ran with stage 1's projector (the command in its log)" \
  grep -q -- "--model.projector $TMP/ref/stage1/graph_projector.bin" "$TMP/ref/stage2/logs/workers.log"
check "both evaluations scored the 6 test records" \
  test "$(grep -c '' "$TMP/ref/eval/predictions.jsonl")" -eq 6 -a "$(grep -c '' "$TMP/ref/eval_text_only/predictions.jsonl")" -eq 6

# Stopped during stage 2, then resumed by the command the launcher prints.
"$GT" pipeline -c "$TMP/pipe.toml" --pp 2 --pipeline.out_dir "$TMP/run" >"$TMP/run.out" 2>"$TMP/run.err" &
launcher=$!
for _ in $(seq 600); do grep -q '"step":4,' "$TMP/run/stage2/metrics.jsonl" 2>/dev/null && break; sleep 0.1; done
kill -TERM $launcher
wait $launcher
check "SIGTERM during stage 2: exit 143" test $? -eq 143
resume=$(sed -n 's/^graphtune: saved at step [0-9]*; to continue: graphtune //p' "$TMP/run.out")
check "the resume command is the pipeline's, with --resume" bash -c "[[ '$resume' == pipeline*--resume ]]"
eval "\"$GT\" $resume" >"$TMP/resume.out" 2>"$TMP/resume.err"
check "the resumed pipeline finishes" test $? -eq 0
check "stage 1 was not run again" grep -q "stage1 is finished" "$TMP/resume.out"
check "stage 2 resumed from its checkpoint" grep -q "resumed from .*stage2/checkpoints/step_" "$TMP/resume.err"
check "the same stage-2 projector as the uninterrupted pipeline" cmp "$TMP/run/stage2/graph_projector.bin" "$TMP/ref/stage2/graph_projector.bin"
check "the same predictions" cmp "$TMP/run/eval/predictions.jsonl" "$TMP/ref/eval/predictions.jsonl"
finish
