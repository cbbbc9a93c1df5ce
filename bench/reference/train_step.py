#!/usr/bin/env python3
"""Speed of GraphGPT's training step in the PyTorch reference (graphgpt_reference.py), one
process or DDP under torchrun, on the batches graphtune's tests/graphgpt_reference_driver wrote.

The step is graphtune's graph step: the frozen LLM (transformers' LlamaForCausalLM) and graph
encoder, the projector and the <g_start>/<g_end> rows trained with torch.optim.AdamW (betas
0.9/0.95, weight decay 0: graphtune's defaults), the gradient norm clipped at --max-grad-norm
(graphtune computes it every step). Each --dir is one batch (a driver run); the steps take them
in turn, so a spread of lengths is what is timed, as GraphGPT draws batches: in random order,
each padded to its longest record. The weights are the first batch's.

With --flatten, each batch goes through transformers' own padding-free collator
(DataCollatorWithFlattening): its records back to back in one row, position ids restarting at
each, no attention mask (transformers keeps each record to itself from the position ids), the
graphs moved to their records' places. The first batch's loss is checked against the padded
one's before anything is timed.

Under torchrun (WORLD_SIZE > 1): DDP with gloo; rank r takes rows [r*B/W, (r+1)*B/W) of each
batch with trailing all-padding columns cut, as graphtune's data-parallel replicas pad only
their own share; the loss is scaled so DDP's mean of gradients is the gradient of the whole
batch's loss (summed over learned positions, over the global count: graphtune's).

tokens/s counts the batches' real tokens (attention_mask == 1, all ranks together) over the
timed steps' time, as graphtune's train_log.jsonl counts them (GraphGptBatch::num_tokens). Prints
one line `train_step: procs P threads T steps N ... tokens_per_s R records_per_s Q` on rank 0
(bench/reference_speed.sh reads it), and with --profile torch profiler's table of the most
expensive operators over one more step after them.

  train_step.py --llm HF_FOLDER --dir DRIVER_OUT [DRIVER_OUT ...] [--flatten] [--steps 8] [--warmup 2] [--threads 2]
  torchrun --nproc_per_node 2 train_step.py --llm ... --dir ... --threads 1
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import graphgpt_reference as ref  # noqa: E402


def rows_of(dump, rank, world):
    """This rank's share of the batch: its rows, padding columns cut, graphs re-indexed."""
    b = dump["input_ids"].shape[0]
    if b % world:
        raise SystemExit(f"train_step: batch of {b} rows does not split over {world} ranks")
    lo, hi = rank * b // world, (rank + 1) * b // world
    mask = dump["attention_mask"][lo:hi]
    t = int(mask.sum(1).max())  # right padding: columns past the longest row are padding only
    graphs = [(r - lo, s, x, e) for r, s, x, e in ref.graphs_of(dump) if lo <= r < hi]
    return dump["input_ids"][lo:hi, :t], mask[:, :t], dump["labels"][lo:hi, :t], graphs


def learned(labels):
    return int((labels[:, 1:] != -100).sum())  # transformers shifts labels by one


