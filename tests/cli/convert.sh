#!/usr/bin/env bash
# graphtune convert through the real CLI: a folder appears whole or not at all, an existing one
# is refused, and damaged input (truncated .bin, safetensors with lying offsets, missing
# folder) gets one line naming the file and exit code 2.
source "$(dirname "$0")/lib.sh"
need_assets
WK=${GRAPHTUNE_WORKER:?set by ctest}
M=$ASSETS/llm/stories260K.bin

"$GT" convert --model "$M" --out "$TMP/hf" 2>"$TMP/err"
check "convert exits 0" test $? -eq 0
check "config, generation config and weights written" \
  test -s "$TMP/hf/config.json" -a -s "$TMP/hf/generation_config.json" -a -s "$TMP/hf/model.safetensors"
check "no temporary folder left" bash -c "! ls -d '$TMP'/hf.* 2>/dev/null"

# Refused: the existing folder stays as it was.
cp "$TMP/hf/config.json" "$TMP/config.before"
expect_fail "existing output folder" "hf: already exists (pass --overwrite to replace it)" -- \
  "$GT" convert --model "$M" --out "$TMP/hf" --dtype bf16
check "refused convert leaves the folder untouched" cmp "$TMP/config.before" "$TMP/hf/config.json"
"$GT" convert --model "$TMP/hf" --out "$TMP/hf" --dtype bf16 --overwrite 2>/dev/null
check "--overwrite replaces it (folder onto itself, bf16)" grep -q '"torch_dtype": "bfloat16"' "$TMP/hf/config.json"
mkdir "$TMP/docs" && echo keep >"$TMP/docs/notes.txt"
expect_fail "--overwrite never replaces a non-model folder" "docs: exists and is not a model folder" -- \
  "$GT" convert --model "$M" --out "$TMP/docs" --overwrite
check "non-model folder untouched" test -f "$TMP/docs/notes.txt"

# Interrupted: the file size limit kills the writer (SIGXFSZ) in the middle of the weights.
{ ( ulimit -f 200; exec "$GT" convert --model "$M" --out "$TMP/cut" ); rc=$?; } 2>/dev/null
check "interrupted convert was really killed (rc $rc)" test "$rc" -gt 128
check "interrupted convert leaves no output folder" test ! -e "$TMP/cut"

# Damaged input.
head -c 5000 "$M" >"$TMP/trunc.bin"
expect_fail "truncated llama2.c file" "trunc.bin: file is 5000 bytes" -- "$GT" convert --model "$TMP/trunc.bin" --out "$TMP/o1"
check "failed convert leaves no output folder" test ! -e "$TMP/o1"

expect_fail "missing model folder" "nope: cannot open" -- "$GT" convert --model "$TMP/nope" --out "$TMP/o2"

# A safetensors file whose offsets claim more bytes than it holds.
le64() {  # 8-byte little-endian
  local n=$1 i
  for i in 0 1 2 3 4 5 6 7; do printf "\\x$(printf %02x $(((n >> (8 * i)) & 255)))"; done
}
mkdir "$TMP/lying"
cp "$TMP/hf/config.json" "$TMP/lying/"
header='{"model.embed_tokens.weight":{"dtype":"F32","shape":[512,64],"data_offsets":[0,131072]}}'
{ le64 ${#header}; printf '%s' "$header"; head -c 100 /dev/zero; } >"$TMP/lying/model.safetensors"
expect_fail "safetensors offsets beyond the data" \
  "lying/model.safetensors: tensor 'model.embed_tokens.weight': data_offsets [0, 131072) go beyond the data section (100 bytes)" -- \
  "$GT" convert --model "$TMP/lying" --out "$TMP/o3"
{ le64 1000000; printf '{}'; } >"$TMP/lying/model.safetensors"
expect_fail "safetensors header length beyond the file" "lying/model.safetensors: header length 1000000 exceeds the file size" -- \
  "$GT" convert --model "$TMP/lying" --out "$TMP/o3"
check "no output from damaged input" test ! -e "$TMP/o2" -a ! -e "$TMP/o3"

sed 's/"rope_scaling": null/"rope_scaling": {"type": "dynamic", "factor": 2.0}/' "$TMP/hf/config.json" >"$TMP/lying/config.json"
cp "$TMP/hf/model.safetensors" "$TMP/lying/model.safetensors"
expect_fail "unsupported rope scaling" "lying/config.json: not supported yet: rope_scaling type 'dynamic'" -- \
  "$GT" convert --model "$TMP/lying" --out "$TMP/o4"

# Flags.
expect_fail "bad --dtype" "--dtype: expected auto, fp32, bf16 or fp16" -- "$GT" convert --model "$M" --out "$TMP/o5" --dtype int4
expect_fail "bad --max-shard-size" "--max-shard-size: unknown unit" -- "$GT" convert --model "$M" --out "$TMP/o5" --max-shard-size 3XB
expect_fail "dump-logits token outside the vocabulary" "--tokens: id 512 is outside the vocabulary [0, 512)" -- \
  "$WK" dump-logits --model "$M" --tokens 1,512 --out "$TMP/l.safetensors"
finish
