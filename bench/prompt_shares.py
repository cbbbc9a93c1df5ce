#!/usr/bin/env python3
"""What share of a GraphGPT step's positions is padding and what share is the prompt prefix every
record repeats, on records as users train on them, tokenized by the LLM's own tokenizer
(SentencePiece: LLaMA's and Vicuna's tokenizer.model). Each record in GraphGPT's vicuna_v1_1
template, each <graph> as <g_start>, one <g_patch> a node of its subgraph, <g_end>; batches of
BATCH records drawn in random order and padded to their longest (as GraphGPT draws them), cut at
MAX_LEN. Prints, as shares of the padded positions: the padding; the prefix every record repeats;
what graphtune computes of them packed (no padding) with the prefix its micro-batches share
computed once a micro-batch.

  bench/prompt_shares.py RECORDS.json TOKENIZER.model [--batch 8] [--max-len 2048] [--seed 0]
"""
import argparse
import json
import random

import sentencepiece as spm

SYSTEM = ("A chat between a curious user and an artificial intelligence assistant. The assistant gives helpful, "
          "detailed, and polite answers to the user's questions.")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("records")
    ap.add_argument("tokenizer")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sp = spm.SentencePieceProcessor(model_file=a.tokenizer)
    records = json.load(open(a.records))
    lengths, prefixes = [], []
    for r in records:
        human, gpt = r["conversations"][0]["value"], r["conversations"][1]["value"]
        nodes = len(r["graph"]["node_list"]) if "node_list" in r["graph"] else r["graph"].get("num_nodes", 1)
        before, _, after = human.partition("<graph>")
        head = [sp.bos_id()] + sp.encode(f"{SYSTEM} USER: {before}".rstrip())
        rest = sp.encode(f"{after} ASSISTANT: {gpt}") + [sp.eos_id()]
        graph = (nodes + 2) * human.count("<graph>")
        lengths.append(min(len(head) + graph + len(rest), a.max_len))
        prefixes.append(head)
    common = prefixes[0]
    for p in prefixes[1:]:
        n = 0
        while n < min(len(common), len(p)) and common[n] == p[n]:
            n += 1
        common = common[:n]
    order = list(range(len(records)))
    random.Random(a.seed).shuffle(order)
    padded = real = repeated = computed = 0
    for i in range(0, len(order) - a.batch + 1, a.batch):
        batch = [lengths[j] for j in order[i:i + a.batch]]
        padded += max(batch) * len(batch)
        real += sum(batch)
        repeated += len(batch) * len(common)
        computed += sum(batch) - (len(batch) - 1) * len(common)
    pct = lambda n: f"{100 * n / padded:.1f}%"
    print(f"{len(records)} records, mean {sum(lengths) / len(lengths):.0f} tokens (longest {max(lengths)}), "
          f"the prefix every record repeats {len(common)} tokens; batches of {a.batch} in random order")
    print(f"padded: padding {pct(padded - real)} of positions, the prefix {pct(repeated)} (computed in every record)")
    print(f"graphtune, packed with the prefix once a micro-batch: computes {pct(computed)} of the padded positions "
          f"(padding {pct(padded - real)} and the repeated prefix {pct(real - computed)} left out)")


if __name__ == "__main__":
    main()
