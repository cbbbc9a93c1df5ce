#!/usr/bin/env python3
"""Speed of GraphGPT's training step in the PyTorch reference (graphgpt_reference.py), one
process or DDP under torchrun, on the batch graphtune's tests/graphgpt_reference_driver wrote.

The step is graphtune's graph_matching step: the frozen LLM (transformers' LlamaForCausalLM)
and graph encoder, the projector and the <g_start>/<g_end> rows trained with torch.optim.AdamW
(betas 0.9/0.95, weight decay 0: graphtune's defaults), the gradient norm
clipped at --max-grad-norm (graphtune computes it every step). The same batch is run every
step: the rate is what is compared, and a fixed batch keeps data preparation out of it.

Under torchrun (WORLD_SIZE > 1): DDP with gloo; rank r takes rows [r*B/W, (r+1)*B/W) of the
batch with trailing all-padding columns cut, as graphtune's data-parallel replicas pad only
their own share; the loss is scaled so DDP's mean of gradients is the gradient of the whole
batch's loss (summed over learned positions, over the global count: graphtune's).

tokens/s counts the batch's real tokens (attention_mask == 1, all ranks together) per median
step, as graphtune's train_log.jsonl does (GraphGptBatch::num_tokens, all-reduced over dp).
Prints one line `train_step: procs P threads T steps N median_step_s S tokens_per_step K
tokens_per_s R` on rank 0 (bench/reference_speed.sh reads it), and with --profile torch
profiler's table of the most expensive operators over one more step after them.

  train_step.py --llm HF_FOLDER --dir DRIVER_OUT [--steps 8] [--warmup 2] [--threads 2]
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llm", required=True, help="the job's Hugging Face LLM folder")
    p.add_argument("--dir", required=True, help="the folder graphgpt_reference_driver wrote")
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
    dump = load_file(f"{a.dir}/graphtune.safetensors")
    token_ids = dump["token_ids"].tolist()
    llm = ref.load_llm(a.llm, max(token_ids) + 1, a.attn)
    model = ref.GraphGpt(llm, ref.GraphTransformer(load_file(f"{a.dir}/graph_encoder.safetensors"), a.heads),
                         load_file(f"{a.dir}/graph_projector.safetensors"),
                         load_file(f"{a.dir}/graph_tokens.safetensors"), token_ids)
    model.train()
    model.llm.eval()  # no dropout in LLaMA anyway; the encoder is eval by construction
    params = [model.projector.weight, model.projector.bias, model.token_rows]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0)
    ids, mask, labels, graphs = rows_of(dump, rank, world)
    # transformers' loss is the mean over this rank's learned positions; DDP then averages over
    # ranks. Scaled so the result is the sum over all learned positions over their global count.
    scale = learned(labels) * world / max(1, learned(dump["labels"]))
    net = model
    if world > 1:
        # The encoder's weights are buffers and constant: nothing to broadcast every forward.
        net = torch.nn.parallel.DistributedDataParallel(model, broadcast_buffers=False)

    def step():
        opt.zero_grad(set_to_none=True)
        out = net(ids, mask, graphs, labels=labels)
        (out.loss * scale).backward()
        torch.nn.utils.clip_grad_norm_(params, a.max_grad_norm)
        opt.step()
        return out.loss.item()

    for _ in range(a.warmup):
        step()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    prof = None
    if a.profile:  # after the timed steps: the profiler's overhead is not in the rate
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            step()
    # The step's time is the slowest rank's (the all-reduce makes them wait for each other anyway).
    med = torch.tensor([statistics.median(times)], dtype=torch.float64)
    if world > 1:
        dist.all_reduce(med, op=dist.ReduceOp.MAX)
    tokens = int(dump["attention_mask"].sum())
    if rank == 0:
        b, t = dump["input_ids"].shape
        print(f"train_step: procs {world} threads {a.threads} steps {a.steps} batch {b}x{t} local {ids.shape[0]}x{ids.shape[1]}"
              f" median_step_s {med.item():.4f} tokens_per_step {tokens} tokens_per_s {tokens / med.item():.1f}",
              flush=True)
        if prof is not None:
            print("profile of one more step:")
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=a.profile), flush=True)
    if world > 1:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
