#!/usr/bin/env bash
# graphtune export (worker/export_command.cpp) and a stage-1 checkpoint as stage 2's projector
# (train/graphgpt_setup.cpp), under real processes:
# - stage lm (fresh model on the byte tokenizer, and one that trains its SentencePiece
#   tokenizer): the exported Hugging Face folder holds the run's own final weights, tensor for
#   tensor (4 steps, a checkpoint every 4: the last checkpoint is the final state), its config
#   and tokenizer, and `graphtune generate` (and transformers, where installed) reads it;
# - graph_matching at tp=2 (the projector saved in two slices): the exported stage files equal
#   the run's own, and the merged LLM holds the trained <g_start>/<g_end> rows;
# - stage 2 from the checkpoint folder starts from the same projector as from the run's
#   graph_projector.bin: the same step-1 loss and gradient norm, every digit;
# - bad input: one line naming the file, exit 2, nothing written.
source "$(dirname "$0")/lib.sh"
need_mpirun 120
train_fixture 40

LM=(--training.steps 4 --training.batch_size 8 --training.seq_len 32 --training.log_every 1 --training.threads 1
    --checkpoint.every 4)
GRAPH=(--model.path "$TMP/base/model" --training.stage graph_matching --data.instructions "$TMP/gm.json"
       --data.max_len 1024 --data.num_workers 0 --training.steps 4 --training.batch_size 4 --training.log_every 1
       --training.threads 1 --optimizer.lr 1e-2 --checkpoint.every 4)

# same_tensors A.safetensors B.safetensors: the same names, dtypes, shapes and bits.
same_tensors() {
  "$PY" - "$1" "$2" <<'PYEOF'
import sys
import numpy as np
from safetensors.numpy import load_file
a, b = (load_file(f) for f in sys.argv[1:])
assert sorted(a) == sorted(b), (sorted(a), sorted(b))
for k in a:
    assert a[k].dtype == b[k].dtype and a[k].shape == b[k].shape, k
    assert np.array_equal(a[k].view(np.uint8), b[k].view(np.uint8)), f"{k} differs"
print(f"     {len(a)} tensors equal")
PYEOF
}

# greedy MODEL: a few greedy tokens (stdout only), to compare two folders' behaviour.
greedy() { "$GT" generate --model "$@" --prompt "Paper" --max-new-tokens 12 --temperature 0 2>/dev/null; }

# merged_ok MERGED_FOLDER RUN_FOLDER: the merged LLM is the base model with the 3 graph tokens'
# rows appended, <g_start>/<g_end> the run's trained ones, every other weight the base's own.
merged_ok() {
  "$PY" - "$1" "$2/graph_tokens.safetensors" "$TMP/base/model/model.safetensors" <<'PYEOF'
import json, sys
import numpy as np
from safetensors.numpy import load_file
merged, rows, base = load_file(f"{sys.argv[1]}/model.safetensors"), load_file(sys.argv[2]), load_file(sys.argv[3])
vocab = json.load(open(f"{sys.argv[1]}/config.json"))["vocab_size"]
e, b = merged["model.embed_tokens.weight"], base["model.embed_tokens.weight"]
assert vocab == b.shape[0] + 3 == e.shape[0], (vocab, b.shape, e.shape)  # <g_patch> <g_start> <g_end> appended
assert np.array_equal(e[: b.shape[0]], b)
assert np.array_equal(e[b.shape[0] + 1], rows["g_start"]) and np.array_equal(e[b.shape[0] + 2], rows["g_end"])
assert np.allclose(e[b.shape[0]], b.mean(0), atol=1e-6)  # <g_patch>: GraphGPT's mean row
for k in base:
    if k != "model.embed_tokens.weight":
        assert np.array_equal(merged[k], base[k]), k
print(f"     vocabulary {vocab}")
PYEOF
}

