"""torch.save files read without Python (weights/torch_file.hpp, formats/torch_pickle.hpp).

Writes state dicts with torch.save (model.state_dict()'s OrderedDict with _metadata; fp16, bf16,
fp32, int64 and bool storages; views with storage offsets and strides sharing one storage; a
Parameter; pickle protocols 2 and 4) and a Hugging Face folder of pytorch_model-*.bin shards with
transformers' save_pretrained(safe_serialization=False), as Vicuna and GraphGPT ship. graphtune
reads each (GRAPHTUNE_TORCH_FILE_DRIVER dumps what it read as safetensors; `graphtune convert`
turns the .bin folder into safetensors) and every tensor must equal torch.load's, bit for bit.
Then files that must be refused in one line naming the file: a truncated zip, an unknown global,
a pickle that calls something else, a tensor past its storage, a record of the wrong size, a
compressed record, a legacy (pre-1.6) file, and values that are not a state dict. Exit 77 = skipped.
"""
import collections
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import zipfile

try:
    import torch
    from safetensors.torch import load_file
    from graphgpt_formats import save_pretrained_bin
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e}")
    sys.exit(77)

DRIVER = os.environ.get("GRAPHTUNE_TORCH_FILE_DRIVER")
GT = os.environ.get("GRAPHTUNE_BIN")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def same(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def read_back(path, tmp, tag):
    out = os.path.join(tmp, f"dump_{tag}.safetensors")
    r = subprocess.run([DRIVER, path, out], capture_output=True, text=True)
    check(r.returncode == 0, f"{tag}: graphtune reads {os.path.basename(path)} (rc {r.returncode}: {r.stderr.strip()})")
    return load_file(out) if r.returncode == 0 else {}


def matches_torch_load(path, tmp, tag):
    want = torch.load(path, weights_only=False)  # the test wrote it: trusted
    got = read_back(path, tmp, tag)
    bad = [k for k in want if k not in got or not same(got[k], want[k].contiguous())]
    check(sorted(got) == sorted(want) and not bad,
          f"{tag}: {len(want)} tensors equal torch.load's (dtype, shape, every bit){': differ ' + str(bad) if bad else ''}")


def expect_error(path, tmp, tag, *needles):
    out = os.path.join(tmp, f"never_{tag}.safetensors")
    r = subprocess.run([DRIVER, path, out], capture_output=True, text=True)
    msg = r.stderr.strip()
    ok = r.returncode == 2 and "\n" not in msg and path in msg and all(n in msg for n in needles)
    check(ok and not os.path.exists(out), f"{tag}: one line naming the file and {needles}: rc {r.returncode}: {msg}")


# A zip laid out as torch.save lays it out, with any pickle and records: for the bad files.
def torch_zip(path, pkl, records, compress=False):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        z.writestr("archive/byteorder", "little")
        for name, data in records.items():
            z.writestr(f"archive/data/{name}", data, zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED)
        z.writestr("archive/version", "3\n")


class _Storage:  # stands for a storage in a hand-made pickle: its persistent id is emitted
    def __init__(self, key, numel, cls=torch.FloatStorage):
        self.key, self.numel, self.cls = key, numel, cls


class _Tensor:  # pickles as torch.save pickles a tensor: _rebuild_tensor_v2(storage, ...)
    def __init__(self, storage, offset, size, stride):
        self.args = (storage, offset, size, stride, False, collections.OrderedDict())

    def __reduce__(self):
        return torch._utils._rebuild_tensor_v2, self.args


class _Call:  # a call of anything at all, as a malicious pickle makes
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


def hand_pickle(obj):
    buf = io.BytesIO()
    p = pickle.Pickler(buf, protocol=2)
    p.persistent_id = lambda o: ("storage", o.cls, o.key, "cpu", o.numel) if isinstance(o, _Storage) else None
    p.dump(obj)
    return buf.getvalue()


def state_dicts(tmp):
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 7
    sd = collections.OrderedDict()
    sd["half"] = torch.randn(3, 5).half()
    sd["bf16"] = torch.randn(7).bfloat16()
    sd["fp32.view"] = base[1:3, 2:5]          # a storage offset and strides into a shared storage
    sd["fp32.t"] = base.t()                    # the same storage, transposed
    sd["fp32.base"] = base
    sd["int64"] = torch.arange(5)
    sd["bool"] = torch.tensor([True, False, True])
    sd["scalar"] = torch.tensor(2.5)
    sd["empty"] = torch.zeros(0, 3)
    sd._metadata = collections.OrderedDict([("", {"version": 1})])
    path = os.path.join(tmp, "state_dict.pt")
    torch.save(sd, path)
    matches_torch_load(path, tmp, "an OrderedDict of fp16, bf16, fp32 views, int64, bool, scalar, empty")
    r = subprocess.run([DRIVER, "views", path], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.count(" mapped") == len(sd) - 1 and "empty copied" in r.stdout,
          f"every non-empty tensor views the mapped file, none is copied: {r.stdout.split()}")

    path4 = os.path.join(tmp, "protocol4.pt")
    torch.save(sd, path4, pickle_protocol=4)
    matches_torch_load(path4, tmp, "pickle protocol 4")

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2, bias=False))
    path_m = os.path.join(tmp, "module.pt")
    torch.save(model.state_dict(), path_m)
    matches_torch_load(path_m, tmp, "a module's state_dict()")

    path_p = os.path.join(tmp, "params.pt")
    torch.save({"w": torch.nn.Parameter(torch.randn(2, 2)), "b": torch.nn.Parameter(torch.zeros(2), requires_grad=False)},
               path_p)
    matches_torch_load(path_p, tmp, "Parameters")


