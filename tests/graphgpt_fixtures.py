#!/usr/bin/env python3
"""Writes every file a GraphGPT user downloads, in its real format and at tiny size, into OUT:

  vicuna-7b-v1.5-16k/         config.json (LlamaForCausalLM, rope_scaling linear 4.0, GraphGPT's
                              keys added by hand as its FAQ says), pytorch_model-0000{1,2}-of-00002.bin
                              and pytorch_model.bin.index.json (transformers 4.x's save_pretrained with
                              safe_serialization=False: OrderedDicts of fp16 tensors), tokenizer.model
                              (LLaMA's), tokenizer_config.json, special_tokens_map.json,
                              generation_config.json
  Arxiv-PubMed-GraphCLIP-GT/  config.json (the encoder's and the CLIP text tower's fields) and
                              clip_gt_arxiv_pub.pkl, torch.save of the whole CLIP model's state dict
                              (encoder under gnn., the text tower beside it)
  graph_data_all.pt           torch.save of {"arxiv", "pubmed", "cora": torch_geometric Data}, with
                              torch_sparse SparseTensors, numpy arrays and unlabelled nodes
  train_instruct_graphmatch.json, arxiv_pub_node_st_cot_link_mix.json (stage 1, stage 2)
  {arxiv,cora}_test_instruct_{std,cot}.json, pubmed_test_instruct_LP.json (evaluation)
  Cora_id_labels.json         node id -> label text, "nan" for unlabelled nodes (GraphGPT's repo)
  stage_1_projector.bin       GraphGPT's stage-1 output: model.embed_tokens.weight [32003, D] and
                              model.graph_projector.{weight,bias}
  GraphGPT-7B-mix-all/        the released tuned model: config.json model_type "GraphLlama", vocab
                              32,003, added_tokens.json, .bin shards holding model.graph_projector.*
                              (and graph tower tensors, which GraphGPT's evaluation replaces)
  GraphGPT-7B-mix-all-projector.bin
                              what GraphGPT's extract_graph_projector.py takes out of that model

The numbers are random; the shapes, key names, dtypes, containers and pickle classes are GraphGPT's
(../shared/notes/graphgpt-files.md). Needs torch, transformers, huggingface_hub, torch_geometric
and numpy, and LLaMA's tokenizer.model from the shared assets.
Usage: graphgpt_fixtures.py OUT [ASSETS]
"""
import collections
import json
import os
import random
import shutil
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graphgpt_formats import save_pretrained_bin, sparse_standins  # noqa: E402

D = 64          # the LLM's width (Vicuna-7B: 4096)
G = 16          # the graph encoder's width (GraphGPT's: 128)
VOCAB = 32000   # LLaMA's tokenizer
DATASETS = {"arxiv": (60, 40), "pubmed": (30, 3), "cora": (50, 70)}  # nodes, classes
ARXIV = ["cs.AI", "cs.AR", "cs.CC", "cs.CE", "cs.CG", "cs.CL", "cs.CR", "cs.CV", "cs.CY", "cs.DB", "cs.DC", "cs.DL",
         "cs.DM", "cs.DS", "cs.ET", "cs.FL", "cs.GL", "cs.GR", "cs.GT", "cs.HC", "cs.IR", "cs.IT", "cs.LG", "cs.LO",
         "cs.MA", "cs.MM", "cs.MS", "cs.NA", "cs.NE", "cs.NI", "cs.OH", "cs.OS", "cs.PF", "cs.PL", "cs.RO", "cs.SC",
         "cs.SD", "cs.SE", "cs.SI", "cs.SY"]
CORA = [f"artificial intelligence, topic {k}" for k in range(70)]  # 70 label texts of Cora's kind
PUBMED = ["Diabetes Mellitus, Experimental", "Diabetes Mellitus Type 1", "Diabetes Mellitus Type 2"]


def llama_config(vocab, **extra):
    from transformers import LlamaConfig
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=D, intermediate_size=2 * D, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024,
                      rope_scaling={"type": "linear", "factor": 4.0}, tie_word_embeddings=False)
    for k, v in extra.items():
        setattr(cfg, k, v)
    return cfg


