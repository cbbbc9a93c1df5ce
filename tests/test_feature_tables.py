"""Node features in GraphGPT's published form, read by graphtune (loader/feature_table_io.hpp).

Builds a dict of real torch_geometric.data.Data objects (as GraphGPT's graph_data_all.pt is),
torch.saves it, and checks that graphtune (GRAPHTUNE_FEATURE_TABLE_DRIVER, which loads a file and
dumps what it read as safetensors) reads exactly the features and labels saved: from the raw PyG
file itself (also with torch_sparse SparseTensors, numpy arrays and unlabelled nodes in it), from
scripts/convert_graphgpt_data.py's conversion, and from the plain-dict torch.save forms; and
one-line errors for malformed inputs. Exit 77 = skipped.
"""
import collections
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from safetensors.torch import load_file, save_file
    from torch_geometric.data import Data
    from graphgpt_formats import sparse_standins
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (scripts/install-deps.sh installs torch-geometric)")
    sys.exit(77)

DRIVER = os.environ.get("GRAPHTUNE_FEATURE_TABLE_DRIVER")


class Evil:  # a pickle that would run a command on torch.load
    def __reduce__(self):
        return os.system, ("echo pwned",)


SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "convert_graphgpt_data.py")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run_driver(src, dst):
    return subprocess.run([DRIVER, src, dst], capture_output=True, text=True)


def read_back(src, tmp, tag):
    dst = os.path.join(tmp, f"dump_{tag}.safetensors")
    r = run_driver(src, dst)
    check(r.returncode == 0, f"{tag}: graphtune loads {os.path.basename(src)} (rc {r.returncode}: {r.stderr.strip()})")
    return load_file(dst) if r.returncode == 0 else {}


def reads_exactly(src, tmp, tag, want_x, want_y):
    """graphtune reads every dataset's x and y exactly as saved, and nothing else."""
    got = read_back(src, tmp, tag)
    for n in want_x:
        check(same(got.get(f"{n}.x"), want_x[n]), f"{tag}: {n}.x read exactly")
    for n in want_y:
        check(same(got.get(f"{n}.y"), want_y[n]), f"{tag}: {n}.y read exactly")
    check(len(got) == len(want_x) + len(want_y), f"{tag}: nothing else read ({sorted(got)})")


def same(a, b):
    return a is not None and b is not None and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


def expect_error(src, tmp, tag, *needles):
    r = run_driver(src, os.path.join(tmp, f"never_{tag}.safetensors"))
    msg = r.stderr.strip()
    ok = r.returncode == 2 and "\n" not in msg and all(n in msg for n in needles)
    ok = ok and not os.path.exists(os.path.join(tmp, f"never_{tag}.safetensors"))
    check(ok, f"{tag}: one-line error naming {needles}: rc {r.returncode}: {msg}")


