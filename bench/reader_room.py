#!/usr/bin/env python3
"""Is there room above the graph model on the papers its settings are chosen on? Before a
stage-2 lever is tried (40 minutes a graph for three seeds), this asks whether any reader of the
same information gets above the graph model's own tokens on the bench's validation papers; if
none does, a lever chosen there can only be chosen on noise.

It reads one graph folder of a bench run (OUT/<graph>: the text-graph folder `folder/` and the
records train.json, val.json and, after a run on the test papers, test.json) and trains, on the
same training papers:
  hop field 16        the default recipe's 17 hop tokens (rows of unit L2 norm, the GCN's
                      normalised adjacency with self-loops), side by side, read by a logistic
                      regression as bench/quality_baselines.py's every-hop row reads them
  + random-walk hops  the same beside 16 hops of the row-normalised adjacency (SIGN's second
                      operator)
  + PPR               beside the personalised PageRank of the rows (10 steps, teleport 0.1)
  32 hops             a field twice as far
  tf-idf rows         the field of each row's words weighted by their smoothed inverse paper
                      frequency (scikit-learn's), then over its L2 norm
  stage 2's schedule  the hop field 16's reader trained the way stage 2 trains the projector
                      (batches of 4, AdamW at 2e-3, 3% warm-up then cosine, two epochs)
  GCN /count, GCN l2  bench/quality_baselines.py's GCN (two layers, 64 hidden) on the rows the
                      chosen GCN normalises (each over its sum), and over their L2 norm (2 seeds each)
Each is scored on the bench's own validation and test papers, and on the validation papers of
three other per-class 40/40/20 splits (label_input_probe.py's), whose mean says how much of a
difference on the bench's split is that split's.

  bench/reader_room.py runs/quality/linqs     # LINQS: 27 minutes of CPU on 2 cores (82 at low
                                              # priority beside a bench run and CI)
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from label_input_probe import gcn_outputs, normalised, probe_logits, split  # noqa: E402
from quality_baselines import normalised_rows, read_graph  # noqa: E402
from reader_ceiling import FIELD_WEIGHT_DECAY, hop_products  # noqa: E402

HOPS, TELEPORT = 16, 0.1


def l2_rows(x):
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def record_nodes(path):
    with open(path) as f:
        return np.array([r["graph"]["node_idx"] for r in json.load(f)])


def read_linearly(h, y, train, scored):
    logits = probe_logits(h[train], y[train], h[scored], int(y.max()) + 1, weight_decay=FIELD_WEIGHT_DECAY,
                          standardise=False)
    return logits.argmax(1).numpy()


def read_as_stage2(h, y, train, scored, seed=0):
    """The same linear reader, trained on stage 2's schedule instead of to convergence."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    x, target = torch.tensor(h), torch.tensor(y)
    w = torch.nn.Linear(x.shape[1], int(y.max()) + 1)
    lr, batch, epochs = 2e-3, 4, 2
    opt = torch.optim.AdamW(w.parameters(), lr=lr, weight_decay=0.0)
    steps = epochs * math.ceil(len(train) / batch)
    warm, step = max(1, int(0.03 * steps)), 0
    for _ in range(epochs):
        order = torch.tensor(train)[torch.randperm(len(train), generator=g)]
        for i in range(0, len(order), batch):
            b = order[i:i + batch]
            scale = step / warm if step < warm else 0.5 * (1 + math.cos(math.pi * (step - warm) / (steps - warm)))
            for group in opt.param_groups:
                group["lr"] = lr * scale
            opt.zero_grad()
            F.cross_entropy(w(x[b]), target[b]).backward()
            opt.step()
            step += 1
    with torch.no_grad():
        return w(x[scored]).argmax(1).numpy()


def read_by_gcn(x, a_hat, y, train, scored):
    return [gcn_outputs(a_hat, x, y, train, int(y.max()) + 1, seed)[1][scored].argmax(1) for seed in (0, 1)]


