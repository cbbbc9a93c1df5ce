#!/usr/bin/env python3
"""GraphGPT's forward and backward in plain PyTorch, as an independent reference for graphtune.

The LLM is Hugging Face's own `transformers.LlamaForCausalLM` (code nobody here wrote); on top
of it a thin GraphGPT layer written from the paper's description (shared/notes/graphgpt.md,
"The model"), not from graphtune's C++:

  * GraphGPT's three tokens (<g_patch>, <g_start>, <g_end>) get new embedding rows (and LM-head
    rows when untied) equal to the mean of the old rows, as GraphGPT's
    smart_tokenizer_and_embedding_resize does;
  * the graph encoder ("graph transformer"), vectorised over edges with index_add_;
  * the projector, one nn.Linear(graph hidden -> LLM hidden);
  * splicing: <g_start>/<g_end> positions take their learned rows, each graph's <g_patch> run
    is overwritten with projector(encoder(subgraph)), node 0 first;
  * the loss: transformers' own causal-LM loss (labels shifted by one, -100 ignored, mean over
    the learned positions);
  * what trains, as GraphGPT's tune_graph_mlp_adapter: projector and the two token rows; the
    LLM and the encoder are frozen and the encoder runs without gradient.

Inputs come from a folder graphtune's tests/graphgpt_reference_driver.cpp wrote (the batch in
graphtune.safetensors, the encoder, projector and token rows as safetensors); the LLM from the
Hugging Face folder the job named. CLI:

  graphgpt_reference.py --llm HF_FOLDER --dir DRIVER_OUT [--heads 8]

writes DRIVER_OUT/reference.safetensors (logits, loss, grad.projector.weight/.bias,
grad.token_rows) and prints the differences from graphtune's.
"""
import argparse
import re
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file