def hf_bin_folder(tmp):
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"SKIP the Hugging Face folder: {e}")
        return
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=320, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=128, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.float16)
    src = os.path.join(tmp, "vicuna_like")
    save_pretrained_bin(model, src, "100KB")
    single = os.path.join(tmp, "single_bin")
    save_pretrained_bin(model, single, "1GB")
    check(os.path.exists(os.path.join(single, "pytorch_model.bin")), "one shard: pytorch_model.bin")
    r = subprocess.run([GT, "convert", "--model", single, "--out", os.path.join(tmp, "single_out")], capture_output=True,
                       text=True)
    got1 = load_file(os.path.join(tmp, "single_out", "model.safetensors")) if r.returncode == 0 else {}
    want1 = torch.load(os.path.join(single, "pytorch_model.bin"), weights_only=True)
    check(r.returncode == 0 and sorted(got1) == sorted(want1) and all(same(got1[k], want1[k]) for k in want1),
          f"graphtune convert reads a folder of one pytorch_model.bin, every tensor bit for bit (rc {r.returncode})")
    shards = sorted(f for f in os.listdir(src) if f.startswith("pytorch_model"))
    check("pytorch_model.bin.index.json" in shards and len(shards) > 2,
          f"transformers wrote pytorch_model.bin.index.json and {len(shards) - 1} .bin shards")
    out = os.path.join(tmp, "converted")
    r = subprocess.run([GT, "convert", "--model", src, "--out", out], capture_output=True, text=True)
    check(r.returncode == 0, f"graphtune convert reads the .bin folder (rc {r.returncode}: {r.stderr.strip()[-300:]})")
    if r.returncode != 0:
        return
    got = load_file(os.path.join(out, "model.safetensors"))
    want = {}
    for f in shards:
        if f.endswith(".bin"):
            want.update(torch.load(os.path.join(src, f), weights_only=True))
    bad = [k for k in want if k not in got or not same(got[k], want[k])]
    check(not bad and len(got) == len(want),
          f"its {len(want)} fp16 tensors are the shards' own, bit for bit{': differ ' + str(bad) if bad else ''}")

    # An index naming a shard that is not there.
    index = json.load(open(os.path.join(src, "pytorch_model.bin.index.json")))
    first = sorted(set(index["weight_map"].values()))[0]
    os.rename(os.path.join(src, first), os.path.join(src, first + ".gone"))
    r = subprocess.run([GT, "convert", "--model", src, "--out", os.path.join(tmp, "never")], capture_output=True, text=True)
    msg = r.stderr.strip()
    check(r.returncode == 2 and "\n" not in msg and f"weight_map names shard '{first}', which is missing" in msg,
          f"a missing shard: one line: {msg}")


