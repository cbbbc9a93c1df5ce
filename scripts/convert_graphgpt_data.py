#!/usr/bin/env python3
"""Converts GraphGPT's node features (graph_data_all.pt) into a file graphtune reads.

GraphGPT publishes its graphs as a torch.save'd dict {dataset: torch_geometric.data.Data}; only
each Data's .x (node features) and .y (labels) are used. graphtune reads that file as it is
([data].features = "graph_data_all.pt"); this turns it into a small safetensors file of just
those tensors, which is quicker to read and to copy (in a Python with torch, torch_geometric and,
for GraphGPT's own file, torch_sparse):

    scripts/convert_graphgpt_data.py graph_data_all.pt graph_data_all.safetensors

The output holds "<dataset>.x" (float32 [N, D]) and "<dataset>.y" (int64 [N], when the Data has
labels; [N, 1] labels such as ogbn-arxiv's are flattened). Plain dicts {name: {"x", "y"}} and
{name: Tensor} are accepted as input too. Errors: one line naming the file and the key, exit 2.
"""
import os
import sys
import tempfile


def fail(msg):
    print(f"convert_graphgpt_data: error: {msg}", file=sys.stderr)
    sys.exit(2)


def fields(name, value, path):
    """(x, y or None) of one entry: a PyG Data, a dict with "x"/"y", or a bare tensor."""
    import torch

    if isinstance(value, torch.Tensor):
        return value, None
    if isinstance(value, dict):
        x, y = value.get("x"), value.get("y")
    elif hasattr(value, "x"):  # torch_geometric.data.Data (and anything shaped like it)
        x, y = getattr(value, "x", None), getattr(value, "y", None)
    else:
        fail(f"{path}: entry '{name}' is a {type(value).__name__}, not a PyG Data, a dict or a tensor")
    if not isinstance(x, torch.Tensor):
        fail(f"{path}: entry '{name}' has no node features (.x)")
    if y is not None and not isinstance(y, torch.Tensor):
        fail(f"{path}: entry '{name}.y' is a {type(y).__name__}, not a tensor")
    return x, y


def convert(src, dst):
    import torch
    from safetensors.torch import save_file

    try:
        # PyG objects are not plain tensors: weights_only=False is required (trusted input only).
        data = torch.load(src, map_location="cpu", weights_only=False)
    except Exception as e:  # noqa: BLE001 - one line for the user
        fail(f"{src}: cannot be read by torch.load: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    if not isinstance(data, dict) or not data:
        fail(f"{src}: expected a non-empty dict {{dataset: Data}}, got {type(data).__name__}")
    out = {}
    for name, value in data.items():
        if not isinstance(name, str) or not name or "." in name:
            fail(f"{src}: dataset key {name!r} must be a non-empty string without '.'")
        x, y = fields(name, value, src)
        if not x.is_floating_point() or x.dim() != 2:
            fail(f"{src}: entry '{name}.x' must be a 2-D floating tensor, got {x.dtype} {list(x.shape)}")
        out[f"{name}.x"] = x.detach().to(torch.float32).contiguous()
        if y is not None:
            if y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
                fail(f"{src}: entry '{name}.y' must hold integer labels, got {y.dtype}")
            if not (y.dim() == 1 or (y.dim() == 2 and y.shape[1] == 1)) or y.shape[0] != x.shape[0]:
                fail(f"{src}: entry '{name}.y' has shape {list(y.shape)}; expected [{x.shape[0]}] or [{x.shape[0]}, 1]")
            out[f"{name}.y"] = y.detach().reshape(-1).to(torch.int64).contiguous()
    # Written to a temporary name in the destination folder, then renamed: whole or not at all.
    folder = os.path.dirname(os.path.abspath(dst))
    fd, tmp = tempfile.mkstemp(prefix=".convert_graphgpt_data.", dir=folder)
    os.close(fd)
    try:
        save_file(out, tmp)
        os.replace(tmp, dst)
    except BaseException:
        os.unlink(tmp)
        raise
    for name in sorted(data):
        x = out[f"{name}.x"]
        print(f"{name}: {x.shape[0]} nodes x {x.shape[1]} features" + (", labels" if f"{name}.y" in out else ""))


def main(argv):
    if len(argv) != 3 or argv[1] in ("-h", "--help"):
        print(__doc__.strip() + f"\n\nusage: {argv[0]} IN.pt OUT.safetensors", file=sys.stderr)
        return 2
    try:
        import torch  # noqa: F401
        from safetensors.torch import save_file  # noqa: F401
    except ImportError as e:
        fail(f"needs torch and safetensors (and torch_geometric for PyG files): {e}")
    if not os.path.isfile(argv[1]):
        fail(f"{argv[1]}: no such file")
    convert(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
