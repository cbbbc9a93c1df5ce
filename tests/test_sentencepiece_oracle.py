#!/usr/bin/env python3
"""graphtune's tokenizers against the `sentencepiece` Python package, on LLaMA's tokenizer.

Run by ctest with GRAPHTUNE_BIN (the graphtune launcher) and GRAPHTUNE_ASSETS set. Exit 77
("SKIP: ...") when the assets or the sentencepiece package are missing.

1. tokenizer.model through graphtune (which uses Debian's libsentencepiece) gives exactly
   sentencepiece's ids for >= 1000 generated strings, with and without BOS/EOS.
2. `graphtune tokenize --decode` gives back the original string, and equals
   sentencepiece's decode (also on random id sequences).
3. GraphGPT's special tokens: ids 32000..32002, text between them encoded by sentencepiece,
   the dummy prefix only at the very start of the text (HF LlamaTokenizer legacy=False).
4. graphtune's own llama2.c encoder on tokenizer.bin (the same vocabulary in llama2.c's
   format) gives sentencepiece's ids on every string, newlines, tabs and leading spaces
   included, except strings holding U+2581 "▁": SentencePiece's normalizer reads a literal
   "▁" as a space (it is its own space symbol), while llama2.c's export turned the "▁" in
   every piece into " ", so no piece holds "▁" any more and run.c encodes it as the three
   bytes E2 96 81. That set is asserted exactly.
"""
import json
import os
import random
import re
import subprocess
import sys

SPECIALS = ["<g_patch>", "<g_start>", "<g_end>"]
SPACE = "\u2581"


def skip(why):
    print("SKIP: " + why)
    sys.exit(77)


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


ASSETS = os.environ.get("GRAPHTUNE_ASSETS", "../shared/assets")
BIN = os.environ.get("GRAPHTUNE_BIN")
MODEL = os.path.join(ASSETS, "llm", "tokenizer.model")
LLAMA2C_BIN = os.path.join(ASSETS, "llm", "tokenizer.bin")
if not os.path.exists(MODEL) or not os.path.exists(LLAMA2C_BIN):
    skip("shared assets not found at " + ASSETS)
try:
    import sentencepiece
except ImportError:
    skip("the sentencepiece Python package is not installed")
if not BIN or not os.access(BIN, os.X_OK):
    fail("GRAPHTUNE_BIN does not name the built graphtune launcher: %r" % BIN)

# ---------------------------------------------------------------------------------------------
# Strings: deterministic, varied.
WORDS = ("the quick brown fox jumps over lazy dog graph node edge paper citation neural "
         "network learning model token Once upon a time there was little girl named Lily").split()
UNICODE = ["café", "naïve", "Zürich", "façade", "jalapeño", "Ærø", "straße", "日本語", "中文字符",
           "東京", "한국어", "привет", "мир", "αβγ", "Ωμέγα", "مرحبا", "नमस्ते", "ไทย", "👍", "🎉",
           "😀😃", "👨‍👩‍👧", "🇫🇷", "e\u0301", "\u00a0", "\u3000", "ｈｅｌｌｏ", "…", "—",
           "“quoted”", "«»", "½", "€100", "™", "\u200b", "\ufeff"]
PUNCT = list(".,;:!?'\"()[]{}<>-_/\\|@#$%^&*+=~`")
FIXED = ["", " ", "  ", "   ", "\t", "\n", "\n\n", " \n ", "a", " a", "a ", "0", "9999999999",
         "1" * 100, "<unk>", "<s>", "</s>", "<0x41>", "<0x0A>x", "<g_patch", "g_patch>",
         "Once upon a time", "Hello, world!", "a\tb", "a\nb", "\r\n", "x  y   z    w",
         "\x7f", "a\x01b", "\U0010ffff", "\ufffd"]


