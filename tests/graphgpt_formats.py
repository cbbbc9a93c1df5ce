"""Writers of the files GraphGPT's users have, in the forms their libraries write them, shared by
the tests that check graphtune reads them (test_feature_tables.py, test_torch_files.py,
graphgpt_fixtures.py): stand-ins for torch_sparse's classes, pickled as torch_sparse pickles them,
and transformers 4.x's .bin save_pretrained."""
import collections
import contextlib
import json
import os
import sys
import types

import torch


@contextlib.contextmanager
def sparse_standins():
    """torch_sparse.tensor.SparseTensor and torch_sparse.storage.SparseStorage, as plain classes
    with the attributes the real ones pickle (their __dict__), registered under their names."""
    class SparseStorage:
        def __init__(self, row, col, sizes):
            self._row, self._rowptr, self._col, self._value = row, None, col, None
            self._sparse_sizes, self._rowcount, self._colptr, self._colcount = sizes, None, None, None
            self._csr2csc, self._csc2csr = None, None

    class SparseTensor:
        def __init__(self, row, col, sizes):
            self.storage = SparseStorage(row, col, sizes)

    SparseStorage.__module__, SparseStorage.__qualname__ = "torch_sparse.storage", "SparseStorage"
    SparseTensor.__module__, SparseTensor.__qualname__ = "torch_sparse.tensor", "SparseTensor"
    mods = {"torch_sparse": types.ModuleType("torch_sparse"), "torch_sparse.tensor": types.ModuleType("torch_sparse.tensor"),
            "torch_sparse.storage": types.ModuleType("torch_sparse.storage")}
    mods["torch_sparse.tensor"].SparseTensor = SparseTensor
    mods["torch_sparse.storage"].SparseStorage = SparseStorage
    saved = {k: sys.modules.get(k) for k in mods}
    sys.modules.update(mods)
    try:
        yield SparseTensor
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v



def save_pretrained_bin(model, out, max_shard_size):
    """save_pretrained(safe_serialization=False) as transformers 4.x ran it (5.x writes safetensors
    only): the config, then the state dict cut into shards by huggingface_hub, each torch.save'd as
    an OrderedDict, and pytorch_model.bin.index.json."""
    from huggingface_hub import split_torch_state_dict_into_shards

    model.config.save_pretrained(out)
    sd = model.state_dict()
    split = split_torch_state_dict_into_shards(sd, filename_pattern="pytorch_model{suffix}.bin", max_shard_size=max_shard_size)
    for file, names in split.filename_to_tensors.items():
        torch.save(collections.OrderedDict((n, sd[n].contiguous()) for n in names), os.path.join(out, file))
    if split.is_sharded:
        index = {"metadata": split.metadata, "weight_map": split.tensor_to_filename}
        with open(os.path.join(out, "pytorch_model.bin.index.json"), "w") as f:
            json.dump(index, f, indent=2, sort_keys=True)
