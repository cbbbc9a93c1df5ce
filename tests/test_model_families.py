#!/usr/bin/env python3
"""The LLM families graphtune reads as one decoder, each from a folder that `transformers` itself
writes with random weights and the family's real config keys, against `transformers`:
  - Llama 3.x: rope_scaling "llama3" (the frequencies in all three of its bands), GQA, an untied
    head, eos_token_id a list;
  - Qwen2 / Qwen2.5: q, k and v biases, rope_theta 1e6, tied (the small ones) and untied heads;
  - Mistral: sliding_window larger than the sequence (the same as full attention), and null; a
    sequence longer than the window is refused in one line.
Each: fp32 logits within 1e-4 of transformers', greedy text equal to transformers.generate's,
and the folder `graphtune convert` writes read back by transformers with identical logits.

Environment (set by ctest): GRAPHTUNE_BIN (launcher), GRAPHTUNE_WORKER, GRAPHTUNE_ASSETS.
Exit 0 = pass, 1 = fail, 77 = skipped (prints "SKIP: why").
"""
import json
import os
import subprocess
import sys
import tempfile

from oracle import check, finish, run, skip

TOL = 1e-4  # fp32 logits, max abs difference

assets = os.environ.get("GRAPHTUNE_ASSETS", "../shared/assets")
tok512 = os.path.join(assets, "llm", "tok512.bin")
if not os.path.exists(tok512):
    skip(f"shared assets not found ({tok512})")
try:
    import torch
    from safetensors.torch import load_file
    import transformers
    from transformers import AutoModelForCausalLM
except ImportError as e:
    skip(f"python package missing: {e}")
from family_models import Graphtune, tiny_families, write_model

WORKER = os.environ["GRAPHTUNE_WORKER"]
LAUNCHER = os.environ.get("GRAPHTUNE_BIN", WORKER)
GT = Graphtune(WORKER, LAUNCHER, tok512)
FAMILIES = tiny_families()


def family_checks(name, cfg, tmp):
    folder, model = write_model(name, cfg, tmp)
    tokens = torch.randint(0, 512, (120,), generator=torch.Generator().manual_seed(5)).tolist()
    with torch.no_grad():
        want = model(torch.tensor([tokens])).logits
    got = GT.logits(folder, tokens, os.path.join(tmp, name + "-logits.safetensors"))
    d = (got - want).abs().max().item()
    check(f"{name}: logits vs transformers", d <= TOL, f"max |diff| {d:.3g} (logits up to {want.abs().max():.1f})")
    if name == "llama3":  # without its scaling the logits differ: the frequencies reach graphtune
        plain = os.path.join(tmp, name + "-unscaled")
        os.makedirs(plain)
        conf = json.load(open(os.path.join(folder, "config.json")))
        for key in ("rope_scaling", "rope_parameters"):
            if isinstance(conf.get(key), dict):
                conf[key] = {"rope_type": "default", "rope_theta": conf[key].get("rope_theta", 10000.0)}
        json.dump(conf, open(os.path.join(plain, "config.json"), "w"))
        os.link(os.path.join(folder, "model.safetensors"), os.path.join(plain, "model.safetensors"))
        d = (GT.logits(plain, tokens, os.path.join(tmp, "unscaled.safetensors")) - want).abs().max().item()
        check("llama3: dropping its rope scaling changes graphtune's logits", d > 100 * TOL, f"max |diff| {d:.3g}")

    prompt = "Once upon a time"
    ids = GT.ids_of(prompt)
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False, eos_token_id=None,
                             pad_token_id=0)[0].tolist()
    # Ids past the 512 pieces (qwen2_padded's spare rows) decode to nothing, as in HF's decode.
    want_text = GT.text_of([i for i in out[len(ids):] if i < 512])
    got_text = GT.greedy(folder, prompt, 24)
    # Random weights pick raw byte tokens too, which the two decoders print differently (one a
    # replacement character, the other nothing): compared on the printable characters.
    printable = lambda t: "".join(c for c in t if c.isprintable() and c != "\ufffd")
    check(f"{name}: greedy text vs transformers.generate",
          len(printable(want_text)) > 10 and printable(got_text).endswith(printable(want_text)),
          f"transformers {want_text!r}, graphtune {got_text.strip()!r}")

    if name == "llama3":
        # eos_token_id a list: generation ends at any of its ids, as transformers.generate does.
        new = out[len(ids):]
        end = new[6]
        listed = os.path.join(tmp, name + "-eos-list")
        os.makedirs(listed)
        conf = json.load(open(os.path.join(folder, "config.json")))
        conf["eos_token_id"] = [2, end]
        json.dump(conf, open(os.path.join(listed, "config.json"), "w"))
        os.link(os.path.join(folder, "model.safetensors"), os.path.join(listed, "model.safetensors"))
        with torch.no_grad():
            stopped = model.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False, eos_token_id=[2, end],
                                     pad_token_id=0)[0].tolist()[len(ids):]
        want_stop = GT.text_of(stopped[:-1] if stopped[-1] == end else stopped)
        got_stop = GT.greedy(listed, prompt, 24)
        check("llama3: generation stops at the second id of an eos_token_id list",
              len(stopped) < 24 and stopped[-1] == end and printable(got_stop).endswith(printable(want_stop))
              and len(printable(got_stop)) < len(printable(got_text)),
              f"transformers {want_stop!r} ({len(stopped)} tokens), graphtune {got_stop.strip()!r}")

    converted = os.path.join(tmp, name + "-converted")
    run(WORKER, "convert", "--model", folder, "--out", converted)
    again = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32).eval()
    with torch.no_grad():
        d = (again(torch.tensor([tokens])).logits - want).abs().max().item()
    check(f"{name}: transformers reads graphtune's converted folder ({type(again).__name__})",
          d == 0.0 and type(again) is type(model), f"max |diff| {d:.3g}")
    return folder


def main():
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    with tempfile.TemporaryDirectory(prefix="gt_families_") as tmp:
        folders = {name: family_checks(name, cfg, tmp) for name, cfg in FAMILIES.items()}
        # A sequence longer than Mistral's window: refused in one line, exit 2.
        short = os.path.join(tmp, "mistral-window-32")
        os.makedirs(short)
        conf = json.load(open(os.path.join(folders["mistral"], "config.json")))
        conf["sliding_window"] = 32
        json.dump(conf, open(os.path.join(short, "config.json"), "w"))
        os.link(os.path.join(folders["mistral"], "model.safetensors"), os.path.join(short, "model.safetensors"))
        p = subprocess.run([WORKER, "dump-logits", "--model", short, "--tokens", ",".join(["5"] * 40), "--out",
                            os.path.join(tmp, "refused.safetensors")], capture_output=True, text=True)
        errors = [l for l in p.stderr.splitlines() if "error" in l]
        check("mistral: a sequence longer than sliding_window is refused in one line",
              p.returncode == 2 and len(errors) == 1 and "sliding_window 32" in errors[0], f"exit {p.returncode}: {errors}")
    finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
