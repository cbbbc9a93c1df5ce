# graphtune tokenize: JSON lines through the real binary; bad files and bad input lines give
# exit code 2 and one line naming the file or the stdin line.
source "$(dirname "$0")/lib.sh"
need_assets
TOK512=$ASSETS/llm/tok512.bin
MODEL=$ASSETS/llm/tokenizer.model

# tok INPUT ARGS...: runs `graphtune tokenize ARGS` with INPUT (JSON lines) on stdin.
tok() {
  local input=$1; shift
  printf '%s' "$input" | "$GT" tokenize "$@"
}

# Good runs. Ids as llama2.c run.c encodes "Once upon a time" with tok512.bin (the golden
# generation's prompt), and sentencepiece's ids for tokenizer.model.
out=$(tok $'"Once upon a time"\n""\n' --tokenizer "$TOK512" --bos)
check "encode tok512.bin" [ "$out" = $'[1,403,407,261,378]\n[1]' ]
out=$(tok $'[1,403,407,261,378]\n' --tokenizer "$TOK512" --decode)
check "decode tok512.bin" [ "$out" = '"Once upon a time"' ]
out=$(tok $'"Hello, world!"\n' --tokenizer "$MODEL" --eos)
check "encode tokenizer.model" [ "$out" = '[15043,29892,3186,29991,2]' ]
out=$(tok $'"x<g_patch>x"\n' --tokenizer "$MODEL" --special '<g_patch>' --special '<g_end>')
check "special token" [ "$out" = '[921,32000,29916]' ]
out=$(tok $'"日本 👍"\n' --tokenizer "$MODEL" | tok "$(cat)"$'\n' --tokenizer "$MODEL" --decode)
check "unicode round trip" [ "$out" = '"日本 👍"' ]
out=$(tok '' --tokenizer "$MODEL")
check "no input, no output" [ -z "$out" ]

# Bad tokenizer files.
expect_fail "missing tokenizer" "$TMP/nope.model: cannot open" -- \
  tok $'"a"\n' --tokenizer "$TMP/nope.model"
head -c 6000 "$TOK512" >"$TMP/cut.bin"
expect_fail "truncated .bin" "$TMP/cut.bin: not a valid llama2.c tokenizer: file ends inside" -- \
  tok $'"a"\n' --tokenizer "$TMP/cut.bin"
: >"$TMP/empty.bin"
expect_fail "empty file" "$TMP/empty.bin: empty file" -- tok $'"a"\n' --tokenizer "$TMP/empty.bin"
head -c 200000 "$MODEL" >"$TMP/half.model"
expect_fail "truncated .model" "$TMP/half.model: neither a SentencePiece model nor a llama2.c" -- \
  tok $'"a"\n' --tokenizer "$TMP/half.model"
expect_fail "a model file, not a tokenizer" "stories260K.bin: not a valid llama2.c tokenizer" -- \
  tok $'"a"\n' --tokenizer "$ASSETS/llm/stories260K.bin"

# Bad input lines.
expect_fail "bad JSON" "stdin line 2: not valid JSON" -- \
  tok $'"fine"\n"unterminated\n' --tokenizer "$TOK512"
expect_fail "not a string" "stdin line 1: expected a JSON string, found array" -- \
  tok $'[1,2]\n' --tokenizer "$TOK512"
expect_fail "empty line" "stdin line 2: empty line" -- tok $'"a"\n\n"b"\n' --tokenizer "$TOK512"
expect_fail "id out of range" "stdin line 1: token id 512 is outside the vocabulary of $TOK512" -- \
  tok $'[1,512]\n' --tokenizer "$TOK512" --decode
expect_fail "negative id" "stdin line 1: token id -1 is outside" -- \
  tok $'[-1]\n' --tokenizer "$TOK512" --decode
expect_fail "not an id" "stdin line 1: expected a JSON array of token ids" -- \
  tok $'"text"\n' --tokenizer "$TOK512" --decode

# --chat: one human turn in vicuna_v1_1 is BOS + the prompt up to "ASSISTANT:"; an answer's
# "</s>" (the EOS id) is refused in one line; a turn that is not {from, value} too.
out=$(tok $'[{"from": "human", "value": "Hi"}]\n' --tokenizer "$MODEL" --chat vicuna_v1_1)
text=$(printf '%s\n' "$out" | "$GT" tokenize --tokenizer "$MODEL" --decode)
ends=no
[[ "$out" == '[1,'* && "$text" == *'USER: Hi ASSISTANT:"' ]] && ends=yes
check "--chat vicuna_v1_1: BOS first, ends with 'USER: Hi ASSISTANT:'" test "$ends" = yes
expect_fail "--chat with an answer in vicuna" "stdin line 1: not supported yet: --chat vicuna_v1_1 with answers" -- \
  tok $'[{"from": "human", "value": "A?"}, {"from": "gpt", "value": "x"}]\n' --tokenizer "$MODEL" --chat vicuna_v1_1
expect_fail "--chat with a bad turn" "stdin line 1: turn 0 is not {\"from\": string, \"value\": string}" -- \
  tok $'[{"from": "human"}]\n' --tokenizer "$MODEL" --chat chatml
expect_fail "--chat with --decode" "--chat: encodes conversations; it does not go with --decode" -- \
  tok $'[1]\n' --tokenizer "$MODEL" --chat chatml --decode

finish
