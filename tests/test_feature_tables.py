"""Node features in GraphGPT's published form, read by graphtune (loader/feature_table_io.hpp).

Builds a dict of real torch_geometric.data.Data objects (as GraphGPT's graph_data_all.pt is),
torch.saves it, converts it with scripts/convert_graphgpt_data.py, and checks that graphtune
(GRAPHTUNE_FEATURE_TABLE_DRIVER, which loads a file and dumps what it read as safetensors) reads
exactly the features and labels saved; also the plain-dict torch.save forms, and one-line errors
for the raw PyG file and malformed inputs. Exit 77 = skipped.
"""
import collections
import os
import subprocess
import sys
import tempfile

try:
    import torch
    from safetensors.torch import load_file, save_file
    from torch_geometric.data import Data
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e} (scripts/install-deps.sh installs torch-geometric)")
    sys.exit(77)

DRIVER = os.environ.get("GRAPHTUNE_FEATURE_TABLE_DRIVER")
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
        # The raw PyG file: graphtune says how to convert it.
        expect_error(raw, tmp, "raw PyG file", "graph_data_all.pt", "torch_geometric", "convert_graphgpt_data.py")

        # The conversion a user runs once, then graphtune reads exactly what was saved.
        conv = os.path.join(tmp, "graph_data_all.safetensors")
        r = subprocess.run([sys.executable, SCRIPT, raw, conv], capture_output=True, text=True)
        check(r.returncode == 0, f"convert_graphgpt_data.py runs (rc {r.returncode}: {r.stderr.strip()})")
        if r.returncode == 0:
            st = load_file(conv)
            check(sorted(st) == ["arxiv.x", "arxiv.y", "cora.x", "cora.y", "pubmed.x"], f"converted keys {sorted(st)}")
            check(all(st[f"{n}.x"].dtype == torch.float32 for n in want_x) and
                  all(st[f"{n}.y"].dtype == torch.int64 for n in want_y), "converted dtypes float32 / int64")
            got = read_back(conv, tmp, "converted")
            for n in want_x:
                check(same(got.get(f"{n}.x"), want_x[n]), f"converted: {n}.x read exactly")
            for n in want_y:
                check(same(got.get(f"{n}.y"), want_y[n]), f"converted: {n}.y read exactly")
            check("pubmed.y" not in got and len(got) == 5, f"converted: nothing else read ({sorted(got)})")

        # The plain-dict torch.save forms: {name: {"x", "y"}} and {name: Tensor}.
        plain = os.path.join(tmp, "plain.pt")
        torch.save({"arxiv": {"x": arxiv_x, "y": arxiv_y, "edge_index": ei}, "cora": {"x": cora_x, "y": cora_y},
                    "pubmed": pubmed_x}, plain)
        got = read_back(plain, tmp, "plain dict")
        for n in want_x:
            check(same(got.get(f"{n}.x"), want_x[n]), f"plain dict: {n}.x read exactly")
        for n in want_y:
            check(same(got.get(f"{n}.y"), want_y[n]), f"plain dict: {n}.y read exactly")
        check(len(got) == 5, f"plain dict: nothing else read ({sorted(got)})")

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
        bad = os.path.join(tmp, "ordered.pt")
        torch.save(collections.OrderedDict(cora=torch.zeros(3, 2)), bad)
        expect_error(bad, tmp, "OrderedDict", "ordered.pt", "OrderedDict")

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
