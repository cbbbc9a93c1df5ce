"""graphtune's GraphGPT graph encoder against an independent PyTorch implementation, and the
projector's graph_projector.bin both ways with Python's torch.save / torch.load.

This script writes random weights (named as in GraphGPT's released checkpoint), a random graph
(with nodes that receive no edge, self-loops and duplicate edges) and a torch.save'd
graph_projector.bin into a temporary folder, runs graphtune's GraphEncoderReference gtest
(GRAPHTUNE_GRAPH_REF_DRIVER, given the folder), and compares
what it wrote. The reference below is written from the description in
shared/notes/graphgpt.md ("The model") with plain loops, in float64. Exit 77 = skipped.
"""
import collections
import json
import os
import subprocess
import sys
import tempfile

try:
    import torch
    from safetensors.torch import load_file, save_file
except ImportError as e:  # pragma: no cover
    print(f"skipped: {e}")
    sys.exit(77)

D, HEADS, LAYERS, IN, OUT, GCN_HID = 128, 8, 3, 128, 128, 96
TOL = 1e-5


def make_weights(gen):
    def u(shape, bound):
        return (torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1) * bound

    w = {"W_pos": u((1, D), 0.02), "W_P.weight": u((D, IN), IN ** -0.5), "W_P.bias": u((D,), IN ** -0.5)}
    for i in range(LAYERS):
        # 1.5x xavier scale so that some attention logits exceed the [-10, 10] clamp.
        for m in ("qTrans", "kTrans", "vTrans"):
            w[f"gtLayers.{i}.{m}"] = u((D, D), 1.5 * (6 / (2 * D)) ** 0.5)
        w[f"gtLayers.{i}.norm.weight"] = 1 + u((D,), 0.5)
        w[f"gtLayers.{i}.norm.bias"] = u((D,), 0.5)
    w["inverW_P.weight"] = u((OUT, D), D ** -0.5)
    w["inverW_P.bias"] = u((OUT,), D ** -0.5)
    return {k: v.to(torch.float32) for k, v in w.items()}


def reference_encoder(w, x, edge_index, stats):
    """The notes' semantics, spelled out edge by edge and node by node."""
    w = {k: v.to(torch.float64) for k, v in w.items()}
    x = x.to(torch.float64)
    n, dh = x.shape[0], D // HEADS
    edges = [(int(r), int(c)) for r, c in edge_index.t().tolist()]
    z = x @ w["W_P.weight"].t() + w["W_P.bias"]  # dropout is the identity in eval mode
    for i in range(LAYERS):
        q_m, k_m, v_m = (w[f"gtLayers.{i}.{m}"] for m in ("qTrans", "kTrans", "vTrans"))
        scores = []  # per edge: exp(clamp(q.k)) for each head
        for r, c in edges:
            q = (z[r] @ q_m).view(HEADS, dh)
            k = (z[c] @ k_m).view(HEADS, dh)
            raw = (q * k).sum(-1)
            stats["clamped"] += int((raw.abs() > 10).sum())
            scores.append(torch.exp(torch.clamp(raw, -10.0, 10.0)))
        new = z.clone()
        for node in range(n):
            into = [j for j, (r, _) in enumerate(edges) if r == node]
            if not into:
                continue
            total = sum(scores[j] for j in into) + 1e-8
            msg = torch.zeros(D, dtype=torch.float64)
            for j in into:
                v = (z[edges[j][1]] @ v_m).view(HEADS, dh)
                msg += ((scores[j] / total).unsqueeze(-1) * v).reshape(D)
            new[node] = z[node] + msg
        mean = new.mean(-1, keepdim=True)
        var = ((new - mean) ** 2).mean(-1, keepdim=True)
        z = (new - mean) / torch.sqrt(var + 1e-6) * w[f"gtLayers.{i}.norm.weight"] + w[f"gtLayers.{i}.norm.bias"]
    return z @ w["inverW_P.weight"].t() + w["inverW_P.bias"]