# --- stage lm, fresh model, byte tokenizer ----------------------------------------------------
run l1 1 "${LM[@]}"
"$GT" export --checkpoint "$TMP/l1/checkpoints" --out "$TMP/l1x" 2>"$TMP/l1x.err"
check "lm: export of the latest checkpoint (a folder of step_*) succeeds" test $? -eq 0 -a -s "$TMP/l1x/model.safetensors"
check "lm: it exported step 4" grep -q "step_00000004 (step 4 of 4)" "$TMP/l1x.err"
check "lm: the exported weights are the run's final ones" same_tensors "$TMP/l1x/model.safetensors" \
  "$TMP/l1/model/model.safetensors"
check "lm: the same config.json" cmp -s "$TMP/l1x/config.json" "$TMP/l1/model/config.json"
check "lm: the byte tokenizer, as the run wrote it" cmp -s "$TMP/l1x/tokenizer.bin" "$TMP/l1/model/tokenizer.bin"
answer=$(greedy "$TMP/l1x")
check "lm: generate reads it and answers as the run's model does" test -n "$answer" -a "$answer" = "$(greedy "$TMP/l1/model")"
HAVE_TRANSFORMERS=$("$PY" -c "import transformers, torch" 2>/dev/null && echo 1)
if [ -n "$HAVE_TRANSFORMERS" ]; then
  check "lm: transformers loads it; its logits are graphtune's" "$PY" - "$TMP/l1x" "$W" "$TMP" <<'PYEOF'
import subprocess, sys
import numpy as np, torch
from safetensors.numpy import load_file
from transformers import LlamaForCausalLM
folder, worker, tmp = sys.argv[1:]
ids = [1, 40, 70, 90, 5, 33]
m = LlamaForCausalLM.from_pretrained(folder, torch_dtype=torch.float32).eval()
with torch.no_grad():
    hf = m(torch.tensor([ids])).logits.numpy()
subprocess.run([worker, "dump-logits", "--model", folder, "--tokens", ",".join(map(str, ids)), "--out",
                f"{tmp}/logits.safetensors"], check=True, stderr=subprocess.DEVNULL)
gt = load_file(f"{tmp}/logits.safetensors")["logits"]
err = float(np.abs(hf - gt).max())
assert err < 1e-4, err
print(f"     max |logit difference| {err:.2e}")
PYEOF
else
  echo "     (transformers not installed: the transformers check is skipped)"
fi

# --- stage lm with a trained SentencePiece tokenizer -----------------------------------------
# (dim 64, unlike the base's 96: its graph checkpoint below is one of another width)
run t1 1 "${LM[@]}" --model.tokenizer train --model.vocab_size 400 --model.max_seq_len 1024 --model.dim 64
"$GT" export --checkpoint "$TMP/t1/checkpoints/step_00000004" --out "$TMP/t1x" 2>"$TMP/t1x.err"
check "tokenizer=train: exported, with the run's final weights" same_tensors "$TMP/t1x/model.safetensors" \
  "$TMP/t1/model/model.safetensors"
check "tokenizer=train: the trained tokenizer.model travels with it" cmp -s "$TMP/t1x/tokenizer.model" \
  "$TMP/t1/model/tokenizer.model"
answer=$(greedy "$TMP/t1x")
check "tokenizer=train: generate reads it and answers as the run's model does" \
  test -n "$answer" -a "$answer" = "$(greedy "$TMP/t1/model")"

# --- graph_matching at tp=2 --------------------------------------------------------------------
run g 2 "${GRAPH[@]}" --parallelism.tp 2
check "graph_matching tp=2: the projector is saved in two slices" grep -qE \
  "^model/model.graph_projector.weight \[[0-9]+, [0-9]+\] 2$" <("$PY" "$ROOT/tests/read_checkpoint.py" keys "$TMP/g/checkpoints/step_00000004")
"$GT" export --checkpoint "$TMP/g/checkpoints/step_00000004" --out "$TMP/gx" 2>"$TMP/gx.err"
check "graph_matching: export succeeds" test $? -eq 0
for f in graph_projector.safetensors graph_tokens.safetensors graph_encoder.safetensors; do
  check "graph_matching: $f is the run's own, byte for byte" cmp -s "$TMP/gx/$f" "$TMP/g/$f"
