#!/usr/bin/env python3
"""The frozen LLM's share of a GraphGPT training step in plain PyTorch: transformers'
LlamaForCausalLM from a Hugging Face folder, its weights frozen, a batch of rows whose input
embeddings require a gradient (what the graph tokens are), the loss over the last `--learned`
positions of each row, backward to the embeddings. No padding and no graph encoder: the
reference's best case for the same tokens, what bench/layer_shape_step.sh sets graphtune beside.

Prints one line: `llm_step: device D dtype T batch BxS median_step_s X tokens_per_s R peak_mib M`.

  llm_step.py --llm FOLDER --batch 8 --seq 700 [--learned 64] [--steps 6] [--warmup 2]
              [--device cuda] [--dtype bf16] [--attn sdpa]
"""
import argparse
import statistics
import sys
import time

import torch


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--llm", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--learned", type=int, default=64, help="positions with a loss, at each row's end")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"])
    p.add_argument("--attn", default="sdpa", choices=["eager", "sdpa"])
    a = p.parse_args(argv)

    import transformers
    from transformers import LlamaForCausalLM
    transformers.logging.set_verbosity_error()
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    dev = torch.device(a.device)
    llm = LlamaForCausalLM.from_pretrained(a.llm, dtype=dtype, attn_implementation=a.attn).to(dev).eval()
    for w in llm.parameters():
        w.requires_grad_(False)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, llm.config.vocab_size, (a.batch, a.seq), generator=g).to(dev)
    labels = torch.full_like(ids, -100)
    labels[:, -a.learned:] = ids[:, -a.learned:]
    base = llm.get_input_embeddings()(ids).detach()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    def step():
        embeds = base.clone().requires_grad_(True)
        out = llm(inputs_embeds=embeds, labels=labels)
        out.loss.backward()
        sync()
        return embeds.grad

    for _ in range(a.warmup):
        step()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(a.steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    peak = torch.cuda.max_memory_allocated() / 2**20 if dev.type == "cuda" else float("nan")
    print(f"llm_step: device {a.device} dtype {a.dtype} batch {a.batch}x{a.seq} median_step_s {med:.4f} "
          f"tokens_per_s {a.batch * a.seq / med:.1f} peak_mib {peak:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