def generate(seed=20240607, n=1200):
    r = random.Random(seed)

    def word():
        k = r.random()
        if k < 0.55:
            w = r.choice(WORDS)
        elif k < 0.75:
            w = r.choice(UNICODE)
        elif k < 0.85:
            w = "".join(r.choice("0123456789") for _ in range(r.choice([1, 2, 3, 4, 7, 12, 25])))
        elif k < 0.94:
            w = "".join(r.choice(PUNCT) for _ in range(r.randint(1, 3)))
        elif k < 0.99:
            w = chr(r.choice([r.randint(0x20, 0x7e), r.randint(0xa0, 0x2fff),
                              r.randint(0x4e00, 0x9fff), r.randint(0x1f300, 0x1faff)]))
        else:
            w = SPACE  # SentencePiece's own space symbol, typed as text
        return w.capitalize() if r.random() < 0.2 else w

    def sep():
        k = r.random()
        return (" " if k < 0.75 else " " * r.randint(2, 6) if k < 0.85 else "\t" if k < 0.9
                else "\n" if k < 0.95 else "")

    out = list(FIXED)
    while len(out) < n:
        s = "".join(word() + sep() for _ in range(r.randint(1, 12)))
        if r.random() < 0.5:
            s = s.rstrip(" \t\n")
        if r.random() < 0.15:
            s = " " * r.randint(1, 3) + s
        out.append(s)
    # With GraphGPT's tokens at random places, also first, last and side by side.
    with_specials = []
    for i in range(200):
        s = out[r.randrange(len(out))]
        for _ in range(r.randint(1, 4)):
            at = r.choice([0, len(s), r.randint(0, len(s))])
            s = s[:at] + r.choice(SPECIALS) + s[at:]
        with_specials.append(s)
    return out, with_specials


# ---------------------------------------------------------------------------------------------
# SentencePiece without the dummy prefix, for text after a special token. HF's non-legacy
# LlamaTokenizer gets it by setting normalizer_spec.add_dummy_prefix = False with the protobuf
# package; that package is not installed here, so the same edit is made on the wire format:
# ModelProto field 3 (normalizer_spec), NormalizerSpec field 3 (add_dummy_prefix, a bool).
def _varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def _fields(b, i, end):
    while i < end:
        start = i
        tag, i = _varint(b, i)
        wire = tag & 7
        if wire == 0:
            _, i = _varint(b, i)
            yield tag >> 3, wire, start, i, None
        elif wire == 2:
            n, i = _varint(b, i)
            yield tag >> 3, wire, start, i + n, (i, i + n)
            i += n
        else:
            i += 8 if wire == 1 else 4
            yield tag >> 3, wire, start, i, None


def _enc_varint(v):
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def without_dummy_prefix(model):
    rest, spec = bytearray(), bytearray()
    for num, wire, start, end, payload in _fields(model, 0, len(model)):
        if num == 3 and wire == 2:
            for n2, w2, s2, e2, _ in _fields(model, *payload):
                if not (n2 == 3 and w2 == 0):
                    spec += model[s2:e2]
        else:
            rest += model[start:end]
    spec += b"\x18\x00"
    return bytes(rest) + b"\x1a" + _enc_varint(len(spec)) + bytes(spec)


# ---------------------------------------------------------------------------------------------
def graphtune_tokenize(tokenizer, values, *flags):
    """One subprocess call: JSON lines in, JSON lines out."""
    text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values)
    r = subprocess.run([BIN, "tokenize", "--tokenizer", tokenizer, *flags],
                       input=text.encode("utf-8"), capture_output=True, timeout=600)
    if r.returncode != 0:
        fail("graphtune tokenize %s exited %d: %s" % (" ".join(flags), r.returncode,
                                                      r.stderr.decode(errors="replace")))
    # split("\n"), not splitlines(): U+2028 and friends may sit raw inside a JSON string.
    lines = r.stdout.decode("utf-8").split("\n")
    if lines[-1] != "" or len(lines) - 1 != len(values):
        fail("graphtune tokenize %s: %d inputs, %d outputs" % (" ".join(flags), len(values),
                                                             len(lines) - 1))
    return [json.loads(line) for line in lines[:-1]]


def expect_special(sp, sp_noprefix, s):
    """HF non-legacy semantics: split at special tokens, dummy prefix only at position 0."""
    ids = []
    pos = 0
    for part in re.split("(" + "|".join(map(re.escape, SPECIALS)) + ")", s):
        if part in SPECIALS:
            ids.append(32000 + SPECIALS.index(part))
        elif part:
            ids += (sp if pos == 0 else sp_noprefix).encode(part)
        pos += len(part)
    return ids


def first_differences(what, pairs, limit=5):
    for s, got, want in pairs[:limit]:
        print("  %s differs on %r:\n    graphtune %s\n    expected  %s" % (what, s, got, want))