done
check "graph_matching: graph_projector.bin holds the run's tensors" "$PY" - "$TMP/gx" "$TMP/g" <<'PYEOF'
import sys, torch
a, b = (torch.load(f"{d}/graph_projector.bin", weights_only=True) for d in sys.argv[1:])
assert list(a) == list(b) == ["model.embed_tokens.weight", "model.graph_projector.weight", "model.graph_projector.bias"], list(a)
assert all(torch.equal(a[k], b[k]) for k in a)
PYEOF
check "graph_matching: the merged LLM holds the trained rows, the rest is the base model's" merged_ok "$TMP/gx/model" "$TMP/g"
check "graph_matching: generate reads the merged model (its tokenizer has the graph tokens)" \
  test -n "$(greedy "$TMP/gx/model")"

# bf16: the stage files are the run's (its encoder stored in bf16, widened), the merged LLM
# holds the base model's own fp32 weights, not the rounded copy the run computed with.
run gb 1 "${GRAPH[@]}" --model.dtype bf16 --training.steps 1 --checkpoint.every 1
"$GT" export --checkpoint "$TMP/gb/checkpoints" --out "$TMP/gbx" 2>/dev/null
for f in graph_projector.safetensors graph_tokens.safetensors graph_encoder.safetensors; do
  check "bf16: $f is the run's own, byte for byte" cmp -s "$TMP/gbx/$f" "$TMP/gb/$f"
done
check "bf16: the merged LLM is the base model's, fp32, with the trained rows" merged_ok "$TMP/gbx/model" "$TMP/gb"

# On an LLM with a SentencePiece tokenizer, the merged model's vocabulary grows by the three
# graph tokens: added_tokens.json for transformers, tokenizer.bin (with them) for graphtune.
run gs 1 "${GRAPH[@]}" --model.path "$TMP/t1/model" --training.steps 1 --checkpoint.every 1
"$GT" export --checkpoint "$TMP/gs/checkpoints" --out "$TMP/gsx" 2>/dev/null
check "graph_matching on a SentencePiece LLM: added_tokens.json names the three new ids" test \
  "$(tr -d ' \n' <"$TMP/gsx/model/added_tokens.json")" = '{"<g_patch>":400,"<g_start>":401,"<g_end>":402}'
check "graph_matching on a SentencePiece LLM: generate reads the merged model with its tokenizer.bin" \
  test -n "$(greedy "$TMP/gsx/model" --tokenizer "$TMP/gsx/model/tokenizer.bin")"
# transformers reads a bare tokenizer.model only through sentencepiece and protobuf.
if [ -n "$HAVE_TRANSFORMERS" ] && "$PY" -c "import google.protobuf, sentencepiece" 2>/dev/null; then
  check "graph_matching on a SentencePiece LLM: transformers' tokenizer has the graph tokens" "$PY" - "$TMP/gsx/model" <<'PYEOF'
import sys
from transformers import AutoTokenizer
tok = AutoTokenizer.from_pretrained(sys.argv[1])
assert len(tok) == 403, len(tok)
ids = tok("a <g_start><g_patch><g_end> b", add_special_tokens=False)["input_ids"]
assert [401, 400, 402] == [i for i in ids if i >= 400], ids
print(f"     {type(tok).__name__}, {len(tok)} tokens")
PYEOF
else
  echo "     (transformers, sentencepiece or protobuf not installed: the transformers tokenizer check is skipped)"
fi

# --- stage 2 from the checkpoint ---------------------------------------------------------------
S2=("${GRAPH[@]}" --training.steps 1 --checkpoint.every 0)
run s_bin 1 "${S2[@]}" --model.projector "$TMP/g/graph_projector.bin"
run s_ckpt 1 "${S2[@]}" --model.projector "$TMP/g/checkpoints"
run s_fresh 1 "${S2[@]}"
check "stage 2: from the checkpoint folder, the same step-1 loss as from graph_projector.bin" "$PY" - \
  "$TMP/s_bin/train_log.jsonl" "$TMP/s_ckpt/train_log.jsonl" "$TMP/s_fresh/train_log.jsonl" <<'PYEOF'
