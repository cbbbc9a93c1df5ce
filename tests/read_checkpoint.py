"""An independent reader of graphtune's sharded checkpoints: index.json and the Python
safetensors package, nothing of graphtune's own code. Each tensor is assembled from its chunks
(global offset + box) and every cell is checked to be covered exactly once.

  read_checkpoint.py same DIR DIR...   every model/ and optim/ tensor of the checkpoints is equal,
                                       bit for bit (rng/ states belong to ranks of one layout)
  read_checkpoint.py same-state DIR DIR...   the same, of checkpoints of different steps (a
                                       skipped step leaves the state as it was)
  read_checkpoint.py keys DIR          prints the keys and how many chunks each has
"""
import json
import sys

import numpy as np
from safetensors.numpy import load_file


def assemble(folder):
    index = json.load(open(f"{folder}/index.json"))
    shards = {c["file"] for entry in index["tensors"].values() for c in entry["chunks"]}
    files = {name: load_file(f"{folder}/{name}") for name in shards}  # not tokenizer.model
    out, chunks = {}, {}
    for key, entry in index["tensors"].items():
        full, seen = None, np.zeros(entry["shape"], dtype=np.int32)
        for c in entry["chunks"]:
            part = files[c["file"]][key]
            assert list(part.shape) == c["shape"], (key, part.shape, c["shape"])
            if full is None:
                full = np.zeros(entry["shape"], dtype=part.dtype)
            box = tuple(slice(o, o + n) for o, n in zip(c["offset"], c["shape"]))
            full[box] = part
            seen[box] += 1
        assert (seen == 1).all(), f"{folder}: {key}: chunks do not cover the tensor exactly once"
        out[key], chunks[key] = full, len(entry["chunks"])
    return index, out, chunks


def same(folders, same_step=True):
    ref_index, ref, _ = assemble(folders[0])
    keys = sorted(k for k in ref if not k.startswith("rng/"))
    assert any(k.startswith("optim/") for k in keys), f"{folders[0]}: no optimizer state"
    for folder in folders[1:]:
        index, got, _ = assemble(folder)
        if same_step:
            assert index["step"] == ref_index["step"], (index["step"], ref_index["step"])
        mine = sorted(k for k in got if not k.startswith("rng/"))
        assert mine == keys, f"{folder}: keys {mine} vs {keys}"
        for k in keys:
            assert got[k].dtype == ref[k].dtype and np.array_equal(got[k], ref[k]), f"{folder}: {k} differs"
    layouts = ", ".join(json.dumps(assemble(f)[0]["layout"]) for f in folders)
    print(f"ok {len(keys)} tensors equal bit for bit across {len(folders)} checkpoints ({layouts})")


if __name__ == "__main__":
    if sys.argv[1] == "same":
        same(sys.argv[2:])
    elif sys.argv[1] == "same-state":
        same(sys.argv[2:], same_step=False)
    elif sys.argv[1] == "keys":
        _, tensors, chunks = assemble(sys.argv[2])
        for k in sorted(tensors):
            print(k, list(tensors[k].shape), chunks[k])