def main():
    sp = sentencepiece.SentencePieceProcessor(model_file=MODEL)
    sp_noprefix = sentencepiece.SentencePieceProcessor()
    sp_noprefix.LoadFromSerializedProto(without_dummy_prefix(open(MODEL, "rb").read()))
    # The edited model must encode as no dummy prefix does, and nothing else.
    assert sp_noprefix.encode("hi x", out_type=str) == ["hi", SPACE + "x"], "protobuf edit broken"
    assert sp_noprefix.encode(" hi", out_type=str) == [SPACE + "hi"], "protobuf edit broken"

    strings, with_specials = generate()
    errors = []

    # 1. ids, exactly.
    got = graphtune_tokenize(MODEL, strings)
    want = [sp.encode(s) for s in strings]
    bad = [(s, g, w) for s, g, w in zip(strings, got, want) if g != w]
    first_differences("tokenizer.model", bad)
    if bad:
        errors.append("tokenizer.model: %d strings with other ids than sentencepiece" % len(bad))
    got_be = graphtune_tokenize(MODEL, strings, "--bos", "--eos")
    if any(g != [1] + w + [2] for g, w in zip(got_be, want)):
        errors.append("--bos --eos: not BOS + ids + EOS")

    # 2. decode: round trip, and sentencepiece's decode of the same ids.
    decoded = graphtune_tokenize(MODEL, want, "--decode")
    sp_decoded = [sp.decode(w) for w in want]
    # A literal "▁" comes back as a space: SentencePiece itself is lossy there.
    original = [s.replace(SPACE, " ") for s in strings]
    bad_rt = [(s, d, o) for s, d, o in zip(strings, decoded, original) if d != o]
    first_differences("round trip", bad_rt)
    if bad_rt:
        errors.append("%d strings do not decode back" % len(bad_rt))
    if decoded != sp_decoded:
        errors.append("decode differs from sentencepiece's decode")
    r = random.Random(5)
    byte_ids = set(range(3, 259))
    pool = [i for i in range(32000) if i not in byte_ids]  # bytes: UTF-8 repair differs
    random_ids = [[r.choice(pool) if r.random() < 0.9 else r.choice([0, 1, 2, 29871])
                   for _ in range(r.randint(0, 12))] for _ in range(300)]
    if graphtune_tokenize(MODEL, random_ids, "--decode") != [sp.decode(ids) for ids in random_ids]:
        errors.append("decode of random id sequences differs from sentencepiece's decode")

    # 3. GraphGPT's special tokens, through both formats.
    flags = [f for tok in SPECIALS for f in ("--special", tok)]
    want_sp = [expect_special(sp, sp_noprefix, s) for s in with_specials]
    got_sp = graphtune_tokenize(MODEL, with_specials, *flags)
    bad_sp = [(s, g, w) for s, g, w in zip(with_specials, got_sp, want_sp) if g != w]
    first_differences("special tokens", bad_sp)
    if bad_sp:
        errors.append("%d strings with special tokens differ" % len(bad_sp))
    back = graphtune_tokenize(MODEL, got_sp, "--decode", *flags)
    if back != [s.replace(SPACE, " ") for s in with_specials]:
        errors.append("strings with special tokens do not decode back")

    # 4. The llama2.c encoder on tokenizer.bin against sentencepiece.
    all_strings = strings + with_specials
    want_all = want + want_sp
    got_bin = graphtune_tokenize(LLAMA2C_BIN, all_strings, *flags)
    differ = [(s, g, w) for s, g, w in zip(all_strings, got_bin, want_all) if g != w]
    allowed = [d for d in differ if SPACE in d[0]]
    unexpected = [d for d in differ if SPACE not in d[0]]
    with_space = sum(SPACE in s for s in all_strings)
    first_differences("tokenizer.bin (llama2.c encoder)", unexpected)
    if unexpected:
        errors.append("llama2.c encoder: %d unexpected differences" % len(unexpected))
    if len(allowed) != with_space:
        errors.append("llama2.c encoder: expected all %d strings with U+2581 to differ, %d do"
                      % (with_space, len(allowed)))

    n = len(strings)
    print("%d strings: %d equal ids (tokenizer.model vs sentencepiece), %d decode back"
          % (n, n - len(bad), n - len(bad_rt)))
    print("%d strings with special tokens: %d equal" % (len(with_specials),
                                                        len(with_specials) - len(bad_sp)))
    print("llama2.c encoder on tokenizer.bin: %d strings: %d equal, %d differ, all of them "
          "holding a literal U+2581 (%d such strings)" % (len(all_strings),
                                                          len(all_strings) - len(differ),
                                                          len(allowed), with_space)
          if not unexpected else "llama2.c encoder: %d unexpected differences" % len(unexpected))
    if errors:
        fail("; ".join(errors))
    print("PASS")


if __name__ == "__main__":
    main()