def bad_files(tmp):
    sd = {"w": torch.randn(64, 64)}
    good = os.path.join(tmp, "good.pt")
    torch.save(sd, good)
    data = open(good, "rb").read()

    p = os.path.join(tmp, "truncated.pt")
    open(p, "wb").write(data[: len(data) // 2])
    expect_error(p, tmp, "a truncated zip", "not a readable torch.save zip")

    p = os.path.join(tmp, "os_system.pt")
    torch_zip(p, hand_pickle({"w": _Call(os.system, "echo pwned")}), {})
    expect_error(p, tmp, "a pickle that calls os.system", "unknown global 'posix.system'", "calls nothing")

    p = os.path.join(tmp, "eval.pt")
    torch_zip(p, hand_pickle(_Call(eval, "1+1")), {})
    expect_error(p, tmp, "a pickle that calls eval", "unknown global '__builtin__.eval'")  # protocol 2's name

    p = os.path.join(tmp, "call_storage.pt")
    torch_zip(p, hand_pickle({"w": _Call(torch.FloatStorage, 4)}), {})
    expect_error(p, tmp, "a pickle that calls a storage type", "torch.FloatStorage is a storage type")

    p = os.path.join(tmp, "out_of_range.pt")
    torch_zip(p, hand_pickle({"w": _Tensor(_Storage("0", 4), 0, (10,), (1,))}), {"0": b"\0" * 16})
    expect_error(p, tmp, "a tensor past its storage", "reaches element 9 of storage '0', which has 4")

    p = os.path.join(tmp, "offset_out_of_range.pt")
    torch_zip(p, hand_pickle({"w": _Tensor(_Storage("0", 4), 3, (2, 2), (2, 1))}), {"0": b"\0" * 16})
    expect_error(p, tmp, "a storage offset past its storage", "reaches element 6 of storage '0'")

    p = os.path.join(tmp, "short_record.pt")
    torch_zip(p, hand_pickle({"w": _Tensor(_Storage("0", 8), 0, (8,), (1,))}), {"0": b"\0" * 16})
    expect_error(p, tmp, "a record shorter than its storage", "holds 8 float32 elements (32 bytes) but its record has 16")

    p = os.path.join(tmp, "missing_record.pt")
    torch_zip(p, hand_pickle({"w": _Tensor(_Storage("7", 4), 0, (4,), (1,))}), {"0": b"\0" * 16})
    expect_error(p, tmp, "a storage without its record", "storage '7' has no record data/7")

    p = os.path.join(tmp, "compressed.pt")
    torch_zip(p, hand_pickle({"w": _Tensor(_Storage("0", 4), 0, (4,), (1,))}), {"0": b"\0" * 16}, compress=True)
    expect_error(p, tmp, "a compressed record", "record data/0 is compressed")

    p = os.path.join(tmp, "legacy.pt")
    torch.save(sd, p, _use_new_zipfile_serialization=False)
    expect_error(p, tmp, "a legacy torch.save file", "a legacy torch.save file")

    p = os.path.join(tmp, "list.pt")
    torch.save([torch.zeros(2)], p)
    expect_error(p, tmp, "a list, not a state dict", "holds a list, not a state dict")

    p = os.path.join(tmp, "nested.pt")
    torch.save({"model": {"w": torch.zeros(2)}}, p)
    expect_error(p, tmp, "a nested dict", "entry 'model' is a dict, not a tensor")

    p = os.path.join(tmp, "not_zip.pt")
    open(p, "w").write("hello")
    expect_error(p, tmp, "not a zip", "not a torch.save file")


def main():
    if not DRIVER or not os.path.exists(DRIVER) or not GT:
        print(f"SKIP: GRAPHTUNE_TORCH_FILE_DRIVER or GRAPHTUNE_BIN not set ({DRIVER}, {GT})")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        state_dicts(tmp)
        hf_bin_folder(tmp)
        bad_files(tmp)
    print(f"{len(failures)} failed" if failures else "all passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
