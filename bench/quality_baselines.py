#!/usr/bin/env python3
"""The rows of bench/quality.sh's table that are not graphtune's: majority class, an MLP and a
two-layer GCN (PyTorch Geometric), and a linear probe of the graph encoder's output, all on the
same training papers and test papers as the graph model, with the node features the encoder
gets (the text-graph folder's features.npy). graphtune's own evaluations are scored from their
predictions.jsonl, so every row's confidence interval comes from the same bootstrap over the
same test papers.

  quality_baselines.py --graph FOLDER --train TRAIN.json --test TEST.json [--val VAL.json] \
      [--probe NAME=ENCODER[,ENCODER...] ...] [--run NAME=EVAL_DIR[,EVAL_DIR...][=SECONDS] ...] \
      [--versus-probe RUN_NAME=PROBE_NAME ...] [--seeds 5] [--json OUT]

TRAIN.json / TEST.json are graphtune's node-classification records (GraphGPT's JSON): the
papers are their centre nodes, the labels come from nodes.tsv. An EVAL_DIR is what
`graphtune eval` wrote (predictions.jsonl, metrics.json); SECONDS, what producing it took, goes
into the table. Several comma-separated EVAL_DIRs (or encoder files) are one row: the runs of
the same recipe with different seeds, scored as their mean, each seed's accuracy in the note.
--versus-probe adds a row: a graph model's accuracy minus the linear probe of its own encoders,
with a paired bootstrap interval. Rows print in the order given, baselines first.

With --val (the validation papers' records), a second GCN row has its hidden size and feature
normalisation chosen on those papers (GCN_GRID), as the graph model's recipe was chosen, and
every "minus the GCN" row is against it: a baseline with fixed settings beside a recipe tuned
on the same papers would flatter the recipe.
"""
import argparse
import json
import math
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch_geometric.nn import GCNConv
from torch_geometric.utils import to_undirected

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
from graphgpt_reference import graph_encoder_file  # noqa: E402  (tested against graphtune's encoders)
from label_input_probe import probe_logits  # noqa: E402
from reader_ceiling import FIELD_WEIGHT_DECAY  # noqa: E402

BOOTSTRAP = 2000


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        head = f.readline().rstrip("\n").split("\t")
        return [dict(zip(head, line.rstrip("\n").split("\t"))) for line in f if line.strip()]


def read_graph(folder):
    nodes = read_tsv(os.path.join(folder, "nodes.tsv"))
    classes = [r["name"] for r in read_tsv(os.path.join(folder, "classes.tsv"))]
    edges = np.array([[int(r["src"]), int(r["dst"])] for r in read_tsv(os.path.join(folder, "edges.tsv"))]).T
    x = np.load(os.path.join(folder, "features.npy"))
    y = np.array([int(r["label"]) for r in nodes])
    return torch.from_numpy(x).float(), torch.from_numpy(y), torch.from_numpy(edges).long(), classes


def macro_f1(pred, true, k):
    """sklearn's f1_score(average="macro") over the classes that occur as a label or a
    prediction; an unparsed answer (-1) is a false negative of its true class only."""
    f1 = []
    for c in range(k):
        tp = int(((pred == c) & (true == c)).sum())
        fp = int(((pred == c) & (true != c)).sum())
        fn = int(((pred != c) & (true == c)).sum())
        if tp + fp + fn:
            f1.append(2 * tp / (2 * tp + fp + fn))
    return sum(f1) / len(f1) if f1 else 0.0


def scores(preds, true, k, rng):
    """preds: [seeds, n] class indices. Accuracy and macro-F1 as the mean over seeds, each with
    a 95% bootstrap interval over the test papers (the same resamples for every row)."""
    acc = lambda idx: np.mean([(p[idx] == true[idx]).mean() for p in preds])
    f1 = lambda idx: np.mean([macro_f1(p[idx], true[idx], k) for p in preds])
    every = np.arange(len(true))
    boots = [rng.integers(0, len(true), len(true)) for _ in range(BOOTSTRAP)]
    a = sorted(acc(b) for b in boots)
    m = sorted(f1(b) for b in boots)
    lo, hi = int(0.025 * BOOTSTRAP), int(0.975 * BOOTSTRAP) - 1
    return {"accuracy": acc(every), "accuracy_ci": [a[lo], a[hi]], "macro_f1": f1(every), "macro_f1_ci": [m[lo], m[hi]],
            "seed_accuracies": [float((p == true).mean()) for p in preds]}