def flattened(ids, mask, labels, graphs):
    """The rows as DataCollatorWithFlattening packs them, and the graphs at their new places."""
    from transformers import DataCollatorWithFlattening

    lengths = mask.sum(1).tolist()
    rows = [{"input_ids": ids[r, :n].tolist(), "labels": labels[r, :n].tolist()} for r, n in enumerate(lengths)]
    batch = DataCollatorWithFlattening(return_tensors="pt")(rows)
    offset = [sum(lengths[:r]) for r in range(len(lengths))]
    moved = [(0, offset[r] + s, x, e) for r, s, x, e in graphs]
    return batch["input_ids"], batch["labels"], batch["position_ids"], moved


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llm", required=True, help="the job's Hugging Face LLM folder")
    p.add_argument("--dir", required=True, nargs="+", help="folders graphgpt_reference_driver wrote, a batch each")
    p.add_argument("--flatten", action="store_true", help="transformers' DataCollatorWithFlattening instead of padding")
    p.add_argument("--steps", type=int, default=8, help="timed steps")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps first")
    p.add_argument("--threads", type=int, default=2, help="torch intra-op threads per process")
    p.add_argument("--heads", type=int, default=8, help="graph encoder heads")
    p.add_argument("--attn", default="sdpa", choices=["eager", "sdpa"],
                   help="transformers' attention (sdpa: its default)")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--max-grad-norm", type=float, default=1.0)
    p.add_argument("--profile", type=int, default=0, help="print the N most expensive operators")
    a = p.parse_args(argv)

    torch.set_num_threads(a.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        dist.init_process_group("gloo")

    import transformers
    transformers.logging.set_verbosity_error()
    dumps = [load_file(f"{d}/graphtune.safetensors") for d in a.dir]
    token_ids = dumps[0]["token_ids"].tolist()
    first = a.dir[0]
    llm = ref.load_llm(a.llm, max(token_ids) + 1, a.attn)
    model = ref.GraphGpt(llm, ref.graph_encoder_file(f"{first}/graph_encoder.safetensors", a.heads),
                         load_file(f"{first}/graph_projector.safetensors"),
                         load_file(f"{first}/graph_tokens.safetensors"), token_ids)
    model.train()
    model.llm.eval()  # no dropout in LLaMA anyway; the encoder is eval by construction
    params = [model.projector.weight, model.projector.bias, model.token_rows]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    batches = []
    for dump in dumps:
        ids, mask, labels, graphs = rows_of(dump, rank, world)
        # transformers' loss is the mean over this rank's learned positions; DDP then averages
        # over ranks. Scaled so the result is the sum over all learned positions over their
        # global count.
        scale = learned(labels) * world / max(1, learned(dump["labels"]))
        if a.flatten:
            ids, labels, positions, graphs = flattened(ids, mask, labels, graphs)
            batches.append(dict(input_ids=ids, attention_mask=None, graphs=graphs, labels=labels,
                                position_ids=positions, scale=scale))
        else:
            batches.append(dict(input_ids=ids, attention_mask=mask, graphs=graphs, labels=labels, scale=scale))
    if a.flatten:  # the collator must give the padded batch's loss, or the row would time something else
        with torch.no_grad():
            ids, mask, labels, graphs = rows_of(dumps[0], rank, world)
            padded = model(ids, mask, graphs, labels=labels).loss.item()
            b = batches[0]
            packed = model(b["input_ids"], None, b["graphs"], labels=b["labels"], position_ids=b["position_ids"]).loss.item()
        if abs(packed - padded) > 1e-5 * max(1.0, abs(padded)):
            raise SystemExit(f"train_step: DataCollatorWithFlattening's loss {packed} differs from the padded {padded}")
    net = model
    if world > 1:
        # The encoder's weights are buffers and constant: nothing to broadcast every forward.
        net = torch.nn.parallel.DistributedDataParallel(model, broadcast_buffers=False)
    turn = [0]

    def step():
        b = batches[turn[0] % len(batches)]
        turn[0] += 1
        opt.zero_grad(set_to_none=True)
        out = net(b["input_ids"], b["attention_mask"], b["graphs"], labels=b["labels"], position_ids=b.get("position_ids"))
        (out.loss * b["scale"]).backward()
        torch.nn.utils.clip_grad_norm_(params, a.max_grad_norm)
        opt.step()
        return out.loss.item()

    for _ in range(a.warmup):
        step()
    times, tokens, records = [], 0, 0
    for _ in range(a.steps):
        dump = dumps[turn[0] % len(dumps)]
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
        tokens += int(dump["attention_mask"].sum())
        records += dump["input_ids"].shape[0]
    prof = None
    if a.profile:  # after the timed steps: the profiler's overhead is not in the rate
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            step()
    # The steps' time is the slowest rank's (the all-reduce makes them wait for each other anyway).
    total = torch.tensor([sum(times)], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(total, op=dist.ReduceOp.MAX)
    if rank == 0:
        b, t = dumps[0]["input_ids"].shape
        print(f"train_step: procs {world} threads {a.threads} steps {a.steps} batches {len(dumps)} first {b}x{t}"
              f" {'flattened' if a.flatten else 'padded'} median_step_s {statistics.median(times):.4f}"
              f" tokens_per_s {tokens / total.item():.1f} records_per_s {records / total.item():.3f}", flush=True)
        if prof is not None:
            print("profile of one more step:")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.profile), flush=True)
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
