#!/usr/bin/env python3
"""How far above a GCN could any reader of graph tokens get? Cheap ceilings, measured before a
recipe is built: the graph model reads its encoder's tokens for a paper and its neighbours (and,
where the graph has text, the paper's own words), so these rows hand the same information to
small classifiers trained on the same labels. If none of them clears the GCN, no LLM reading the
same tokens is likely to, and a 30-minute bench run would only say so more slowly.

The bench's features (Cora-ML: the 128-d hashed keywords `graphtune data convert` writes, the
GCN row of bench/quality.sh; LINQS Cora: its 1,433 words), three 40/40/20 per-class splits,
scored on the validation papers; mean over the splits, then each split. Rows:
  gcn            two-layer GCN, Kipf and Welling's setting (as bench/quality_baselines.py)
  z              linear probe of that GCN's output: an encoder at the GCN's level
  z+hops         the same plus the mean output of the 1-hop and of the 2-hop neighbours (the
                 tokens an LLM reads beside the centre's, each computed on the whole graph)
  h, h+hops      the same two on the GCN's hidden layer (64-d, before its last propagation)
  crossfit       the GCN trained on 70% of the training papers, z+hops fit on the other 30%,
                 where its outputs are as wrong as on unseen papers (a reader trained where
                 the encoder was trained learns to trust it)
  10 hops        the GCN's class probabilities propagated 10 more hops (APPNP, teleport 0.1):
                 what reading far beyond a 2-hop subgraph could add
  X              the paper's own features (unstandardised, weight decay 1e-3, as the next row):
                 what a token of the centre alone carries
  hop field      X, AX, A^2X, A^3X and A^4X side by side (A the GCN's normalised adjacency, on
                 the whole graph): LLaGA's hop-field overview, one token a hop, read linearly
                 (SGC's and SIGN's features); no GNN, no encoder to ground
  hop field, K hops  the same with X to A^K X, for K in FIELD_HOPS_SWEEP: how far the field
                 should reach (recipe hop_field's FIELD_HOPS)
  hop field of [X, z]  the 4-hop field over the features beside the GCN's output z (standardised
                 column by column): recipe hop_field_gcn's tokens, read linearly
  +text          (graphs with text) the GCN's probabilities times those of a logistic
                 regression on the paper's own raw keywords (unstandardised, weight decay 1e-3):
                 what its words, which the LLM reads in the prompt and the GCN sees only as 128
                 hashes, could add

  bench/reader_ceiling.py [ASSETS]   # after scripts/build.sh; default ../shared/assets or
                                     # $GRAPHTUNE_ASSETS; 26 minutes on 2 cores beside a bench
                                     # run, most of it the 10- to 32-hop fields
"""
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

from label_input_probe import gcn_outputs, load, normalised, probe, probe_logits, split

TELEPORT, HOPS = 0.1, 10
FIELD_HOPS, FIELD_WEIGHT_DECAY = 4, 1e-3  # the decay chosen on the validation papers from 1e-4, 1e-3, 5e-3
FIELD_HOPS_SWEEP = (10, 16, 24, 32)


def hop_means(a):
    """Row-normalised 1-hop and exactly-2-hop adjacency: the mean over each ring of neighbours."""
    two = ((a @ a) > 0).astype(np.float32) * (1 - a)
    np.fill_diagonal(two, 0)
    return [m / np.maximum(m.sum(1, keepdims=True), 1) for m in (a, two)]


def hashed_cora_ml_features(assets):
    """The features bench/quality.sh gives Cora-ML's encoder and GCN: graphtune's own converter."""
    gt = os.environ.get("GRAPHTUNE_BIN", os.path.join(os.environ.get("GRAPHTUNE_BUILD", "build"), "launcher/graphtune"))
    if not os.access(gt, os.X_OK):
        sys.exit(f"reader_ceiling: no graphtune binary at {gt} (scripts/build.sh, or set GRAPHTUNE_BIN)")
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([gt, "data", "convert", "--graph", os.path.join(assets, "graph/cora_ml"), "--out", tmp,
                               "--overwrite"], capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"reader_ceiling: graphtune data convert failed: {done.stderr.strip()}")
        return np.load(os.path.join(tmp, "features.npy"))