class Gcn(torch.nn.Module):
    def __init__(self, d, k, hidden=64):
        super().__init__()
        self.c1, self.c2 = GCNConv(d, hidden), GCNConv(hidden, k)

    def forward(self, x, ei):
        return self.c2(F.dropout(F.relu(self.c1(F.dropout(x, 0.5, self.training), ei)), 0.5, self.training), ei)


class Mlp(torch.nn.Module):
    def __init__(self, d, k, hidden=64):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(d, hidden), torch.nn.Linear(hidden, k)

    def forward(self, x, ei):
        return self.l2(F.dropout(F.relu(self.l1(F.dropout(x, 0.5, self.training))), 0.5, self.training))


# The GCN's settings tried on the validation papers: hidden size, and the features as they are
# or with each row summing to one (PyG's NormalizeFeatures, Kipf and Welling's preprocessing).
GCN_GRID = [(hidden, rows) for hidden in (16, 64, 256) for rows in (False, True)]
GCN_SELECT_SEEDS = 2  # seeds averaged per setting while choosing; the chosen one runs --seeds
FIXED_GCN, CHOSEN_GCN = "GCN, 2 layers (PyG GCNConv)", "GCN, settings chosen on the validation papers"


def normalised_rows(x):
    from torch_geometric.data import Data
    from torch_geometric.transforms import NormalizeFeatures
    return NormalizeFeatures()(Data(x=x.clone())).x