def main():
    if not DRIVER or not os.path.exists(DRIVER):
        print(f"SKIP: GRAPHTUNE_FEATURE_TABLE_DRIVER not set or missing ({DRIVER})")
        return 77
    gen = torch.Generator().manual_seed(7)
    arxiv_x = torch.randn(40, 128, generator=gen)
    arxiv_y = torch.randint(0, 40, (40, 1), generator=gen)  # ogbn-arxiv keeps labels as [N, 1]
    cora_x = torch.randn(25, 16, generator=gen, dtype=torch.float64)
    cora_y = torch.randint(0, 7, (25,), generator=gen, dtype=torch.int32)
    pubmed_x = torch.randn(12, 8, generator=gen).half()  # no labels
    ei = torch.tensor([[0, 1, 2], [1, 2, 0]])
    pyg = {
        "arxiv": Data(x=arxiv_x, y=arxiv_y, edge_index=ei, train_mask=torch.ones(40, dtype=torch.bool)),
        "cora": Data(x=cora_x, y=cora_y, edge_index=ei),
        "pubmed": Data(x=pubmed_x, edge_index=ei),
    }
    want_x = {"arxiv": arxiv_x, "cora": cora_x.float(), "pubmed": pubmed_x.float()}
    want_y = {"arxiv": arxiv_y.reshape(-1), "cora": cora_y.long()}

    with tempfile.TemporaryDirectory(prefix="gt_features_") as tmp:
        raw = os.path.join(tmp, "graph_data_all.pt")
        torch.save(pyg, raw)
        # The raw PyG file, as GraphGPT ships it: graphtune reads it directly.
        reads_exactly(raw, tmp, "raw PyG file", want_x, want_y)

        # graph_data_all.pt's other shapes: edge_index and adj_t as torch_sparse SparseTensors,
        # numpy masks and years, unlabelled nodes (-1), an OrderedDict around it. torch_sparse is
        # not installed here: stand-ins of its two classes are pickled as torch_sparse pickles
        # them (NEWOBJ of torch_sparse.tensor.SparseTensor, its __dict__ with a SparseStorage).
        gg = os.path.join(tmp, "graphgpt_like.pt")
        y_unlabelled = arxiv_y.clone()
        y_unlabelled[:5] = -1
        with sparse_standins() as SparseTensor:
            d = Data(x=arxiv_x, y=y_unlabelled)
            d.edge_index = SparseTensor(ei[0], ei[1], (40, 40))
            d.adj_t = SparseTensor(ei[1], ei[0], (40, 40))
            d.train_mask = np.ones(40, dtype=bool)
            d.node_year = np.arange(40, dtype=np.int64).reshape(40, 1) + 1990
            d.num_nodes = 40
            torch.save(collections.OrderedDict(arxiv=d, cora=pyg["cora"]), gg)
        got = read_back(gg, tmp, "GraphGPT-like PyG file")
        check(same(got.get("arxiv.x"), arxiv_x) and same(got.get("arxiv.y"), y_unlabelled.reshape(-1))
              and same(got.get("cora.x"), want_x["cora"]) and len(got) == 4,
              f"GraphGPT-like PyG file (SparseTensors, numpy, unlabelled nodes): x and y read exactly ({sorted(got)})")

        # The conversion a user runs once, then graphtune reads exactly what was saved.
        conv = os.path.join(tmp, "graph_data_all.safetensors")
        r = subprocess.run([sys.executable, SCRIPT, raw, conv], capture_output=True, text=True)
        check(r.returncode == 0, f"convert_graphgpt_data.py runs (rc {r.returncode}: {r.stderr.strip()})")
        if r.returncode == 0:
            st = load_file(conv)
            check(sorted(st) == ["arxiv.x", "arxiv.y", "cora.x", "cora.y", "pubmed.x"], f"converted keys {sorted(st)}")
            check(all(st[f"{n}.x"].dtype == torch.float32 for n in want_x) and
                  all(st[f"{n}.y"].dtype == torch.int64 for n in want_y), "converted dtypes float32 / int64")
            reads_exactly(conv, tmp, "converted", want_x, want_y)

        # The plain-dict torch.save forms: {name: {"x", "y"}} and {name: Tensor}.
        plain = os.path.join(tmp, "plain.pt")
        torch.save({"arxiv": {"x": arxiv_x, "y": arxiv_y, "edge_index": ei}, "cora": {"x": cora_x, "y": cora_y},
                    "pubmed": pubmed_x}, plain)
        reads_exactly(plain, tmp, "plain dict", want_x, want_y)

        # Hand-written safetensors in the layout, with a name containing a dot.
        hand = os.path.join(tmp, "hand.safetensors")
        save_file({"ogbn.arxiv.x": arxiv_x, "ogbn.arxiv.y": arxiv_y.reshape(-1)}, hand)
        got = read_back(hand, tmp, "hand safetensors")
        check(same(got.get("ogbn.arxiv.x"), arxiv_x) and same(got.get("ogbn.arxiv.y"), arxiv_y.reshape(-1)),
              "hand safetensors: dataset 'ogbn.arxiv' read exactly")

        # Malformed inputs: one line naming the file and the key.
        bad = os.path.join(tmp, "bad_y.safetensors")
        save_file({"cora.x": torch.zeros(3, 2), "cora.y": torch.zeros(4, dtype=torch.int64)}, bad)
        expect_error(bad, tmp, "label count", "bad_y.safetensors", "cora.y", "4 labels for 3")
        bad = os.path.join(tmp, "bad_name.safetensors")
        save_file({"cora.x": torch.zeros(3, 2), "cora.features": torch.zeros(3)}, bad)
        expect_error(bad, tmp, "unknown tensor", "bad_name.safetensors", "cora.features")
        bad = os.path.join(tmp, "bad_x.pt")
        torch.save({"cora": {"x": torch.zeros(3), "y": torch.zeros(3, dtype=torch.int64)}}, bad)
        expect_error(bad, tmp, "1-D features", "bad_x.pt", "cora.x", "2-D")
        bad = os.path.join(tmp, "int_x.pt")
        torch.save({"cora": torch.zeros(3, 2, dtype=torch.int64)}, bad)
        expect_error(bad, tmp, "integer features", "int_x.pt", "'cora'", "floating")
        bad = os.path.join(tmp, "float_y.pt")
        torch.save({"cora": {"x": torch.zeros(3, 2), "y": torch.zeros(3)}}, bad)
        expect_error(bad, tmp, "float labels", "float_y.pt", "cora.y", "integers")
        bad = os.path.join(tmp, "no_x.pt")
        torch.save({"cora": {"y": torch.zeros(3, dtype=torch.int64)}}, bad)
        expect_error(bad, tmp, "missing x", "no_x.pt", "'cora'", "no 'x'")
        bad = os.path.join(tmp, "x_numpy.pt")
        torch.save({"cora": {"x": np.zeros((3, 2), dtype=np.float32)}}, bad)
        expect_error(bad, tmp, "numpy features", "x_numpy.pt", "cora.x", "numpy.ndarray object, not a tensor")
        bad = os.path.join(tmp, "os_system.pt")
        torch.save({"cora": Evil()}, bad)
        expect_error(bad, tmp, "a pickle that calls os.system", "os_system.pt", "unknown global 'posix.system'")

        # The converter's own errors are one line too.
        r = subprocess.run([sys.executable, SCRIPT, os.path.join(tmp, "float_y.pt"), os.path.join(tmp, "o.safetensors")],
                           capture_output=True, text=True)
        check(r.returncode == 2 and "cora.y" in r.stderr and r.stderr.count("\n") == 1
              and not os.path.exists(os.path.join(tmp, "o.safetensors")),
              f"converter: one-line error for float labels: {r.stderr.strip()}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all feature-table checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