def softmax(z):
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def hop_products(op, x, hops):
    """x and its 1 to `hops` products by op: the hop field's tokens, one a hop."""
    out = [x]
    for _ in range(hops):
        out.append(op @ out[-1])
    return out


def appnp(a_hat, p):
    out = p
    for _ in range(HOPS):
        out = (1 - TELEPORT) * (a_hat @ out) + TELEPORT * p
    return out


def bench_graphs(script):
    """Cora-ML and LINQS Cora from the assets folder (argv[1], $GRAPHTUNE_ASSETS or
    ../shared/assets): name, adjacency, the raw words, labels, and the features the bench gives."""
    assets = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GRAPHTUNE_ASSETS", "../shared/assets")
    if not os.path.isdir(os.path.join(assets, "graph")):
        sys.exit(f"{script}: no graphs under {assets}/graph (pass the assets folder)")
    torch.set_num_threads(os.cpu_count() or 1)
    for name in ["cora_ml", "linqs"]:
        a, words, y = load(assets, name)
        yield name, a, words, y, hashed_cora_ml_features(assets) if name == "cora_ml" else words


def main():
    for name, a, words, y, x in bench_graphs("reader_ceiling"):
        t0 = time.time()
        classes = int(y.max()) + 1
        a_hat = normalised(a)
        rings = hop_means(a)
        hop_field = lambda f: np.hstack(hop_products(a_hat, f, FIELD_HOPS))
        far = hop_products(a_hat, x, max(FIELD_HOPS_SWEEP))
        field = np.hstack(far[:FIELD_HOPS + 1])
        rows = {}
        for seed in range(3):
            train, val = split(y, seed)
            row = lambda key, pred: rows.setdefault(key, []).append(float((pred == y[val]).mean()))
            fit = lambda f, on: probe(f[on], y[on], f[val], classes)
            with_hops = lambda f: np.hstack([f] + [m @ f for m in rings])
            h, z = gcn_outputs(a_hat, x, y, train, classes, seed)
            row("gcn", z[val].argmax(1))
            row("z", fit(z, train))
            row("z+hops", fit(with_hops(z), train))
            row("h", fit(h, train))
            row("h+hops", fit(with_hops(h), train))
            order = np.random.default_rng(100 + seed).permutation(train)
            first, rest = order[:int(0.7 * len(order))], order[int(0.7 * len(order)):]
            _, z_first = gcn_outputs(a_hat, x, y, first, classes, seed)
            row("crossfit", fit(with_hops(z_first), rest))
            row("10 hops", appnp(a_hat, softmax(z))[val].argmax(1))
            # Sparse word counts keep their scale here: standardised, a rare word weighs as much as
            # a common one and a linear reader of them overfits (LINQS: 0.59 against 0.73).
            read = lambda f: probe_logits(f[train], y[train], f[val], classes, weight_decay=FIELD_WEIGHT_DECAY,
                                          standardise=False).argmax(1).numpy()
            row("X", read(x))
            row("hop field", read(field))
            for k in FIELD_HOPS_SWEEP:
                row(f"hop field, {k} hops", read(np.hstack(far[:k + 1])))
            row("hop field of [X, z]", read(hop_field(np.hstack([x, (z - z.mean(0)) / z.std(0)]))))
            if name == "cora_ml":
                text = softmax(probe_logits(words[train], y[train], words[val], classes, weight_decay=1e-3,
                                            standardise=False).numpy())
                row("+text", (softmax(z)[val] * text).argmax(1))
        print(f"{name} (validation papers, mean of 3 splits, then each; {time.time() - t0:.0f} s)")
        for key, v in rows.items():
            print(f"  {key:19s} {np.mean(v):.3f}   {'  '.join(f'{t:.3f}' for t in v)}", flush=True)


if __name__ == "__main__":
    main()
