#!/usr/bin/env python3
"""The classic Cora (LINQS: 2,708 papers, 7 classes, 1,433 binary word features, no text) as a
graphtune text-graph folder (docs/embedded-corpus.md, "Files"), the format any user's own graph
takes to reach `graphtune data build` and the graph stages:

  linqs_to_text_graph.py LINQS_DIR OUT_DIR [--name coralinqs]

LINQS_DIR is the shared assets' graph/cora_linqs (cora.npz from shchur/gnn-benchmark: the
features and labels as CSR arrays, and the citations). Papers keep their order; their titles and
texts are empty, so the records ask from the graph tokens alone; features.npy is the 1,433-wide
0/1 matrix as it is. Citations are kept once each, without self loops (the file has neither).
A folder appears whole or not at all.
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("linqs")
    ap.add_argument("out")
    ap.add_argument("--name", default="coralinqs", help="dataset name, the prefix of record ids (no '_')")
    args = ap.parse_args()
    if "_" in args.name or not args.name:
        sys.exit(f"--name: '{args.name}' must be non-empty without '_' (it prefixes record ids)")
    path = os.path.join(args.linqs, "cora.npz")
    if not os.path.exists(path):
        sys.exit(f"{path}: missing (want the LINQS Cora folder of the shared assets: graph/cora_linqs)")
    z = np.load(path, allow_pickle=False)
    n = int(z["attr_shape"][0])
    x = np.zeros(tuple(int(v) for v in z["attr_shape"]), dtype=np.float32)
    for i in range(n):
        lo, hi = z["attr_indptr"][i], z["attr_indptr"][i + 1]
        x[i, z["attr_indices"][lo:hi]] = z["attr_data"][lo:hi]
    labels = z["labels"].astype(int)
    classes = [str(c) for c in z["class_names"]]
    edges = set()
    for i in range(n):
        for j in z["adj_indices"][z["adj_indptr"][i]:z["adj_indptr"][i + 1]]:
            if i != j:
                edges.add((i, int(j)))
    edges = sorted(edges)

    files = {
        "classes.tsv": "idx\tname\tdescription\n" + "".join(f"{k}\t{c}\t{c.replace('_', ' ')}\n" for k, c in enumerate(classes)),
        "nodes.tsv": "idx\tlabel\tlabel_name\ttitle\ttext\n" + "".join(f"{i}\t{y}\t{classes[y]}\t\t\n" for i, y in enumerate(labels)),
        "edges.tsv": "src\tdst\n" + "".join(f"{a}\t{b}\n" for a, b in edges),
    }
    blobs = {k: v.encode() for k, v in files.items()}
    tmp = args.out.rstrip("/") + f".tmp.{os.getpid()}"
    os.makedirs(tmp)
    try:
        np.save(os.path.join(tmp, "features.npy"), x)
        with open(os.path.join(tmp, "features.npy"), "rb") as f:
            blobs["features.npy"] = f.read()
        meta = {"format": "graphtune text graph", "format_version": 1, "name": args.name, "num_nodes": n,
                "num_edges": len(edges), "num_classes": len(classes), "feature_dim": x.shape[1],
                "generator": {"source": "LINQS Cora (cora.npz, shchur/gnn-benchmark)"},
                "files": {k: {"bytes": len(b), "sha256": hashlib.sha256(b).hexdigest()} for k, b in blobs.items()}}
        for k, v in files.items():
            with open(os.path.join(tmp, k), "w", encoding="utf-8") as f:
                f.write(v)
        with open(os.path.join(tmp, "meta.json"), "w") as f:
            f.write(json.dumps(meta, indent=2) + "\n")
        if os.path.exists(args.out):
            shutil.rmtree(args.out)
        os.rename(tmp, args.out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    print(f"linqs_to_text_graph: wrote {args.out}: {n} papers, {len(edges)} citations, {len(classes)} classes, "
          f"{x.shape[1]}-d features", file=sys.stderr)


if __name__ == "__main__":
    main()