class GraphTransformer(torch.nn.Module):
    """GraphGPT's graph encoder (eval mode: its dropout is the identity).

    For every edge (r, c): q = z[r] Q, k = z[c] K, v = z[c] V (matrices [in, out]); per head
    a = exp(clamp(<q, k>, -10, 10)) with no 1/sqrt(d); a is normalised over the edges with the
    same receiver r (+1e-8); r receives sum a * v; residual and LayerNorm(eps 1e-6) per layer.
    Parameter names are those of GraphGPT's released checkpoint."""

    def __init__(self, weights, heads=8):
        super().__init__()
        self.heads = heads
        self.layers = 1 + max(int(m.group(1)) for k in weights if (m := re.match(r"gtLayers\.(\d+)\.", k)))
        for name, t in weights.items():
            self.register_buffer(name.replace(".", "__"), t.to(torch.float32))
        self.norm = f"gtLayers__0__norm__weight" in dict(self.named_buffers())

    def w(self, name):
        return getattr(self, name.replace(".", "__"))

    @torch.no_grad()
    def forward(self, x, edge_index):
        r, c = edge_index[0].long(), edge_index[1].long()
        z = F.linear(x.to(torch.float32), self.w("W_P.weight"), self.w("W_P.bias"))
        n, d = z.shape
        h = self.heads
        for i in range(self.layers):
            q = (z[r] @ self.w(f"gtLayers.{i}.qTrans")).view(-1, h, d // h)
            k = (z[c] @ self.w(f"gtLayers.{i}.kTrans")).view(-1, h, d // h)
            v = (z[c] @ self.w(f"gtLayers.{i}.vTrans")).view(-1, h, d // h)
            score = torch.exp(torch.clamp((q * k).sum(-1), -10.0, 10.0))  # [E, H]
            total = torch.zeros(n, h, dtype=z.dtype).index_add_(0, r, score)
            att = score / (total[r] + 1e-8)
            msg = torch.zeros(n, h, d // h, dtype=z.dtype).index_add_(0, r, att.unsqueeze(-1) * v)
            z = z + msg.reshape(n, d)
            if self.norm:
                z = F.layer_norm(z, (d,), self.w(f"gtLayers.{i}.norm.weight"), self.w(f"gtLayers.{i}.norm.bias"), 1e-6)
        return F.linear(z, self.w("inverW_P.weight"), self.w("inverW_P.bias"))


class GraphGcn(torch.nn.Module):
    """GraphGPT's other graph encoder, the two-layer GCN of its clip_gcn_arxiv tower (eval mode),
    as PyTorch Geometric computes it: every self-loop replaced by one per node, messages from
    edge_index[0] to edge_index[1] weighted deg^-1/2 deg^-1/2 (deg counted over edge_index[0]),
    leaky_relu between the layers. Parameters vars.0..3 as GraphGPT's state dict names them."""

    def __init__(self, weights):
        super().__init__()
        for i in range(4):
            self.register_buffer(f"vars{i}", weights[f"vars.{i}"].to(torch.float32))

    @torch.no_grad()
    def forward(self, x, edge_index):
        n = x.shape[0]
        keep = edge_index[0] != edge_index[1]
        loops = torch.arange(n)
        src = torch.cat([edge_index[0][keep].long(), loops])
        dst = torch.cat([edge_index[1][keep].long(), loops])
        deg = torch.zeros(n).index_add_(0, src, torch.ones(len(src)))
        w = (deg[src] * deg[dst]).rsqrt().unsqueeze(1)
        prop = lambda h: torch.zeros(n, h.shape[1]).index_add_(0, dst, h[src] * w)
        h = F.leaky_relu(F.linear(prop(x.to(torch.float32)), self.vars0, self.vars1), 0.01)
        return F.linear(prop(h), self.vars2, self.vars3)


class Llaga(torch.nn.Module):
    """LLaGA's neighbourhood-detail template: no GNN. A graph is LLaGA's fixed-shape neighbour tree
    (graphtune data build --template llaga), a slot no edge touches (but the centre) is a pad;
    each slot's token is its features, zeros at a pad, beside the slot's row of the tree's
    Laplacian embedding (structure_embedding, read from the file as graphtune wrote it)."""

    def __init__(self, weights):
        super().__init__()
        self.register_buffer("pe", weights["structure_embedding"].to(torch.float32))

    @torch.no_grad()
    def forward(self, x, edge_index):
        n = self.pe.shape[0]
        if x.shape[0] != n:
            raise ValueError(f"a graph of {x.shape[0]} nodes; this llaga encoder reads trees of {n} slots")
        real = torch.zeros(n)
        real[edge_index.reshape(-1).long()] = 1.0
        real[0] = 1.0
        return torch.cat([x.to(torch.float32) * real.unsqueeze(1), self.pe], 1)

    def centre(self, x_centre):
        """The centre's token, which its tree's other slots do not change."""
        return torch.cat([x_centre.to(torch.float32), self.pe[0]])


class HopField(torch.nn.Module):
    """LLaGA's hop-field overview: no GNN. A record's graph is its centre once a hop; token k is the
    centre's features after k steps of the GCN's propagation over the whole graph (PyTorch
    Geometric's gcn_norm: self-loops, D^-1/2 (A + I) D^-1/2), beside a one-hot of k
    (hop_embedding, read from the file as graphtune wrote it). With a base (the file's "base."
    tensors, one of GraphGPT's encoders), the features propagated are the node's beside the base's
    output over the whole graph, each column standardised over the nodes. rows "l1" or "l2" (the
    file's hop_field_rows) divides each node's features, not the base's output, by their L1 or L2
    norm first. projector "per_hop" (the file's hop_field_projector) puts hop k in block k of a
    K + 1 times wider row, zeros elsewhere, so the projector reads each hop with its own columns
    (SIGN's inception); "shared" gives every hop the same columns."""

    def __init__(self, weights, heads=8, rows="as_is", projector="shared"):
        super().__init__()
        if rows not in ("as_is", "l1", "l2"):
            raise ValueError(f'hop_field_rows must be "as_is", "l1" or "l2", got "{rows}"')
        if projector not in ("shared", "per_hop"):
            raise ValueError(f'hop_field_projector must be "shared" or "per_hop", got "{projector}"')
        self.rows, self.projector = rows, projector
        self.register_buffer("hops", weights["hop_embedding"].to(torch.float32))
        base = {k[len("base."):]: v for k, v in weights.items() if k.startswith("base.")}
        self.base = graph_encoder(base, heads) if base else None

    @torch.no_grad()
    def forward(self, x, edge_index):
        """x: the record's K + 1 rows of the field (its centre's, once a hop); token k is row k's
        hop k beside the k-th one-hot row."""
        n = self.hops.shape[0]
        if x.shape[0] != n:
            raise ValueError(f"a graph of {x.shape[0]} nodes; this hop_field encoder reads its centre {n} times")
        width = x.shape[1] // n
        own = torch.stack([x[k, k * width:(k + 1) * width] for k in range(n)]).to(torch.float32)
        if self.projector == "per_hop":
            own = torch.block_diag(*own.unsqueeze(1))  # row k: hop k in block k
        return torch.cat([own, self.hops], 1)

    @torch.no_grad()
    def field_of(self, x, edge_index):
        """[N, (K + 1) F]: every node's features after 0..K propagation steps, side by side (the
        table graphtune's hop_field encoder reads; its one-hot part is the same for every node)."""
        from torch_geometric.nn.conv.gcn_conv import gcn_norm

        n = x.shape[0]
        first = x.to(torch.float64)
        if self.rows != "as_is":
            norm = first.abs().sum(1, keepdim=True) if self.rows == "l1" else first.norm(dim=1, keepdim=True)
            first = first / torch.where(norm == 0, torch.ones_like(norm), norm)
        if self.base is not None:
            z = self.base(x, edge_index).to(torch.float64)
            sd = z.std(0, unbiased=False)
            first = torch.cat([first, (z - z.mean(0)) / torch.where(sd < 1e-6, torch.ones_like(sd), sd)], 1)
        ei, w = gcn_norm(edge_index, num_nodes=n, add_self_loops=True)
        out = [first]
        for _ in range(self.hops.shape[0] - 1):
            h = out[-1]
            out.append(torch.zeros_like(h).index_add_(0, ei[1], h[ei[0]] * w.to(torch.float64).unsqueeze(1)))
        return torch.cat(out, 1).to(torch.float32)


def graph_encoder(weights, heads=8, metadata=None):
    """The encoder a state dict holds: GraphGPT's GCN (vars.*), LLaGA's templates
    (structure_embedding, hop_embedding) or GraphGPT's graph transformer. metadata: the
    safetensors file's, which says a hop field's rows."""
    if "structure_embedding" in weights:
        return Llaga(weights)
    if "hop_embedding" in weights:
        metadata = metadata or {}
        return HopField(weights, heads, metadata.get("hop_field_rows", "as_is"),
                        metadata.get("hop_field_projector", "shared"))
    return GraphGcn(weights) if "vars.0" in weights else GraphTransformer(weights, heads)


def graph_encoder_file(path, heads=8):
    """graph_encoder of a .safetensors file graphtune wrote, its metadata included."""
    from safetensors import safe_open

    with safe_open(path, "pt") as f:
        metadata = f.metadata()
    return graph_encoder(load_file(path), heads, metadata)


def load_llm(folder, new_vocab, attn="eager"):
    """transformers' LLaMA with GraphGPT's new rows appended (mean of the old ones), frozen."""
    from transformers import LlamaForCausalLM

    llm = LlamaForCausalLM.from_pretrained(folder, dtype=torch.float32, attn_implementation=attn).eval()
    old = llm.get_input_embeddings().weight.shape[0]
    if new_vocab > old:
        tied = llm.get_output_embeddings().weight is llm.get_input_embeddings().weight
        with torch.no_grad():
            old_in = llm.get_input_embeddings().weight.clone()
            old_out = llm.get_output_embeddings().weight.clone()
            llm.resize_token_embeddings(new_vocab, mean_resizing=False)
            llm.get_input_embeddings().weight[old:] = old_in.mean(0)
            if not tied:
                llm.get_output_embeddings().weight[old:] = old_out.mean(0)
    llm.requires_grad_(False)
    return llm


class GraphGpt(torch.nn.Module):
    def __init__(self, llm, encoder, projector_weights, token_rows, token_ids):
        super().__init__()
        self.llm, self.encoder = llm, encoder
        w = projector_weights["model.graph_projector.weight"]
        self.projector = torch.nn.Linear(w.shape[1], w.shape[0])
        with torch.no_grad():
            self.projector.weight.copy_(w)
            self.projector.bias.copy_(projector_weights["model.graph_projector.bias"])
        self.token_rows = torch.nn.Parameter(torch.stack([token_rows["g_start"], token_rows["g_end"]]).float())
        self.patch_id, self.start_id, self.end_id = (int(t) for t in token_ids)

    def embed(self, input_ids, graphs):
        """graphs: (row, start, x, edge_index) per graph."""
        x = self.llm.get_input_embeddings()(input_ids)
        ids = input_ids.unsqueeze(-1)
        x = torch.where(ids == self.start_id, self.token_rows[0], torch.where(ids == self.end_id, self.token_rows[1], x))
        x = x.clone()
        for row, start, feats, edge_index in graphs:
            n = feats.shape[0]
            assert bool((input_ids[row, start:start + n] == self.patch_id).all()), "graph span is not <g_patch> tokens"
            x[row, start:start + n] = self.projector(self.encoder(feats, edge_index))
        return x

    def forward(self, input_ids, attention_mask, graphs, labels=None, position_ids=None):
        """attention_mask None with position_ids: sequences packed in one row, as transformers'
        DataCollatorWithFlattening gives them. transformers keeps each to itself only without a KV
        cache, which a frozen (eval-mode) model would otherwise make."""
        packed = dict(position_ids=position_ids, use_cache=False) if position_ids is not None else {}
        return self.llm(inputs_embeds=self.embed(input_ids, graphs), attention_mask=attention_mask, labels=labels,
                        **packed)


def graphs_of(dump):
    rows, starts = dump["graph_rows"].tolist(), dump["graph_starts"].tolist()
    return [(r, s, dump[f"graph.{k}.x"], dump[f"graph.{k}.edge_index"]) for k, (r, s) in enumerate(zip(rows, starts))]


def run_reference(llm_folder, driver_dir, heads=8, attn="eager"):
    """Logits, loss and gradients of the batch graphtune's driver wrote into driver_dir."""
    dump = load_file(f"{driver_dir}/graphtune.safetensors")
    token_ids = dump["token_ids"].tolist()
    llm = load_llm(llm_folder, max(token_ids) + 1, attn)
    model = GraphGpt(llm, graph_encoder_file(f"{driver_dir}/graph_encoder.safetensors", heads),
                     load_file(f"{driver_dir}/graph_projector.safetensors"),
                     load_file(f"{driver_dir}/graph_tokens.safetensors"), token_ids)
    out = model(dump["input_ids"], dump["attention_mask"], graphs_of(dump), labels=dump["labels"])
    out.loss.backward()
    return {"logits": out.logits.detach(), "loss": out.loss.detach(),
            "grad.projector.weight": model.projector.weight.grad, "grad.projector.bias": model.projector.bias.grad,
            "grad.token_rows": model.token_rows.grad}


def differences(driver_dir, ref):
    """max |graphtune - reference| per compared tensor (those graphtune wrote)."""
    dump = load_file(f"{driver_dir}/graphtune.safetensors")
    return {k: (dump[k].double() - v.double()).abs().max().item() for k, v in ref.items() if k in dump}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llm", required=True, help="the job's Hugging Face LLM folder ([model].path)")
    p.add_argument("--dir", required=True, help="the folder graphgpt_reference_driver wrote")
    p.add_argument("--heads", type=int, default=8, help="graph encoder heads (GraphGPT: 8)")
    p.add_argument("--attn", default="eager", choices=["eager", "sdpa"])
    a = p.parse_args(argv)
    torch.manual_seed(0)
    ref = run_reference(a.llm, a.dir, a.heads, a.attn)
    save_file({k: v.contiguous() for k, v in ref.items()}, f"{a.dir}/reference.safetensors")
    for k, d in differences(a.dir, ref).items():
        print(f"max |graphtune - reference| {k}: {d:.3e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