def train_node_model(model, x, ei, y, train, epochs=200):
    """Kipf and Welling's optimiser: Adam lr 0.01, weight decay 5e-4 (here on both layers),
    dropout 0.5, 200 epochs, no early stopping, so every row trains on the same labels alone."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(x, ei)[train], y[train]).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        return model(x, ei).argmax(-1)


def centre_embeddings(encoder, records, x, ei, every_hop=False):
    """The encoder's output for each record's centre node (node 0 of its subgraph), computed on
    the record's own subgraph as graphtune's graph stages do. The hop field's centre token is its
    hop 0; with every_hop, all K + 1 of its tokens side by side (without the one-hots, the same
    for every paper)."""
    if hasattr(encoder, "field_of"):
        field = encoder.field_of(x, ei)[torch.tensor([r["graph"]["node_idx"] for r in records])]
        return field if every_hop else field[:, :field.shape[1] // encoder.hops.shape[0]]
    out = []
    for r in records:
        g = r["graph"]
        if hasattr(encoder, "centre"):  # a template's centre token needs no tree
            out.append(encoder.centre(x[g["node_idx"]]))
            continue
        ei = torch.tensor(g["edge_index"], dtype=torch.long).view(2, -1)
        out.append(encoder(x[torch.tensor(g["node_list"])], ei)[0])
    return torch.stack(out)


def linear_probe(train_z, train_y, test_z, k, seed):
    """Multinomial logistic regression (L-BFGS, L2 1e-4) on standardised embeddings."""
    torch.manual_seed(seed)
    mu, sd = train_z.mean(0), train_z.std(0) + 1e-6
    a, b = (train_z - mu) / sd, (test_z - mu) / sd
    lin = torch.nn.Linear(a.shape[1], k)
    opt = torch.optim.LBFGS(lin.parameters(), max_iter=500, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = F.cross_entropy(lin(a), train_y) + 1e-4 * lin.weight.pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        return lin(b).argmax(-1)


def field_reader(train_z, train_y, test_z, k, seed):
    """The hop field read as reader_ceiling.py reads it: a logistic regression on the tokens as
    they are, with the weight decay chosen there on the validation papers. Standardised, as the
    probe reads an encoder's dense output, a word in two papers weighs as much as a common one and
    the reader overfits: 0.831 against 0.847 on Cora-ML's and 0.861 against 0.884 on LINQS's 16
    hops (reader_ceiling.py's splits, validation papers)."""
    torch.manual_seed(seed)
    return probe_logits(train_z.float().numpy(), train_y.numpy(), test_z.float().numpy(), k,
                        weight_decay=FIELD_WEIGHT_DECAY, standardise=False).argmax(-1)


def normalise(text):
    """graphtune's normalise_answer (data/metrics.hpp): lower-case, drop a trailing "</s>", strip
    whitespace and punctuation at the ends, collapse whitespace."""
    t = text.lower()
    if t.endswith("</s>"):
        t = t[:-4]
    t = re.sub(r"\s+", " ", t)
    return t.strip(" \t\n\r\f\v" + "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def parse_class(answer, classes):
    """graphtune's parse_class (data/metrics.hpp): an exact normalised match, else the first
    class mentioned (not glued to a letter or digit; a mention inside a longer one dropped)."""
    names = [normalise(c) for c in classes]
    a = normalise(answer)
    if a in names:
        return names.index(a)
    text = re.sub(r"\s+", " ", answer.lower())
    spans = []
    for c, n in enumerate(names):
        for m in re.finditer(re.escape(n), text):
            s, e = m.span()
            if (s == 0 or not text[s - 1].isalnum()) and (e == len(text) or not text[e].isalnum()):
                spans.append((s, e, c))
    kept = [sp for sp in spans if not any(o != sp and o[0] <= sp[0] and sp[1] <= o[1] and o[1] - o[0] > sp[1] - sp[0] for o in spans)]
    return min(kept)[2] if kept else -1


def eval_predictions(folder, test, classes):
    rows = [json.loads(l) for l in open(os.path.join(folder, "predictions.jsonl"), encoding="utf-8")]
    if [r["id"] for r in rows] != [t["id"] for t in test]:
        sys.exit(f"{folder}/predictions.jsonl: its ids are not the test records' ({len(rows)} rows, {len(test)} records)")
    pred = np.array([parse_class(r["res"], classes) for r in rows])
    metrics = json.load(open(os.path.join(folder, "metrics.json")))
    return pred, metrics


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", required=True)
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True, help="the scored papers' records")
    ap.add_argument("--val", help="the validation papers' records: the second GCN row's settings are chosen on them")
    ap.add_argument("--scored-on", default="test", choices=["test", "validation"],
                    help="which papers --test holds, for the table's words")
    ap.add_argument("--probe", action="append", default=[], help="NAME=ENCODER_FILE")
    ap.add_argument("--run", action="append", default=[], help="NAME=EVAL_DIR[=SECONDS]")
    ap.add_argument("--versus-probe", action="append", default=[], help="RUN_NAME=PROBE_NAME")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.set_num_threads(max(1, os.cpu_count() or 1))

    x, y, edges, classes = read_graph(args.graph)
    k = len(classes)
    train_recs, test_recs = json.load(open(args.train)), json.load(open(args.test))
    train = torch.tensor([r["graph"]["node_idx"] for r in train_recs])
    test = torch.tensor([r["graph"]["node_idx"] for r in test_recs])
    if set(train.tolist()) & set(test.tolist()):
        sys.exit(f"{args.train} and {args.test} share papers")
    val = torch.tensor([r["graph"]["node_idx"] for r in json.load(open(args.val))]) if args.val else None
    if val is not None and set(train.tolist()) & set(val.tolist()):
        sys.exit(f"{args.train} and {args.val} share papers")
    true = y[test].numpy()
    ei = to_undirected(edges, num_nodes=x.shape[0])
    rows = []

    preds_of = {}

    def row(name, preds, seconds, note=""):
        preds_of[name] = np.asarray(preds)
        rows.append({"name": name, "seconds": seconds, "note": note, **scores(preds_of[name], true, k, np.random.default_rng(0))})

    t0 = time.time()
    majority = int(torch.bincount(y[train], minlength=k).argmax())
    row("majority class (of the training papers)", [np.full(len(test), majority)], time.time() - t0)

    def node_model(cls, features, seeds, first_seed=0, **kw):
        out = []
        for seed in range(first_seed, seeds):
            torch.manual_seed(seed)
            out.append(train_node_model(cls(features.shape[1], k, **kw), features, ei, y, train))
        return out

    seeds_said = f"mean of {args.seeds} seed{'s' if args.seeds > 1 else ''}"
    for name, cls in ((FIXED_GCN, Gcn), ("MLP, 2 layers", Mlp)):
        t0 = time.time()
        row(name, [p[test].numpy() for p in node_model(cls, x, args.seeds)], time.time() - t0, seeds_said)
    if val is not None:
        t0 = time.time()
        features_of = {False: x, True: normalised_rows(x)}
        tried = []  # (validation accuracy, hidden, rows normalised, the seeds' outputs)
        for hidden, rows_normalised in GCN_GRID:
            outs = node_model(Gcn, features_of[rows_normalised], min(GCN_SELECT_SEEDS, args.seeds), hidden=hidden)
            tried.append((np.mean([float((p[val] == y[val]).float().mean()) for p in outs]), hidden, rows_normalised, outs))
        _, hidden, rows_normalised, outs = max(tried, key=lambda t: t[0])  # the first of equals, in GCN_GRID's order
        # The choice's own seeds are the first of the chosen GCN's: only the rest are trained.
        outs = outs + node_model(Gcn, features_of[rows_normalised], args.seeds, len(outs), hidden=hidden)
        grid = ", ".join(f"{h}{'n' if r else ''} {a:.3f}" for a, h, r, _ in tried)
        row(CHOSEN_GCN, [p[test].numpy() for p in outs], time.time() - t0,
            f"{seeds_said}; hidden {hidden}, {'rows normalised' if rows_normalised else 'features as they are'} "
            f"(validation accuracy, n = rows normalised: {grid})")

    def seeds_note(preds):
        if len(preds) < 2:
            return ""
        accs = [float((p == true).mean()) for p in preds]
        return f"mean of {len(preds)} seeds ({', '.join(f'{a:.3f}' for a in accs)}; spread {max(accs) - min(accs):.3f}), "

    for spec in args.probe:
        name, paths = spec.split("=", 1)
        t0 = time.time()
        preds = []
        for path in paths.split(","):
            enc = graph_encoder_file(path)
            ztr, zte = centre_embeddings(enc, train_recs, x, ei), centre_embeddings(enc, test_recs, x, ei)
            preds.append(linear_probe(ztr, y[train], zte, k, 0).numpy())
        row(name, preds, time.time() - t0, seeds_note(preds) + "logistic regression on the centre's encoder output")
        if hasattr(enc, "field_of"):  # the hop field: its centre token is hop 0; a reader of every hop too
            t0 = time.time()
            preds = []
            for path in paths.split(","):
                enc = graph_encoder_file(path)
                ztr = centre_embeddings(enc, train_recs, x, ei, every_hop=True)
                zte = centre_embeddings(enc, test_recs, x, ei, every_hop=True)
                preds.append(field_reader(ztr, y[train], zte, k, 0).numpy())
            row(name.replace("linear probe", "linear reader of every hop"), preds, time.time() - t0,
                seeds_note(preds) + "logistic regression on all the centre's tokens (SGC's, SIGN's features), "
                "unstandardised, weight decay 1e-3")

    for spec in args.run:
        name, folders, *secs = spec.split("=")
        preds = []
        for folder in folders.split(","):
            pred, metrics = eval_predictions(folder, test_recs, classes)
            mine = float((pred == true).mean())
            if abs(mine - metrics["accuracy"]) > 1e-9:
                sys.exit(f"{folder}: parsing the answers here gives accuracy {mine}, graphtune's metrics.json {metrics['accuracy']}")
            preds.append(pred)
        row(name, preds, float(secs[0]) if secs else float("nan"),
            seeds_note(preds) + f"unparsed {sum(int((p < 0).sum()) for p in preds)}")

    def paired(name, other):
        """name's mean accuracy and macro-F1 minus other's, each with a paired bootstrap interval
        over the same resampled test papers."""
        rng = np.random.default_rng(1)
        d_acc, d_f1 = [], []
        for _ in range(BOOTSTRAP):
            b = rng.integers(0, len(true), len(true))
            d_acc.append(np.mean([(p[b] == true[b]).mean() for p in preds_of[name]]) -
                         np.mean([(p[b] == true[b]).mean() for p in preds_of[other]]))
            d_f1.append(np.mean([macro_f1(p[b], true[b], k) for p in preds_of[name]]) -
                        np.mean([macro_f1(p[b], true[b], k) for p in preds_of[other]]))
        d_acc.sort(), d_f1.sort()
        lo, hi = int(0.025 * BOOTSTRAP), int(0.975 * BOOTSTRAP) - 1
        me = next(r for r in rows if r["name"] == name)
        them = next(r for r in rows if r["name"] == other)
        return {"name": name, "other": other, "accuracy_minus": me["accuracy"] - them["accuracy"],
                "accuracy_ci": [d_acc[lo], d_acc[hi]], "macro_f1_minus": me["macro_f1"] - them["macro_f1"],
                "macro_f1_ci": [d_f1[lo], d_f1[hi]]}

    # Each graph model against the GCN (the one chosen on the validation papers where there is
    # one), and against the probe of its own encoders.
    gcn = CHOSEN_GCN if val is not None else FIXED_GCN
    versus = [paired(spec.split("=")[0], gcn) for spec in args.run]
    versus_probe = []
    for spec in args.versus_probe:
        name, probe = spec.split("=", 1)
        if name not in preds_of or probe not in preds_of:
            sys.exit(f"--versus-probe {spec}: no row named {name if name not in preds_of else probe}")
        versus_probe.append(paired(name, probe))

    table = {"graph": args.graph, "train_papers": len(train), "test_papers": len(test), "scored_on": args.scored_on,
             "classes": classes,
             "bootstrap": BOOTSTRAP, "rows": rows,
             "versus_gcn": versus, "versus_own_probe": versus_probe}
    graph_name = json.load(open(os.path.join(args.graph, "meta.json"))).get("name", "")
    scored = f"{args.scored_on} papers"
    print(f"{graph_name} ({args.graph}): {len(train)} training papers, {len(test)} {scored}, "
          f"{k} classes, {x.shape[1]}-d features; 95% intervals: bootstrap over the {scored}")
    print(f"  {'':52} {'accuracy':>8} {'95% interval':>15} {'macro-F1':>8} {'95% interval':>15} {'seconds':>8}")
    for r in rows:
        ci = lambda v: f"[{v[0]:.3f}, {v[1]:.3f}]"
        secs = "" if math.isnan(r["seconds"]) else f"{r['seconds']:.0f}"
        print(f"  {r['name']:52} {r['accuracy']:8.4f} {ci(r['accuracy_ci']):>15} {r['macro_f1']:8.4f} {ci(r['macro_f1_ci']):>15}"
              f" {secs:>8}" + (f"  {r['note']}" if r["note"] else ""))
    ci = lambda c: f"[{c[0]:+.3f}, {c[1]:+.3f}]"
    for v in versus:
        gcn_said = "the GCN chosen on the validation papers" if v["other"] == CHOSEN_GCN else "the GCN"
        print(f"  {v['name']} minus {gcn_said}: accuracy {v['accuracy_minus']:+.4f} {ci(v['accuracy_ci'])}, "
              f"macro-F1 {v['macro_f1_minus']:+.4f} {ci(v['macro_f1_ci'])} (paired bootstrap)")
    for v in versus_probe:
        # The hop field's second reader (every hop of the centre) is named as such.
        what = "the linear probe of its own encoder" if v["other"].startswith("linear probe") else "the " + v["other"].split(",")[0]
        print(f"  {v['name']} minus {what}: accuracy {v['accuracy_minus']:+.4f} "
              f"{ci(v['accuracy_ci'])}, macro-F1 {v['macro_f1_minus']:+.4f} {ci(v['macro_f1_ci'])} (paired bootstrap)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1, default=float)


if __name__ == "__main__":
    main()