def reference_gcn(w, x, edge_index):
    """GraphGPT's clip_gcn_arxiv GNN as its code reads, node by node in float64: self-loops
    replaced by one per node, deg over edge_index[0], messages from edge_index[0] to
    edge_index[1] weighted deg^-1/2 deg^-1/2, leaky_relu (0.01) between two layers."""
    w = {k: v.to(torch.float64) for k, v in w.items()}
    n = x.shape[0]
    edges = [(int(a), int(b)) for a, b in edge_index.t().tolist() if a != b] + [(i, i) for i in range(n)]
    deg = [sum(1 for a, _ in edges if a == i) for i in range(n)]

    def prop(h):
        out = torch.zeros(n, h.shape[1], dtype=torch.float64)
        for a, b in edges:
            out[b] += h[a] / (deg[a] * deg[b]) ** 0.5
        return out

    h = prop(x.to(torch.float64)) @ w["vars.0"].t() + w["vars.1"]
    h = torch.where(h > 0, h, 0.01 * h)
    return prop(h) @ w["vars.2"].t() + w["vars.3"]


def main():
    binary = os.environ.get("GRAPHTUNE_GRAPH_REF_DRIVER", "")
    if not binary or not os.path.exists(binary):
        print(f"skipped: GRAPHTUNE_GRAPH_REF_DRIVER ({binary!r}) is not a built graph_encoder_reference_driver")
        return 77
    gen = torch.Generator().manual_seed(1234)
    w = make_weights(gen)
    n = 14
    x = torch.randn(n, IN, generator=gen)
    rows = torch.randint(0, 10, (40,), generator=gen)  # nodes 10..13 receive nothing
    cols = torch.randint(0, n, (40,), generator=gen)
    extra = torch.tensor([[0, 3, 3, 5, 5, 5, 12], [0, 3, 7, 2, 2, 2, 1]])  # self-loops, duplicates, 12 <- 1
    edge_index = torch.cat([torch.stack([rows, cols]), extra], dim=1).contiguous()
    receivers = set(edge_index[0].tolist())
    assert {10, 11, 13}.isdisjoint(receivers), "the graph must keep nodes without incoming edges"

    stats = {"clamped": 0}
    want = reference_encoder(w, x, edge_index, stats)
    print(f"reference: {n} nodes, {edge_index.shape[1]} edges, {stats['clamped']} clamped attention logits")
    if stats["clamped"] == 0:
        print("FAIL: the weights do not exercise the [-10, 10] clamp")
        return 1

    py_proj = {"model.graph_projector.weight": torch.randn(80, 128, generator=gen),
               "model.graph_projector.bias": torch.randn(80, generator=gen)}
    with tempfile.TemporaryDirectory(prefix="gt_graph_ref_") as d:
        save_file(w, os.path.join(d, "encoder.safetensors"))
        save_file({"x": x, "edge_index": edge_index}, os.path.join(d, "inputs.safetensors"))
        # Laid out as clip_gt_arxiv_pub.pkl: the CLIP model's state dict, the encoder under "gnn.",
        # as a plain dict and as the OrderedDict that file is (module.state_dict()).
        clip = collections.OrderedDict([("logit_scale", torch.tensor(2.0)),
                                        ("transformer.resblocks.0.attn.in_proj_weight", torch.zeros(6, 2))])
        clip.update((f"gnn.{k}", v) for k, v in w.items())
        torch.save(dict(clip), os.path.join(d, "clip_like.pkl"))
        torch.save(clip, os.path.join(d, "clip_ordered.pkl"))
        # GraphGPT's download as it is: the folder with its config.json (graph and text fields).
        folder_cfg = {"gnn_input": 128, "gnn_hid": 128, "gnn_output": OUT, "gt_layers": 3, "att_d_model": 128, "head": 8,
                      "att_norm": True, "if_pos": False, "gnn_type": "gt", "transformer_layers": 12,
                      "transformer_width": 512, "vocab_size": 49408, "context_length": 128, "embed_dim": 128}
        for name, cfg in (("Arxiv-PubMed-GraphCLIP-GT", folder_cfg), ("config_disagrees", dict(folder_cfg, att_d_model=64, head=4))):
            os.makedirs(os.path.join(d, name))
            json.dump(cfg, open(os.path.join(d, name, "config.json"), "w"))
            torch.save(clip, os.path.join(d, name, "clip_gt_arxiv_pub.pkl"))
        torch.save(py_proj, os.path.join(d, "py_graph_projector.bin"))
        # A clip_gcn_arxiv folder: gnn_type "gcn", the GCN under "gnn.vars.*".
        gcn = {"vars.0": torch.randn(GCN_HID, IN, generator=gen) * 0.1, "vars.1": torch.randn(GCN_HID, generator=gen),
               "vars.2": torch.randn(OUT, GCN_HID, generator=gen) * 0.1, "vars.3": torch.randn(OUT, generator=gen)}
        os.makedirs(os.path.join(d, "Arxiv-GraphCLIP-GCN"))
        json.dump(dict(folder_cfg, gnn_type="gcn", gnn_hid=GCN_HID), open(os.path.join(d, "Arxiv-GraphCLIP-GCN", "config.json"), "w"))
        torch.save(collections.OrderedDict((f"gnn.{k}", v) for k, v in gcn.items()),
                   os.path.join(d, "Arxiv-GraphCLIP-GCN", "clip_gcn_arxiv.pkl"))
        want_gcn = reference_gcn(gcn, x, edge_index)

        run = subprocess.run([binary, d], capture_output=True, text=True)
        if run.returncode != 0 or "ok" not in run.stdout:
            print(run.stdout, run.stderr)
            print(f"FAIL: graph_encoder_reference_driver exited with {run.returncode}")
            return 1

        got = load_file(os.path.join(d, "cpp_out.safetensors"))
        ok = True
        for key in ("out", "out_clip", "out_clip_ordered", "out_clip_folder", "out_gcn_folder"):
            g = got[key]
            if tuple(g.shape) != (n, OUT):
                print(f"FAIL: {key} has shape {tuple(g.shape)}, want {(n, OUT)}")
                ok = False
                continue
            diff = (g.to(torch.float64) - (want_gcn if key == "out_gcn_folder" else want)).abs().max().item()
            print(f"{key}: max |graphtune - reference| = {diff:.3g} (tolerance {TOL})")
            ok &= diff <= TOL

        loaded = load_file(os.path.join(d, "cpp_loaded_projector.safetensors"))
        if set(loaded) != set(py_proj) or any(not torch.equal(loaded[k], py_proj[k]) for k in py_proj):
            print("FAIL: graphtune read the Python-written graph_projector.bin wrongly")
            ok = False
        else:
            print("Python-written graph_projector.bin: read by graphtune bit for bit")

        mine = load_file(os.path.join(d, "cpp_projector.safetensors"))
        for weights_only in (True, False):
            back = torch.load(os.path.join(d, "cpp_graph_projector.bin"), weights_only=weights_only)
            if not isinstance(back, dict) or set(back) != set(mine):
                print(f"FAIL: torch.load(weights_only={weights_only}) gave {type(back)} "
                      f"{sorted(back) if isinstance(back, dict) else ''}")
                ok = False
            elif any(not torch.equal(back[k], mine[k]) for k in mine):
                print(f"FAIL: torch.load(weights_only={weights_only}) gave other values")
                ok = False
        if ok:
            print(f"graphtune-written graph_projector.bin: torch.load gives keys {sorted(mine)} bit for bit "
                  f"(shapes {[tuple(mine[k].shape) for k in sorted(mine)]})")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
