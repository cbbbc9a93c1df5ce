#!/usr/bin/env bash
# graphtune generate through the real CLI: the golden stories260K text on stdout and nothing
# else there; bad input gets one line and exit code 2.
source "$(dirname "$0")/lib.sh"
need_assets
M=$ASSETS/llm/stories260K.bin
T=$ASSETS/llm/tok512.bin
GOLDEN=$ASSETS/llm/stories260K_greedy_once_upon_a_time_n256.txt

# 256 positions in run.c = the prompt's 4 tokens after BOS + 252 new ones.
"$GT" generate --model "$M" --tokenizer "$T" --prompt "Once upon a time" --max-new-tokens 252 --temperature 0 \
  >"$TMP/out.txt" 2>"$TMP/err.txt"
check "golden text, byte for byte" cmp "$TMP/out.txt" "$GOLDEN"
check "logs go to stderr" grep -q "tok/s" "$TMP/err.txt"

"$GT" generate --model "$M" --tokenizer "$T" --prompt "Once upon a time" --max-new-tokens 30 --temperature 0 >"$TMP/short.txt" 2>/dev/null
head -c "$(($(wc -c <"$TMP/short.txt") - 1))" "$TMP/short.txt" >"$TMP/short-body.txt"
check "fewer tokens: a prefix of the golden text" cmp -n "$(wc -c <"$TMP/short-body.txt")" "$TMP/short-body.txt" "$GOLDEN"

"$GT" generate --model "$M" --tokenizer "$T" --prompt "Once upon a time" --max-new-tokens 30 --temperature 0 \
  --dtype bf16 >"$TMP/bf16.txt" 2>/dev/null
check "bf16 generates from the same prompt" grep -q "^Once upon a time, there was" "$TMP/bf16.txt"

# Sampling: the same seed gives the same text; another seed another text.
for s in 7 7 8; do
  "$GT" generate --model "$M" --tokenizer "$T" --prompt "Once upon a time" --max-new-tokens 60 \
    --temperature 0.9 --top-p 0.9 --seed $s >"$TMP/s$s.$RANDOM.txt" 2>/dev/null
done
set -- "$TMP"/s7.*.txt
check "same seed, same sample" cmp "$1" "$2"
check "another seed, another sample" bash -c "! cmp -s '$1' $TMP/s8.*.txt"

expect_fail "empty prompt" "--prompt: empty prompt" -- "$GT" generate --model "$M" --tokenizer "$T" --prompt ""
expect_fail "missing model" "nope.bin: cannot open" -- "$GT" generate --model "$TMP/nope.bin" --tokenizer "$T" --prompt hi
expect_fail "tokenizer vocab mismatch" "tokenizer.bin: tokenizer vocab 32000 does not match model vocab 512" -- \
  "$GT" generate --model "$M" --tokenizer "$ASSETS/llm/tokenizer.bin" --prompt hi
head -c 5000 "$M" >"$TMP/trunc.bin"
expect_fail "truncated model" "trunc.bin: file is 5000 bytes" -- "$GT" generate --model "$TMP/trunc.bin" --tokenizer "$T" --prompt hi
cp "$M" "$TMP/alone.bin"
expect_fail "no tokenizer beside the model" "pass --tokenizer" -- "$GT" generate --model "$TMP/alone.bin" --prompt hi
finish
