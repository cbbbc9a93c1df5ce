#!/usr/bin/env python3
"""Would the training papers' known labels, handed to the model beside the graph, lift it above
a GCN? A cheap upper-bound check before building it into prompts or graph tokens: linear
probes and GCNs on the raw graphs of ../shared/assets (Cora-ML's 2,879 binary keywords, LINQS
Cora's 1,433 words), three 40/40/20 per-class splits, scored on the validation papers.

Rows (mean over the splits):
  gcn          two-layer GCN, Kipf and Welling's setting (as bench/quality_baselines.py)
  probe        logistic regression on A^2 X (a parameter-free stand-in for a GCN encoder)
  probe+labels the same plus the label histograms of the 1- and 2-hop neighbours that are
               training papers (the centre's own label never counts: A has no self loops)
  labels       the histograms alone
  gcn+labels   the GCN with the histograms as extra input features

  bench/label_input_probe.py [ASSETS]      # default ../shared/assets or $GRAPHTUNE_ASSETS
"""
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)


def dense_csr(data, indices, indptr, shape):
    """scipy is not in the project's environment; these graphs are small enough to hold dense."""
    m = np.zeros(tuple(int(v) for v in shape), np.float32)
    for r in range(len(indptr) - 1):
        m[r, indices[indptr[r]:indptr[r + 1]]] = data[indptr[r]:indptr[r + 1]]
    return m


def load(assets, name):
    if name == "linqs":
        d = np.load(os.path.join(assets, "graph/cora_linqs/cora.npz"))
        a = dense_csr(d["adj_data"], d["adj_indices"], d["adj_indptr"], d["adj_shape"])
        x = dense_csr(d["attr_data"], d["attr_indices"], d["attr_indptr"], d["attr_shape"])
    else:
        d = np.load(os.path.join(assets, "graph/cora_ml/cora_ml.npz"), allow_pickle=True)
        a = dense_csr(d["adj_matrix.data"], d["adj_matrix.indices"], d["adj_matrix.indptr"], d["adj_matrix.shape"])
        x = dense_csr(d["attr_matrix.data"], d["attr_matrix.indices"], d["attr_matrix.indptr"], d["attr_matrix.shape"])
    a = ((a + a.T) > 0).astype(np.float32)
    np.fill_diagonal(a, 0)
    return a, x, np.array(d["labels"]).astype(int)


def split(y, seed):
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.where(y == c)[0])
        train += list(idx[:int(0.4 * len(idx))])
        val += list(idx[int(0.4 * len(idx)):int(0.8 * len(idx))])
    return np.array(train), np.array(val)


def normalised(a):
    a = a + np.eye(a.shape[0], dtype=np.float32)
    d = a.sum(1) ** -0.5
    return (d[:, None] * a * d[None, :]).astype(np.float32)


def probe_logits(x_train, y_train, x_eval, classes, weight_decay=1e-4, standardise=True):
    """Logistic regression (Adam, 300 epochs); its logits on x_eval. Standardised inputs suit
    dense features; sparse word indicators keep their scale (standardising them lets a word seen
    in two papers weigh as much as a common one)."""
    x_train, x_eval = torch.tensor(x_train), torch.tensor(x_eval)
    if standardise:
        mu, sd = x_train.mean(0), x_train.std(0) + 1e-6
        x_train, x_eval = (x_train - mu) / sd, (x_eval - mu) / sd
    w = torch.nn.Linear(x_train.shape[1], classes)
    opt = torch.optim.Adam(w.parameters(), lr=0.01, weight_decay=weight_decay)
    target = torch.tensor(y_train)
    for _ in range(300):
        opt.zero_grad()
        F.cross_entropy(w(x_train), target).backward()
        opt.step()
    return w(x_eval).detach()


def probe(x_train, y_train, x_eval, classes):
    return probe_logits(x_train, y_train, x_eval, classes).argmax(1).numpy()


def gcn_outputs(a_hat, x, y, train, classes, seed):
    """Kipf and Welling's two-layer GCN trained on the train papers: its hidden layer and its
    logits for every node (numpy)."""
    # Dense rather than PyG's GCNConv: the label features need A and A^2 dense anyway, and a
    # 3,000-node graph fits.
    torch.manual_seed(seed)
    a_hat, x, target = torch.tensor(a_hat), torch.tensor(x), torch.tensor(y)
    w1, w2 = torch.nn.Linear(x.shape[1], 64), torch.nn.Linear(64, classes)
    opt = torch.optim.Adam(list(w1.parameters()) + list(w2.parameters()), lr=0.01, weight_decay=5e-4)

    def forward(training):
        h = F.relu(a_hat @ w1(F.dropout(x, 0.5, training)))
        return h, a_hat @ w2(F.dropout(h, 0.5, training))

    for _ in range(200):
        opt.zero_grad()
        F.cross_entropy(forward(True)[1][train], target[train]).backward()
        opt.step()
    with torch.no_grad():
        h, z = forward(False)
    return h.numpy(), z.numpy()


def gcn(a_hat, x, y, train, evaluate, classes, seed):
    return gcn_outputs(a_hat, x, y, train, classes, seed)[1][evaluate].argmax(1)


def main():
    assets = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GRAPHTUNE_ASSETS", "../shared/assets")
    if not os.path.isdir(os.path.join(assets, "graph")):
        sys.exit(f"label_input_probe: no graphs under {assets}/graph (pass the assets folder)")
    for name in ["cora_ml", "linqs"]:
        a, x, y = load(assets, name)
        classes = int(y.max()) + 1
        a_hat = normalised(a)
        smooth = a_hat @ (a_hat @ x)
        two_hop = a @ a
        rows = {}
        for seed in range(3):
            train, val = split(y, seed)
            known = np.zeros((len(y), classes), np.float32)
            known[train, y[train]] = 1
            hist = [m / np.maximum(m.sum(1, keepdims=True), 1) for m in (a @ known, two_hop @ known)]
            accuracy = lambda pred: float((pred == y[val]).mean())
            with_labels = np.hstack([smooth] + hist)
            only_labels = np.hstack(hist)
            rows.setdefault("gcn", []).append(accuracy(gcn(a_hat, x, y, train, val, classes, seed)))
            rows.setdefault("probe", []).append(accuracy(probe(smooth[train], y[train], smooth[val], classes)))
            rows.setdefault("probe+labels", []).append(
                accuracy(probe(with_labels[train], y[train], with_labels[val], classes)))
            rows.setdefault("labels", []).append(
                accuracy(probe(only_labels[train], y[train], only_labels[val], classes)))
            rows.setdefault("gcn+labels", []).append(
                accuracy(gcn(a_hat, np.hstack([x] + hist), y, train, val, classes, seed)))
        print(name, "  ".join(f"{k} {np.mean(v):.4f}" for k, v in rows.items()), flush=True)


if __name__ == "__main__":
    main()