import json, sys
a, b, fresh = (json.loads(open(f).readline()) for f in sys.argv[1:])
assert (a["loss"], a["grad_norm"]) == (b["loss"], b["grad_norm"]), (a, b)
assert a["loss"] != fresh["loss"], "a fresh projector gives the same loss: the comparison proves nothing"
print(f"     step 1: loss {a['loss']}, grad norm {a['grad_norm']} (fresh projector: loss {fresh['loss']})")
PYEOF
check "stage 2: and the same projector after its step" cmp -s "$TMP/s_bin/graph_projector.safetensors" \
  "$TMP/s_ckpt/graph_projector.safetensors"

# --- bad input -------------------------------------------------------------------------------
C=$TMP/l1/checkpoints/step_00000004
cp -r "$C" "$TMP/open" && rm "$TMP/open/index.json"
cp -r "$C" "$TMP/flipped" && printf '\x01' | dd of="$TMP/flipped/rank_00000.safetensors" bs=1 seek=3000 conv=notrunc 2>/dev/null
mkdir -p "$TMP/empty"
expect_fail "export: not a checkpoint" "$TMP/base: not a checkpoint" -- "$GT" export --checkpoint "$TMP/base" --out "$TMP/x"
expect_fail "export: a file" "$TMP/gm.json: not a checkpoint" -- "$GT" export --checkpoint "$TMP/gm.json" --out "$TMP/x"
expect_fail "export: uncommitted" "$TMP/open: not a committed checkpoint" -- "$GT" export --checkpoint "$TMP/open" --out "$TMP/x"
expect_fail "export: checksum mismatch" "rank_00000.safetensors: checksum mismatch" -- "$GT" export \
  --checkpoint "$TMP/flipped" --out "$TMP/x"
expect_fail "export: existing folder" "$TMP/l1x: already exists" -- "$GT" export --checkpoint "$C" --out "$TMP/l1x"
expect_fail "export: existing empty folder" "$TMP/empty: already exists" -- "$GT" export --checkpoint "$C" --out "$TMP/empty"
check "nothing was written by the refused exports" test ! -e "$TMP/x" -a -z "$(ls "$TMP/empty")" -a \
  -z "$(ls -d "$TMP"/*.tmp.* 2>/dev/null)"
"$GT" export --checkpoint "$C" --out "$TMP/l1x" --overwrite 2>/dev/null
check "export --overwrite replaces an earlier export" same_tensors "$TMP/l1x/model.safetensors" "$TMP/l1/model/model.safetensors"
expect_fail "projector: a folder that is no checkpoint" "$TMP/empty: not a checkpoint" -- "$W" train \
  --config "$CFG" "${S2[@]}" --model.projector "$TMP/empty" --job.out_dir "$TMP/y"
expect_fail "projector: an lm checkpoint" "$C/index.json: a checkpoint of stage lm" -- "$W" train --config "$CFG" \
  "${S2[@]}" --model.projector "$C" --job.out_dir "$TMP/y"
expect_fail "projector: uncommitted" "$TMP/open: not a committed checkpoint" -- "$W" train --config "$CFG" \
  "${S2[@]}" --model.projector "$TMP/open" --job.out_dir "$TMP/y"
expect_fail "projector: another LLM's" "$TMP/gs/checkpoints/step_00000001/index.json: tensor \"model/model.graph_projector.weight\" has shape [64," \
  -- "$W" train --config "$CFG" "${S2[@]}" --model.projector "$TMP/gs/checkpoints" --job.out_dir "$TMP/y"
check "nothing was trained by the refused runs" test ! -e "$TMP/y/graph_projector.bin"
finish
