#pragma once
// GraphGPT as one module: the LLaMA decoder, the graph encoder and the projector. Graph tokens:
// each "<graph>" of a prompt became <g_start> <g_patch>xN <g_end> (data/conversation.hpp); here
// the N patch positions are overwritten with projector(encoder(subgraph)), one token per node,
// node 0 the centre. Every graph of a prompt is spliced (the reference splices only the last).
//
// What trains (GraphGPT's tune_graph_mlp_adapter): the projector and the <g_start>/<g_end>
// embedding rows; the LLM and the encoder are frozen, the encoder runs without gradient, but
// the gradient flows back through every frozen LLM layer to the graph tokens. The two rows are
// held as their own small parameter (graph_token_rows) rather than by masking the gradient of
// the whole embedding matrix, so weight decay and the optimizer state touch only them; export
// writes them back into the embedding matrix.
#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/graph_encoder.hpp"
#include "model/graph_projector.hpp"
#include "model/llama.hpp"

namespace gt {

// One sampled subgraph placed in a batch: its node features and local edges, and where its
// <g_patch> run starts.
struct GraphInput {
  int64_t row = 0;           // batch row
  int64_t start = 0;         // position of its first <g_patch>
  torch::Tensor x;           // [N, gnn_input] float32 node features, node 0 = the centre
  torch::Tensor edge_index;  // [2, E] int64, local positions into the N nodes
  // What the encoder's dropout mask is drawn from when it trains with dropout: set by the batch
  // stream from the run's seed, the global batch and the record, so every layout draws the
  // masks one process draws (loader/graph_batches.hpp).
  std::optional<uint64_t> dropout_seed;
  int64_t record = -1;  // a packed batch's: the record (index into ids) it belongs to
};

// A right-padded batch. labels are -100 where no loss is taken (padding included). Or a packed
// one (loader/packed_batch.hpp): the records back to back in one row, `packed` their lengths.
struct GraphGptBatch {
  torch::Tensor input_ids;       // [B, T] int64
  torch::Tensor labels;          // [B, T] int64
  torch::Tensor attention_mask;  // [B, T] int64: 1 real token, 0 padding
  std::vector<GraphInput> graphs;
  std::vector<std::string> ids;  // record ids, for messages
  PackedRecords packed;          // packed: the records' layout in the row; empty: a row each
  // Every graph's span and edges were checked on the host (GraphGptImpl::prepare), so embed does
  // not read them back from the device to check them again.
  bool checked = false;
  int64_t num_tokens() const;    // real tokens
};

struct GraphTokenIds {
  int64_t patch = -1, start = -1, end = -1;
};

class GraphGptImpl : public torch::nn::Module {
 public:
  GraphGptImpl(Llama llm, GraphEncoder encoder, GraphProjector projector, GraphTokenIds ids);

  // Token embeddings [B, T, D] with <g_start>/<g_end> rows from graph_token_rows and every
  // graph spliced in. Checks each graph's span holds <g_patch> ids (InputError naming the record).
  torch::Tensor embed(const GraphGptBatch& batch);
  // `batch` (on the host) as embed reads it on `device`: each graph checked here, where that costs
  // no wait for the device, then the token ids and graphs copied there without blocking the host
  // (model/host_to_device.hpp). The labels and the padding mask stay on the host, where the
  // decoder finds the learned positions and the padding without waiting for the device. On the
  // CPU, the same tensors, checked.
  GraphGptBatch prepare(const GraphGptBatch& batch, const torch::Device& device) const;
  torch::Tensor forward(const GraphGptBatch& batch);  // logits [B, T, V] float32
  torch::Tensor loss(const GraphGptBatch& batch);     // mean over learned positions

  // GraphGPT's trainable set: projector weight and bias, and the two token rows.
  std::vector<torch::Tensor> trainable_parameters();
  // The trainable token rows alone ([2, D]: <g_start>, <g_end>).
  const torch::Tensor& graph_token_rows() const { return graph_token_rows_; }

  // Graph tokens from `projection` instead of the projector module: a tensor-parallel projector
  // (parallel/tensor_parallel.hpp) holds its own weight shards. Must map [N, gnn_output] to
  // [N, dim] as the projector would.
  using Projection = std::function<torch::Tensor(const torch::Tensor& nodes)>;
  void use_projection(Projection projection) { projection_ = std::move(projection); }
  // Frozen LLM and encoder, trainable projector and token rows (call after loading weights).
  void freeze_for_graph_tuning();
  // The encoder trained too, end to end through the frozen LLM: its parameters require grad and
  // it runs with gradient (after freeze_for_graph_tuning).
  void train_encoder();
  bool encoder_trained() const { return encoder_trained_; }

  // The embedding matrix with the two learned rows written back (for export).
  torch::Tensor merged_embedding() const;
  // The two learned rows as {"g_start", [D]}, {"g_end", [D]}, and reading them back (names and
  // shapes checked, errors naming `source`).
  std::vector<std::pair<std::string, torch::Tensor>> token_rows() const;
  void load_token_rows(const std::map<std::string, torch::Tensor>& rows, const std::string& source);

  Llama llm{nullptr};
  GraphEncoder encoder{nullptr};
  GraphProjector projector{nullptr};
  const GraphTokenIds& token_ids() const { return ids_; }

 private:
  // InputError naming the record when graph g's span does not fit or is not all <g_patch>.
  void check_graph(const GraphGptBatch& batch, const GraphInput& g) const;
  GraphTokenIds ids_;
  torch::Tensor graph_token_rows_;
  Projection projection_;
  bool encoder_trained_ = false;
};
TORCH_MODULE(GraphGpt);

}  // namespace gt
