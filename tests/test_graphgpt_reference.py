#!/usr/bin/env python3
"""GraphGPT's forward and backward in graphtune against bench/reference/graphgpt_reference.py
(transformers' LlamaForCausalLM plus an independent graph encoder, projector and splicing):
on one batch the trainer builds from `data build` graph_matching records, the logits, the loss
(mean over learned positions) and the gradients of the projector and the <g_start>/<g_end> rows
must agree within 1e-4 (fp32), for
  (a) stories260K (llama2.c, converted by `graphtune convert`), tied head, vocab 512 + 3;
  (b) a wider LLaMA transformers writes itself: dim 512, 8 layers, 8 heads, 4 kv heads (GQA),
      FFN 1376, untied head, random weights (seed 0), with the same tok512 tokenizer.
Each batch has two rows of different lengths (right padding) and one graph per row.
And LLaGA's graph tokens on (b): node classification records of its neighbour trees (data build
--template llaga, 2 hops, fanout 3: 13 slots, trees with pads), the llaga encoder (features
beside the tree's Laplacian embedding), stage task; and its hop fields (--template hop_field,
3 hops), whose rows must also be PyTorch Geometric's propagation of the graph's features, alone
and beside a base encoder's output (GraphGPT's GCN, random weights).

Environment (set by ctest): GRAPHTUNE_GRAPHGPT_REF_DRIVER, GRAPHTUNE_BIN, GRAPHTUNE_ASSETS,
GRAPHTUNE_SOURCE_DIR. Exit 0 = pass, 1 = fail, 77 = skipped (prints "SKIP: why").
"""
import json
import os
import sys
import tempfile

from oracle import check, finish, run, skip

TOL = 1e-4
COMPARED = ("logits", "loss", "grad.projector.weight", "grad.projector.bias", "grad.token_rows")

assets = os.environ.get("GRAPHTUNE_ASSETS", "../shared/assets")
stories = os.path.join(assets, "llm", "stories260K.bin")
tok512 = os.path.join(assets, "llm", "tok512.bin")
driver = os.environ.get("GRAPHTUNE_GRAPHGPT_REF_DRIVER", "")
launcher = os.environ.get("GRAPHTUNE_BIN", "")
for what, path in (("stories260K", stories), ("tok512", tok512)):
    if not os.path.exists(path):
        skip(f"shared assets not found ({what}: {path})")
if not os.path.exists(driver):
    skip(f"GRAPHTUNE_GRAPHGPT_REF_DRIVER ({driver!r}) is not a built graphgpt_reference_driver")
if not os.path.exists(launcher):
    skip(f"GRAPHTUNE_BIN ({launcher!r}) is not a built graphtune")
try:
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
except ImportError as e:
    skip(f"python package missing: {e}")

