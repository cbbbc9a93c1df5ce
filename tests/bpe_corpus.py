"""What the byte-level BPE oracles (test_bpe_oracle.py, test_tokenizer_families.py) share: a
corpus of hard strings (contractions in any case, many scripts, digits, code, whitespace runs,
special tokens inside text, random assigned code points) and running tests/bpe_driver on it."""
import json
import random
import subprocess
import sys
import unicodedata


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


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


def generate(specials, seed=20250101, n=1300, special_use=SPECIAL_USE):
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
            w = r.choice(special_use)
        return w.capitalize() if r.random() < 0.2 else w

    def sep():
        k = r.random()
        return (" " if k < 0.7 else " " * r.randint(2, 6) if k < 0.8 else "\t" if k < 0.85
                else "\n" if k < 0.92 else "\n\n" if k < 0.95 else "")

    out = list(FIXED) + CODE + list(special_use) + CONTRACTIONS + UNICODE
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


def driver(program, args, values):
    """bpe_driver's answers to values (strings, or id lists with --decode), one per value."""
    text = "".join(json.dumps(v, ensure_ascii=False) + "\n" for v in values)
    r = subprocess.run([program, *args], input=text.encode("utf-8"), capture_output=True, timeout=300)
    if r.returncode != 0:
        fail("bpe_driver %s exited %d: %s" % (" ".join(args), r.returncode,
                                              r.stderr.decode(errors="replace")))
    lines = r.stdout.decode("utf-8").split("\n")
    if lines[-1] != "" or len(lines) - 1 != len(values):
        fail("bpe_driver %s: %d inputs, %d outputs" % (" ".join(args), len(values), len(lines) - 1))
    return [json.loads(line) for line in lines[:-1]]


def driver_error(program, args):
    """bpe_driver's exit code and stderr for args that must fail."""
    r = subprocess.run([program, *args], input=b"", capture_output=True, timeout=60)
    return r.returncode, r.stderr.decode(errors="replace")


def compare(what, strings, got, want, errors):
    bad = [(s, g, w) for s, g, w in zip(strings, got, want) if g != w]
    for s, g, w in bad[:5]:
        print("  %s differs on %r:\n    graphtune %s\n    tokenizers %s" % (what, s, g, w))
    if bad:
        errors.append("%s: %d of %d strings differ" % (what, len(bad), len(strings)))
    return len(strings) - len(bad)