def main():
    if len(sys.argv) != 2 or not os.path.isfile(os.path.join(sys.argv[1], "train.json")):
        sys.exit("usage: bench/reader_room.py OUT/GRAPH  (a graph folder of a bench run: folder/, train.json, val.json)")
    run = sys.argv[1]
    torch.set_num_threads(os.cpu_count() or 1)
    t0 = time.time()
    x, y, edges, _ = read_graph(os.path.join(run, "folder"))
    x, y, edges, n = x.numpy().astype(np.float32), y.numpy(), edges.numpy(), x.shape[0]
    a = np.zeros((n, n), np.float32)
    a[edges[0], edges[1]] = 1
    a = ((a + a.T) > 0).astype(np.float32)
    np.fill_diagonal(a, 0)
    a_hat = normalised(a)
    loops = a + np.eye(n, dtype=np.float32)
    walk = loops / loops.sum(1, keepdims=True)

    rows = l2_rows(x)
    hops = hop_products(a_hat, rows, 2 * HOPS)
    ppr = rows
    for _ in range(10):
        ppr = (1 - TELEPORT) * (a_hat @ ppr) + TELEPORT * rows
    paper_freq = (x != 0).sum(0)
    tfidf = l2_rows(x * (np.log((1 + n) / (1 + paper_freq)) + 1).astype(np.float32))
    default = np.hstack(hops[:HOPS + 1])
    linear = {
        "hop field 16 (the default's tokens)": default,
        "+ random-walk hops": np.hstack(hops[:HOPS + 1] + hop_products(walk, rows, HOPS)[1:]),
        "+ PPR": np.hstack(hops[:HOPS + 1] + [ppr]),
        "32 hops": np.hstack(hops),
        "tf-idf rows": np.hstack(hop_products(a_hat, tfidf, HOPS)),
    }
    count_rows = normalised_rows(torch.from_numpy(x)).numpy()  # the chosen GCN's, PyG's NormalizeFeatures

    bench = {"val": record_nodes(os.path.join(run, "val.json"))}
    if os.path.isfile(os.path.join(run, "test.json")):
        bench["test"] = record_nodes(os.path.join(run, "test.json"))
    train = record_nodes(os.path.join(run, "train.json"))
    splits = [("bench", train, bench)]
    for s in range(3):
        other_train, other_val = split(y, s)
        splits.append((f"split {s}", other_train, {"val": other_val}))

    table = {}
    for where, tr, scored in splits:
        every = np.concatenate(list(scored.values()))  # each reader trained once, scored on every part
        preds = {name: [read_linearly(h, y, tr, every)] for name, h in linear.items()}
        preds["hop field 16, stage 2's schedule"] = [read_as_stage2(default, y, tr, every)]
        preds["GCN /count (2 seeds)"] = read_by_gcn(count_rows, a_hat, y, tr, every)
        preds["GCN l2 (2 seeds)"] = read_by_gcn(rows, a_hat, y, tr, every)
        start = 0
        for part, nodes in scored.items():
            for name, p in preds.items():
                got = [q[start:start + len(nodes)] for q in p]
                table.setdefault(name, {})[(where, part)] = float(np.mean([(g == y[nodes]).mean() for g in got]))
            start += len(nodes)
    heads = [("bench", "val"), ("bench", "test")] if "test" in bench else [("bench", "val")]
    print(f"{run}: {len(train)} training papers, {len(bench['val'])} validation papers; readers of the same "
          f"information ({time.time() - t0:.0f} s)")
    print(f"  {'reader':36s} " + " ".join(f"{w + ' ' + p:>11s}" for w, p in heads) + "  3 other splits' val (each)")
    for name, got in table.items():
        other = [got[(f"split {s}", "val")] for s in range(3)]
        print(f"  {name:36s} " + " ".join(f"{got[h]:11.3f}" for h in heads) +
              f"  {np.mean(other):.3f} ({', '.join(f'{v:.3f}' for v in other)})", flush=True)


if __name__ == "__main__":
    main()