def tokenizer_files(out, assets):
    shutil.copy(os.path.join(assets, "llm", "tokenizer.model"), os.path.join(out, "tokenizer.model"))
    json.dump({"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
              open(os.path.join(out, "special_tokens_map.json"), "w"), indent=2)
    json.dump({"tokenizer_class": "LlamaTokenizer", "model_max_length": 16384, "legacy": False},
              open(os.path.join(out, "tokenizer_config.json"), "w"), indent=2)


def vicuna(out, assets):
    from transformers import LlamaForCausalLM
    torch.manual_seed(1)
    model = LlamaForCausalLM(llama_config(VOCAB, max_sequence_length=16384)).to(torch.float16)
    os.makedirs(out)
    save_pretrained_bin(model, out, "5MB")
    shards = sorted(f for f in os.listdir(out) if f.endswith(".bin"))
    assert shards == ["pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"], shards
    c = json.load(open(os.path.join(out, "config.json")))
    c["graph_hidden_size"] = G  # as GraphGPT's FAQ has users add them
    c["pretrain_graph_model_path"] = "/home/user/Arxiv-PubMed-GraphCLIP-GT/"
    json.dump(c, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump({"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0},
              open(os.path.join(out, "generation_config.json"), "w"), indent=2)
    tokenizer_files(out, assets)
    return model


class GraphTransformerLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.qTrans = nn.Parameter(torch.empty(G, G))
        self.kTrans = nn.Parameter(torch.empty(G, G))
        self.vTrans = nn.Parameter(torch.empty(G, G))
        self.norm = nn.LayerNorm(G, eps=1e-6)
        for p in (self.qTrans, self.kTrans, self.vTrans):
            nn.init.xavier_uniform_(p)


class GraphTransformer(nn.Module):  # GraphGPT's graph_transformer, its parameter names
    def __init__(self, layers):
        super().__init__()
        self.W_pos = nn.Parameter(torch.empty(1, G).uniform_(-0.02, 0.02))
        self.W_P = nn.Linear(G, G)
        self.gtLayers = nn.ModuleList(GraphTransformerLayer() for _ in range(layers))
        self.inverW_P = nn.Linear(G, G)


class ResBlock(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.attn = nn.MultiheadAttention(w, 2)
        self.ln_1 = nn.LayerNorm(w)
        self.mlp = nn.Sequential(collections.OrderedDict(c_fc=nn.Linear(w, 2 * w), c_proj=nn.Linear(2 * w, w)))
        self.ln_2 = nn.LayerNorm(w)


class TextTransformer(nn.Module):
    def __init__(self, w, layers):
        super().__init__()
        self.resblocks = nn.Sequential(*[ResBlock(w) for _ in range(layers)])


class CLIP(nn.Module):  # GraphGPT's text-graph grounding model: the encoder and a text tower
    def __init__(self, layers, width, vocab, context):
        super().__init__()
        self.gnn = GraphTransformer(layers)
        self.transformer = TextTransformer(width, 2)
        self.token_embedding = nn.Embedding(vocab, width)
        self.positional_embedding = nn.Parameter(torch.randn(context, width) * 0.01)
        self.ln_final = nn.LayerNorm(width)
        self.text_projection = nn.Parameter(torch.randn(width, G) * 0.02)
        self.logit_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))


def graph_encoder(out):
    torch.manual_seed(2)
    os.makedirs(out)
    layers, width, vocab, context = 2, 32, 500, 16
    clip = CLIP(layers, width, vocab, context)
    json.dump({"gnn_input": G, "gnn_hid": G, "gnn_output": G, "gt_layers": layers, "att_d_model": G, "head": 4,
               "att_norm": True, "if_pos": False, "gnn_type": "gt", "dropout": 0.1, "edge_coding": False,
               "transformer_layers": 2, "transformer_width": width, "transformer_heads": 2, "vocab_size": vocab,
               "context_length": context, "embed_dim": G, "lr": 1e-5},
              open(os.path.join(out, "config.json"), "w"), indent=4)
    torch.save(clip.state_dict(), os.path.join(out, "clip_gt_arxiv_pub.pkl"))  # an OrderedDict with _metadata
    return clip


def graph_data(path):
    from torch_geometric.data import Data
    gen = torch.Generator().manual_seed(3)
    data = collections.OrderedDict()
    with sparse_standins() as SparseTensor:
        for name, (n, classes) in DATASETS.items():
            x = torch.randn(n, G, generator=gen)
            y = torch.randint(0, classes, (n, 1), generator=gen)
            y[-3:] = -1  # unlabelled nodes, as arXiv and Cora have
            src = torch.randint(0, n, (3 * n,), generator=gen)
            dst = torch.randint(0, n, (3 * n,), generator=gen)
            d = Data(x=x, y=y)
            d.edge_index = SparseTensor(src, dst, (n, n))
            d.adj_t = SparseTensor(dst, src, (n, n))
            d.train_mask = np.arange(n) < n // 2
            d.node_year = (np.arange(n, dtype=np.int64) % 20 + 2000).reshape(n, 1)
            d.num_nodes = n
            data[name] = d
        torch.save(dict(data), path)
    return data


def subgraph(rng, n, centre, size=4):
    """2-hop-like sample: the centre first, then distinct neighbours; edges as local positions."""
    others = rng.sample([i for i in range(n) if i != centre], size - 1)
    nodes = [centre] + others
    return {"node_idx": centre, "edge_index": [[0, 1, 1, 2, 0, 3], [1, 0, 2, 1, 3, 0]], "node_list": nodes}


def node_record(rng, data, dataset, split, i, cot=False):
    n, _ = DATASETS[dataset]
    centre = rng.randrange(n - 3)  # labelled nodes only
    y = int(data[dataset].y[centre, 0])
    label = {"arxiv": ARXIV, "cora": CORA, "pubmed": PUBMED}[dataset][y]
    q = ("Given a citation graph: \n<graph>\nwhere the 0th node is the target paper, with the following "
         "information: \nTitle: A paper\nAbstract: Its abstract.\nQuestion: Which arXiv CS sub-category does this "
         "paper belong to? Give the most likely arXiv CS sub-categories of this paper directly, in the form \"cs.XX\" "
         "with full name of the category.")
    a = f"{label}" if not cot else (f"{label}. The paper studies methods central to this area, and its citations "
                                    f"point to work in the same field, so {label} fits it best.")
    kind = "cot" if cot else "std"
    return {"id": f"{dataset}_{split}_{kind}_{i}", "graph": subgraph(rng, n, centre),
            "conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]}


def link_record(rng, dataset, split, i):
    n, _ = DATASETS[dataset]
    g1, g2 = subgraph(rng, n, rng.randrange(n)), subgraph(rng, n, rng.randrange(n))
    graph = {}
    for k, g in (("1", g1), ("2", g2)):
        graph.update({f"node_idx_{k}": g["node_idx"], f"edge_index_{k}": g["edge_index"], f"node_list_{k}": g["node_list"]})
    q = ("Given a sequence of graph tokens: <graph> that constitute a subgraph of a citation graph, .... Given "
         "another sequence of graph tokens: <graph>, ..., are these two central nodes connected? Give me an answer of "
         "\"yes\" or \"no\".")
    return {"id": f"{dataset}_{split}_{i}_LP", "graph": graph,
            "conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": rng.choice(["yes", "no"])}]}


def matching_record(rng, dataset, i):
    n, _ = DATASETS[dataset]
    g = subgraph(rng, n, rng.randrange(n))
    titles = [f"Paper {v}" for v in g["node_list"]]
    order = list(range(len(titles)))
    rng.shuffle(order)
    q = ("Given a sequence of graph tokens <graph> that constitute a subgraph of a citation graph, .... Here is a "
         "list of paper titles: " + ", ".join(f"{k + 1}. {titles[j]}" for k, j in enumerate(order)) +
         ", please reorder the list of papers according to the order of graph tokens.")
    a = ("Based on the given graph tokens and the list of paper titles, we obtain the matching of graph tokens and "
         "papers as follows: " + ", ".join(f"Graph token {k + 1} corresponds to {t}" for k, t in enumerate(titles)) + ".")
    return {"id": f"{dataset}_graphmatch_{i}", "graph": g,
            "conversations": [{"from": "human", "value": q}, {"from": "gpt", "value": a}]}


def write_records(path, records):
    with open(path, "w") as f:
        json.dump(records, f, indent=4)


def instructions(out, data):
    rng = random.Random(4)
    write_records(os.path.join(out, "train_instruct_graphmatch.json"),
                  [matching_record(rng, d, i) for i, d in enumerate(["arxiv", "pubmed"] * 8)])
    mix = [node_record(rng, data, "arxiv", "train", i, cot=i % 2 == 1) for i in range(8)]
    mix += [node_record(rng, data, "pubmed", "train", i) for i in range(4)]
    mix += [link_record(rng, "arxiv", "train", i) for i in range(4)]
    rng.shuffle(mix)
    write_records(os.path.join(out, "arxiv_pub_node_st_cot_link_mix.json"), mix)
    for d in ("arxiv", "cora"):
        write_records(os.path.join(out, f"{d}_test_instruct_std.json"), [node_record(rng, data, d, "test", i) for i in range(6)])
        write_records(os.path.join(out, f"{d}_test_instruct_cot.json"),
                      [node_record(rng, data, d, "test", i, cot=True) for i in range(4)])
    write_records(os.path.join(out, "pubmed_test_instruct_LP.json"), [link_record(rng, "pubmed", "test", i) for i in range(6)])
    labels = {str(i): (CORA[int(y)] if int(y) >= 0 else "nan") for i, y in enumerate(data["cora"].y[:, 0])}
    labels.update({str(DATASETS["cora"][0] + k): CORA[k] for k in range(70)})  # every label occurs at least once
    json.dump(labels, open(os.path.join(out, "Cora_id_labels.json"), "w"))


def stage1_projector(path, vicuna_model):
    """GraphGPT's stage-1 output: every parameter named like embed_tokens or graph_projector."""
    torch.manual_seed(5)
    embed = vicuna_model.model.embed_tokens.weight.detach().float()
    embed = torch.cat([embed, torch.randn(3, D) * 0.02])  # <g_patch>, <g_start>, <g_end>
    proj = nn.Linear(G, D)
    torch.save({"model.embed_tokens.weight": embed, "model.graph_projector.weight": proj.weight.detach(),
                "model.graph_projector.bias": proj.bias.detach()}, path)


def mix_all(out, assets, clip):
    from transformers import LlamaForCausalLM
    torch.manual_seed(6)
    model = LlamaForCausalLM(llama_config(VOCAB + 3)).to(torch.float16)
    proj = nn.Linear(G, D).to(torch.float16)
    os.makedirs(out)

    class GraphLlama:  # what save_pretrained sees: the LLaMA's tensors plus the projector and tower
        def __init__(self):
            self.config = model.config

        def state_dict(self):
            sd = collections.OrderedDict(model.state_dict())
            sd["model.graph_projector.weight"] = proj.weight.detach()
            sd["model.graph_projector.bias"] = proj.bias.detach()
            for k, v in clip.gnn.state_dict().items():
                sd["model.graph_tower." + k] = v.detach().to(torch.float16)
            return sd

    save_pretrained_bin(GraphLlama(), out, "5MB")
    c = json.load(open(os.path.join(out, "config.json")))
    c.update(model_type="GraphLlama", architectures=["GraphLlamaForCausalLM"], graph_hidden_size=G,
             graph_tower="clip_gt_arxiv_pub", use_graph_start_end=True, use_graph_proj=True, graph_select_layer=-2,
             freeze_graph_mlp_adapter=False, tune_graph_mlp_adapter=True, sep_graph_conv_front=False,
             pretrain_graph_model_path="/mnt/author/GraphGPT/graph_transformer/")
    json.dump(c, open(os.path.join(out, "config.json"), "w"), indent=2)
    json.dump({"<g_patch>": VOCAB, "<g_start>": VOCAB + 1, "<g_end>": VOCAB + 2},
              open(os.path.join(out, "added_tokens.json"), "w"), indent=2)
    tokenizer_files(out, assets)
    # GraphGPT's extract_graph_projector.py: the projector and embedding out of the tuned model.
    torch.save({"model.embed_tokens.weight": model.model.embed_tokens.weight.detach(),
                "model.graph_projector.weight": proj.weight.detach(), "model.graph_projector.bias": proj.bias.detach()},
               out + "-projector.bin")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    assets = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("GRAPHTUNE_ASSETS", "../shared/assets")
    if not os.path.exists(os.path.join(assets, "llm", "tokenizer.model")):
        sys.exit(f"graphgpt_fixtures.py: no LLaMA tokenizer.model under {assets}/llm (the shared assets)")
    os.makedirs(out, exist_ok=True)
    vicuna_model = vicuna(os.path.join(out, "vicuna-7b-v1.5-16k"), assets)
    clip = graph_encoder(os.path.join(out, "Arxiv-PubMed-GraphCLIP-GT"))
    data = graph_data(os.path.join(out, "graph_data_all.pt"))
    instructions(out, data)
    stage1_projector(os.path.join(out, "stage_1_projector.bin"), vicuna_model)
    mix_all(os.path.join(out, "GraphGPT-7B-mix-all"), assets, clip)
    for root, _, files in sorted(os.walk(out)):
        for f in sorted(files):
            p = os.path.join(root, f)
            print(f"{os.path.relpath(p, out)}\t{os.path.getsize(p)}")


if __name__ == "__main__":
    main()
