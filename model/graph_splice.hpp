#pragma once
// Splicing graph tokens into a prompt's embeddings, as GraphGPT does after the embedding lookup:
// the N `<g_patch>` positions of a graph are overwritten with projector(graph_encoder(subgraph)),
// one token per node, node 0 (the centre node) first. Unlike the reference, which splices only
// the last graph of a prompt, every graph of a prompt is spliced (link prediction has two).
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace gt {

struct GraphSlot {
  int64_t batch_row = 0;     // which prompt of the batch
  int64_t start = 0;         // first overwritten position
  torch::Tensor node_embeds; // [N, D] projected node embeddings: positions [start, start + N)
};

// Out of place: returns a new [B, T, D] tensor equal to token_embeds except at the slots'
// positions. Gradients flow to every slot's node_embeds and to the token embeddings that are
// not overwritten (the overwritten ones get zero). node_embeds are converted to token_embeds'
// dtype and device. InputError on a row or range outside the tensor, a width other than D, or
// two slots that overlap.
torch::Tensor splice_graph_tokens(const torch::Tensor& token_embeds, const std::vector<GraphSlot>& slots);

// A maximal run of `patch_token_id` in a row of token ids.
struct PatchRun {
  int64_t batch_row = 0;
  int64_t start = 0;
  int64_t length = 0;
};
// Every run of patch_token_id in tokens [B, T], by row then position: a prompt with two graphs
// gives two runs (provided a non-patch token such as <g_end> separates them).
std::vector<PatchRun> find_patch_runs(const torch::Tensor& tokens, int64_t patch_token_id);

}  // namespace gt
