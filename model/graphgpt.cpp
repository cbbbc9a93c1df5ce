#include "model/graphgpt.hpp"

#include <torch/torch.h>

#include "common/error.hpp"
#include "model/graph_splice.hpp"
#include "model/host_to_device.hpp"

namespace gt {

int64_t GraphGptBatch::num_tokens() const { return attention_mask.sum().item<int64_t>(); }

GraphGptImpl::GraphGptImpl(Llama llm_, GraphEncoder encoder_, GraphProjector projector_, GraphTokenIds ids)
    : llm(register_module("llm", std::move(llm_))),
      encoder(register_module("encoder", std::move(encoder_))),
      projector(register_module("projector", std::move(projector_))),
      ids_(ids) {
  const int64_t vocab = llm->config().vocab_size;
  for (int64_t id : {ids.patch, ids.start, ids.end})
    if (id < 0 || id >= vocab)
      fail("model", "graph token id " + std::to_string(id) + " is outside the vocabulary of " + std::to_string(vocab) +
                        " (were <g_patch>, <g_start>, <g_end> added?)");
  if (projector->graph_hidden() != encoder->config().gnn_output)
    fail("model", "projector input " + std::to_string(projector->graph_hidden()) + " != graph encoder output " +
                      std::to_string(encoder->config().gnn_output));
  if (projector->llm_dim() != llm->config().dim)
    fail("model", "projector output " + std::to_string(projector->llm_dim()) + " != LLM hidden size " +
                      std::to_string(llm->config().dim));
  torch::NoGradGuard ng;
  // Seeded from the table; a pipeline stage without it never uses them (stage 0 does).
  const auto& emb = llm->embedding_weight();
  graph_token_rows_ = register_parameter(
      "graph_token_rows", emb.numel() > 0 ? torch::stack({emb[ids.start], emb[ids.end]}).to(torch::kFloat32)
                                          : torch::zeros({2, llm->config().dim}, torch::kFloat32));
}

void GraphGptImpl::freeze_for_graph_tuning() {
  for (auto& p : llm->parameters()) p.set_requires_grad(false);
  for (auto& p : encoder->parameters()) p.set_requires_grad(false);
  for (auto& p : trainable_parameters()) p.set_requires_grad(true);
  encoder->eval();
}

void GraphGptImpl::train_encoder() {
  for (auto& p : encoder->parameters()) p.set_requires_grad(true);
  encoder_trained_ = true;
}

std::vector<torch::Tensor> GraphGptImpl::trainable_parameters() {
  std::vector<torch::Tensor> out = projector->parameters();
  out.push_back(graph_token_rows_);
  return out;
}

torch::Tensor GraphGptImpl::embed(const GraphGptBatch& batch) {
  const auto& ids = batch.input_ids;
  // Text rows come from the embedding table (bf16 when frozen for bf16 training), graph tokens
  // and <g_start>/<g_end> from trainable fp32 master weights: combine them in the wider dtype, so
  // the learned parts are not rounded to bf16 before the first layer and the residual stream is
  // fp32, as autocast expects (it casts each matmul's inputs itself). All-bf16 stays bf16.
  const auto dtype = c10::promoteTypes(llm->embedding_weight().scalar_type(), projector->weight().scalar_type());
  auto x = llm->embed(ids).to(dtype);
  // <g_start> / <g_end> from their own rows: where the id matches, take the learned row.
  auto rows = graph_token_rows_.to(x.scalar_type());
  auto is_start = (ids == ids_.start).unsqueeze(-1), is_end = (ids == ids_.end).unsqueeze(-1);
  x = torch::where(is_start, rows[0], torch::where(is_end, rows[1], x));

  std::vector<GraphSlot> slots;
  slots.reserve(batch.graphs.size());
  for (const GraphInput& g : batch.graphs) {
    if (!batch.checked) check_graph(batch, g);
    torch::Tensor nodes;
    if (encoder_trained_) {
      nodes = encoder->forward(g.x, g.edge_index, batch.checked, g.dropout_seed);
    } else {
      // The encoder is frozen and runs without gradient, as in the reference.
      torch::NoGradGuard ng;
      nodes = encoder->forward(g.x, g.edge_index, batch.checked, g.dropout_seed);
    }
    auto tokens = projection_ ? projection_(nodes) : projector->forward(nodes);
    slots.push_back({g.row, g.start, tokens.to(x.scalar_type())});
  }
  return slots.empty() ? x : splice_graph_tokens(x, slots);
}

namespace {
std::string record_of(const GraphGptBatch& batch, const GraphInput& g) {
  const int64_t r = g.record >= 0 ? g.record : g.row;
  return "record " + (r < static_cast<int64_t>(batch.ids.size()) ? batch.ids[r] : "?");
}
}  // namespace

void GraphGptImpl::check_graph(const GraphGptBatch& batch, const GraphInput& g) const {
  const torch::Tensor& ids = batch.input_ids;
  const int64_t n = g.x.size(0);
  const std::string where = record_of(batch, g);
  if (g.start < 0 || g.start + n > ids.size(1))
    fail(where, "graph of " + std::to_string(n) + " nodes does not fit at position " + std::to_string(g.start));
  if (!(ids[g.row].narrow(0, g.start, n) == ids_.patch).all().item<bool>())
    fail(where, "the " + std::to_string(n) + " positions from " + std::to_string(g.start) +
                    " are not all <g_patch> tokens (graph and prompt disagree)");
}

GraphGptBatch GraphGptImpl::prepare(const GraphGptBatch& batch, const torch::Device& device) const {
  GraphGptBatch out = batch;
  for (GraphInput& g : out.graphs) {
    check_graph(batch, g);
    g.edge_index = checked_edge_index(g.edge_index, g.x.size(0), torch::kCPU, record_of(batch, g));
    g.x = host_to_device(g.x, device);
    g.edge_index = host_to_device(g.edge_index, device);
  }
  out.input_ids = host_to_device(batch.input_ids, device);
  out.checked = true;
  return out;
}

torch::Tensor GraphGptImpl::forward(const GraphGptBatch& batch) {
  return llm->forward_embeds(embed(batch), batch.attention_mask);
}

torch::Tensor GraphGptImpl::loss(const GraphGptBatch& batch) { return causal_lm_loss(forward(batch), batch.labels); }

std::vector<std::pair<std::string, torch::Tensor>> GraphGptImpl::token_rows() const {
  return {{"g_start", graph_token_rows_[0].detach().clone()}, {"g_end", graph_token_rows_[1].detach().clone()}};
}

void GraphGptImpl::load_token_rows(const std::map<std::string, torch::Tensor>& rows, const std::string& source) {
  torch::NoGradGuard ng;
  int64_t k = 0;
  for (const char* name : {"g_start", "g_end"}) {
    auto it = rows.find(name);
    if (it == rows.end()) fail(source, std::string("missing tensor '") + name + "'");
    if (it->second.dim() != 1 || it->second.size(0) != graph_token_rows_.size(1))
      fail(source, std::string("tensor '") + name + "' must have shape [" + std::to_string(graph_token_rows_.size(1)) + "]");
    graph_token_rows_[k++].copy_(it->second);
  }
}

torch::Tensor GraphGptImpl::merged_embedding() const {
  torch::NoGradGuard ng;
  // In the table's dtype: fp32 rows are rounded into a bf16 table by copy_.
  auto w = llm->embedding_weight().detach().clone();
  w[ids_.start].copy_(graph_token_rows_[0]);
  w[ids_.end].copy_(graph_token_rows_[1]);
  return w;
}

}  // namespace gt