source = os.environ.get("GRAPHTUNE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(source, "bench", "reference"))
import graphgpt_reference  # noqa: E402

transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()
torch.set_num_threads(2)


def write_config(tmp, tag, model, records, max_len, stage="graph_matching", model_extra=""):
    path = os.path.join(tmp, f"{tag}.toml")
    with open(path, "w") as f:
        f.write(f"""[job]
name = "reference-{tag}"
out_dir = "{tmp}/run-{tag}"
[model]
path = "{model}"
tokenizer = "{tok512}"
dtype = "fp32"
{model_extra}
[data]
instructions = "{records}"
graph = "embedded"
max_len = {max_len}
num_workers = 0
[training]
stage = "{stage}"
steps = 1
batch_size = 2
seed = 7
trainable = "graphgpt"
""")
    return path


def compare(tmp, tag, model, records, max_len, **config):
    out = os.path.join(tmp, f"out-{tag}")
    p = run(driver, write_config(tmp, tag, model, records, max_len, **config), out)
    print(p.stdout.strip())
    ref = graphgpt_reference.run_reference(model, out)
    diffs = graphgpt_reference.differences(out, ref)
    for name in COMPARED:
        d = diffs.get(name)
        check(f"{tag}: {name} within {TOL:g}", d is not None and d <= TOL,
              "missing" if d is None else f"max |graphtune - reference| = {d:.3e}")
    print(f"{tag}: loss graphtune {dumped(out)['loss'].item():.7f}, reference {ref['loss'].item():.7f}")
    # Small gradients would pass an absolute bound whatever they were: relative to their size too.
    for name in ("grad.projector.weight", "grad.token_rows"):
        g = ref[name]
        scale = g.abs().max().item()
        check(f"{tag}: {name} is not zero and within 1e-3 of its size", scale > 1e-6 and diffs[name] <= 1e-3 * scale,
              f"max |grad| = {scale:.3e}, relative difference {diffs[name] / max(scale, 1e-30):.2e}")
    # The graphs must matter: the same batch without splicing gives other logits.
    away = unspliced_difference(model, out)
    check(f"{tag}: logits without the graphs differ", away > 100 * TOL, f"max difference {away:.3e}")


def dumped(out):
    from safetensors.torch import load_file
    return load_file(os.path.join(out, "graphtune.safetensors"))


def unspliced_difference(model, out):
    d = dumped(out)
    ids = d["token_ids"].tolist()
    llm = graphgpt_reference.load_llm(model, max(ids) + 1)
    with torch.no_grad():
        logits = llm(input_ids=d["input_ids"], attention_mask=d["attention_mask"]).logits
    return (logits - d["logits"]).abs().max().item()


def short_records(src, dst):
    """stories260K's context is 512 positions and a graph_matching record is ~800 tok512 tokens,
    its answer last: cut at max_len, nothing would be learned. The same records (graphs, ids)
    with the question's first sentence (which holds <graph>) and the answer's first 300 chars."""
    records = json.load(open(src))
    for r in records:
        human, gpt = r["conversations"][0], r["conversations"][1]
        human["value"] = human["value"][:human["value"].index(".", human["value"].index("<graph>")) + 1]
        gpt["value"] = gpt["value"][:300]
    json.dump(records, open(dst, "w"))
    return dst


def bench_model(tmp):
    """A wider LLaMA than stories260K, written by transformers: GQA, untied head."""
    folder = os.path.join(tmp, "bench-llama")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=512, hidden_size=512, intermediate_size=1376, num_hidden_layers=8,
                      num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=1024,
                      rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
    LlamaForCausalLM(cfg).save_pretrained(folder, safe_serialization=True)
    return folder


def main():
    with tempfile.TemporaryDirectory(prefix="gt_graphgpt_ref_") as tmp:
        records = os.path.join(tmp, "gm.json")
        run(launcher, "data", "build", "--graph", "embedded", "--task", "graph_matching", "--split", "train",
            "--max-nodes", "4", "--max-records", "4", "--out", records)
        hf = os.path.join(tmp, "stories-hf")
        run(launcher, "convert", "--model", stories, "--out", hf)
        compare(tmp, "stories260K", hf, short_records(records, os.path.join(tmp, "gm-short.json")), 512)
        bench = bench_model(tmp)
        compare(tmp, "bench-512x8", bench, records, 1024)
        trees = os.path.join(tmp, "trees.json")
        run(launcher, "data", "build", "--graph", "embedded", "--task", "node_classification", "--split", "train",
            "--template", "llaga", "--hops", "2", "--fanout", "3", "--max-records", "200", "--out", trees)
        # Trees with pads (slots no edge touches), so that the zeroed features are compared too.
        def pads(r):
            g = r["graph"]
            return len(g["node_list"]) - 1 - len({v for e in g["edge_index"] for v in e} - {0})
        padded = [r for r in json.load(open(trees)) if pads(r) > 0][:4]
        check("llaga: 4 trees with pads to compare", len(padded) == 4, f"{len(padded)} found")
        json.dump(padded, open(trees, "w"))
        compare(tmp, "llaga-512x8", bench, trees, 1024, stage="task",
                model_extra='graph_encoder_type = "llaga"\nllaga_hops = 2\nllaga_fanout = 3')
        fields = os.path.join(tmp, "fields.json")
        run(launcher, "data", "build", "--graph", "embedded", "--task", "node_classification", "--split", "train",
            "--template", "hop_field", "--hops", "3", "--max-records", "4", "--out", fields)
        compare(tmp, "hop_field-512x8", bench, fields, 1024, stage="task",
                model_extra='graph_encoder_type = "hop_field"\nhop_field_hops = 3')
        check_hop_field(tmp, fields, os.path.join(tmp, "out-hop_field-512x8"))
        # Each paper's features over their L1 or L2 norm first: the file says so and the reference reads it.
        for rows in ("l1", "l2"):
            compare(tmp, f"hop_field_{rows}-512x8", bench, fields, 1024, stage="task",
                    model_extra=f'graph_encoder_type = "hop_field"\nhop_field_hops = 3\nhop_field_rows = "{rows}"')
            check_hop_field(tmp, fields, os.path.join(tmp, f"out-hop_field_{rows}-512x8"), rows=rows)
        # Each hop through its own columns of the projector: the file says so and the reference reads it.
        compare(tmp, "hop_field_per_hop-512x8", bench, fields, 1024, stage="task",
                model_extra='graph_encoder_type = "hop_field"\nhop_field_hops = 3\nhop_field_projector = "per_hop"')
        check_hop_field(tmp, fields, os.path.join(tmp, "out-hop_field_per_hop-512x8"), projector="per_hop")
        # Over a base, GraphGPT's GCN with random weights: its output beside the features.
        from safetensors.torch import save_file
        g = torch.Generator().manual_seed(0)
        base = os.path.join(tmp, "base.safetensors")
        save_file({"vars.0": 0.1 * torch.randn(16, 128, generator=g), "vars.1": torch.zeros(16),
                   "vars.2": 0.3 * torch.randn(8, 16, generator=g), "vars.3": torch.zeros(8)}, base)
        compare(tmp, "hop_field_base-512x8", bench, fields, 1024, stage="task",
                model_extra=f'graph_encoder_type = "hop_field"\nhop_field_hops = 3\nhop_field_base = "{base}"')
        check_hop_field(tmp, fields, os.path.join(tmp, "out-hop_field_base-512x8"))
    finish()


def check_hop_field(tmp, records, out, rows="as_is", projector="shared"):
    """The rows graphtune's hop_field encoder read are PyTorch Geometric's propagation of the
    graph's features (gcn_norm over the citations either way; with a base, its output beside
    them), 0..K steps side by side; the encoder's file says its rows."""
    import numpy as np
    folder = os.path.join(tmp, "embedded-folder")
    if not os.path.isdir(folder):
        run(launcher, "data", "convert", "--graph", "embedded", "--out", folder)
    x = torch.from_numpy(np.load(os.path.join(folder, "features.npy")))
    edges = [tuple(map(int, line.split("\t")[:2])) for line in open(os.path.join(folder, "edges.tsv")).read().splitlines()[1:]]
    from torch_geometric.utils import to_undirected
    ei = to_undirected(torch.tensor(edges, dtype=torch.long).t(), num_nodes=x.shape[0])  # each pair once a way
    encoder = graphgpt_reference.graph_encoder_file(os.path.join(out, "graph_encoder.safetensors"))
    check(f"{os.path.basename(out)}: its encoder file says rows \"{rows}\"", encoder.rows == rows, encoder.rows)
    check(f"{os.path.basename(out)}: its encoder file says projector \"{projector}\"",
          encoder.projector == projector, encoder.projector)
    field = encoder.field_of(x, ei)
    dump = dumped(out)
    centres = [r["graph"]["node_idx"] for r in json.load(open(records))]
    worst, graphs = 0.0, 0
    while f"graph.{graphs}.x" in dump:
        rows = dump[f"graph.{graphs}.x"]
        worst = max(worst, min((rows - field[c]).abs().max().item() for c in centres))
        graphs += 1
    check(f"{os.path.basename(out)}: each graph's rows are its centre's field (PyG's gcn_norm), within 1e-5",
          graphs > 0 and worst <= 1e-5 * max(1.0, field.abs().max().item()), f"{graphs} graphs, max difference {worst:.3e}")


if __name__ == "__main__":
    main()
