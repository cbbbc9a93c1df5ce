#pragma once
// LLaMA decoder in libtorch: RMSNorm, rotary embeddings (with linear scaling), grouped-query
// attention, SwiGLU MLP, tied or separate output head, causal mask with right padding, and a
// KV cache for generation. Parameter names are Hugging Face's ("model.layers.0.self_attn.
// q_proj.weight", ...) so that safetensors files map one to one; rotary embeddings use
// Hugging Face's rotate-half pairing (llama2.c files are permuted at load).
#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formats/llama_config.hpp"
#include "layout/partition.hpp"
#include "model/lora.hpp"
#include "model/rope.hpp"

namespace gt {

// Keys and values of every layer for positions [0, len). Shapes [B, n_kv_heads, capacity, hd]; a
// pipeline stage's cache leaves the other stages' layers undefined.
struct KVCache {
  std::vector<torch::Tensor> k, v;
  int64_t len = 0;
  int64_t capacity() const {
    for (const auto& t : k)
      if (t.defined()) return t.size(2);
    return 0;
  }
};

// Records packed back to back in one row ([1, tokens(), dim]): attention keeps each to its own
// positions and each one's rotary positions start at 0, so each gets exactly what it would get in
// a row of its own, with no padding computed. Optionally a prefix that several of them begin with
// is packed once, first, and only their own tokens after it: each of those attends to the
// prefix's keys and values as to its own first positions, and its positions go on from the
// prefix's length, so it still gets what its whole row would. Empty: rows of their own
// (right-padded).
struct PackedRecords {
  std::vector<int64_t> lengths;    // each record's own tokens, in order
  int64_t prefix = 0;              // the shared prefix's tokens, packed first; 0: none
  std::vector<bool> after_prefix;  // per record: it begins with the prefix (empty: none does)
  bool empty() const { return lengths.empty(); }
  bool shares(size_t record) const { return record < after_prefix.size() && after_prefix[record]; }
  int64_t sharers() const;
  int64_t tokens() const;         // what the row holds: the prefix once, then each record's own
  int64_t record_tokens() const;  // what the records hold: the prefix again in each that shares it
};
// Each position's rotary position: the prefix's 0 .. prefix - 1, then each record's from 0, or
// from the prefix's length when it shares it. [1, tokens()] int64 on the host.
torch::Tensor packed_positions(const PackedRecords& packed);

// How a forward's packed records attend, worked out once for all its layers
// (model/packed_attention.hpp).
struct PackedAttention;

// The part of a model one pipeline stage holds: decoder layers [first, last) (last -1: to the
// end), the embeddings, the final norm and head. What it does not hold is never allocated: its
// names stay, as empty tensors. `dtype` is the weights' storage type and `device` where they
// are allocated (load_weights then copies each file tensor straight there); `initialise` false
// leaves them as allocated, for a model whose weights load_weights is about to copy in (the
// random initialisation of a 7B model's share takes a core most of a minute, and writes every
// page).
struct LlamaStage {
  int64_t first = 0, last = -1;
  bool embedding = true, head = true;
  torch::ScalarType dtype = torch::kFloat32;
  bool initialise = true;
  torch::Device device = torch::kCPU;
};

class LlamaImpl : public torch::nn::Module {
 public:
  explicit LlamaImpl(const LlamaConfig& cfg, const LlamaStage& stage = {});

  const LlamaConfig& config() const { return cfg_; }

  // Token ids [B, T] -> embeddings [B, T, dim]. Separate from forward so that callers can
  // overwrite positions (GraphGPT splices graph tokens here).
  torch::Tensor embed(const torch::Tensor& tokens);
  const torch::Tensor& embedding_weight() const { return embed_tokens_; }

  // Embeddings [B, T, dim] -> logits [B, T, vocab] (float32 whatever the weight dtype).
  // key_mask [B, T] (1 = real token, 0 = right padding) keeps padding out of every softmax;
  // it may be undefined when there is no padding. With a cache, the T new positions follow
  // the cache->len cached ones and are appended to it.
  // position_ids [B, T] int64 (optional) are each row's rotary positions for the T new
  // tokens; undefined means cache->len .. cache->len + T - 1 for every row. Batched decoding of
  // prompts of different lengths passes them, so that a row's token keeps its own position
  // whatever cache slot it lands in (model/graph_generate.hpp).
  torch::Tensor forward_embeds(torch::Tensor x, const torch::Tensor& key_mask = {}, KVCache* cache = nullptr,
                               const torch::Tensor& position_ids = {});
  // forward_embeds without the final norm and head: hidden states [B, T, dim]. A prefill that
  // needs each row's last position only runs the head there (the head over a vocabulary of 49k
  // is a fifth of a small model's compute, and its [B, T, vocab] logits most of the memory).
  torch::Tensor forward_hidden(torch::Tensor x, const torch::Tensor& key_mask = {}, KVCache* cache = nullptr,
                               const torch::Tensor& position_ids = {});
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& key_mask = {}, KVCache* cache = nullptr,
                        const torch::Tensor& position_ids = {});

  // A cache for decoder layers [first, last) (last -1: to the end); a pipeline stage's holds only
  // its own layers' keys and values, the others' entries stay undefined.
  KVCache new_cache(int64_t batch, int64_t capacity, int64_t first = 0, int64_t last = -1) const;
  // forward_hidden over decoder layers [first, last) only: a pipeline stage's part of a cached
  // forward (generation). x is the embeddings on the first stage, the previous stage's hidden
  // states on the others; key_mask, cache and position_ids as forward_embeds. Each stage runs
  // exactly the operations the whole model runs on its layers, so the stages together give
  // forward_hidden's result bit for bit.
  torch::Tensor forward_stage(torch::Tensor x, const torch::Tensor& key_mask, KVCache* cache,
                              const torch::Tensor& position_ids, int64_t first, int64_t last);

  // The two halves of forward_embeds, for pipeline stages (train/decoder_stage.hpp): decoder
  // layers [first, last) on hidden states [B, T, dim] (no cache; checkpointed when switched on),
  // and the final norm and head (logits float32). forward_embeds without a cache is
  // head(forward_layers(x, key_mask, 0, n_layers)) at every real position; with right padding,
  // forward_layers leaves the padded positions' outputs unmasked (they are never learned).
  // With `packed`, x is one row of packed records (PackedRecords) and key_mask is not used.
  torch::Tensor forward_layers(torch::Tensor x, const torch::Tensor& key_mask, int64_t first, int64_t last,
                               const PackedRecords& packed = {});
  torch::Tensor head(const torch::Tensor& x);

  // Frees the weights a pipeline stage does not run (layers outside [first, last), the
  // embeddings unless `keep_embedding`, the final norm and head unless `keep_head`), so a stage
  // holds only its share. Their names stay (empty tensors): named_weights() still lists them.
  void keep_only(int64_t first, int64_t last, bool keep_embedding, bool keep_head);
  // Whether this model holds the weight `name` (LlamaStage, keep_only); tied embeddings are held
  // by a stage with the head too.
  bool holds(const std::string& name) const;
  // causal_lm_loss_sum(head(x), labels), with the head run only where a label is learned. In
  // GraphGPT's phases the answer is a few tokens of a prompt of hundreds, and the head (vocabulary
  // x dim) with its log-softmax over every position was a fifth of the step's compute and most
  // of its activation memory. `labels` may stay on the host (the trainers keep them there, so
  // finding the learned positions makes the host wait for nothing).
  torch::Tensor head_loss_sum(const torch::Tensor& x, const torch::Tensor& labels);
  // The decoder layer a weight name belongs to, or -1 (embeddings, final norm, head).
  static int64_t layer_of(const std::string& name);
  // What each decoder layer and each end of a pipeline weighs in parameters (the embeddings on
  // stage 0; the final norm and the head, or a copy of the tied table, on the last), for the
  // balanced partition: of the whole model of this config, counted before any is allocated.
  static StageWeights stage_weights(const LlamaConfig& cfg);
  // The whole model's weight shapes by name, whatever this one holds (checkpoint fingerprints).
  std::map<std::string, std::vector<int64_t>> weight_shapes() const { return shapes_; }

  // Fresh weights for training from scratch: normal(0, 0.02), norms at 1; deterministic.
  void init_weights(uint64_t seed);

  // The parameters by Hugging Face name, in a stable order.
  std::vector<std::pair<std::string, torch::Tensor>> named_weights() const;

  // Copies `weights` into the model after checking that every expected name is present,
  // no unexpected name is, and each shape matches; floating dtypes are converted. Only the
  // weights this model holds are expected (and read); others of the model's names are skipped
  // untouched, so a stage reads only its share of a mapped file. Errors name `source` (the
  // file) and the tensor.
  void load_weights(std::map<std::string, torch::Tensor> weights, const std::string& source);

  // Activation checkpointing (model/activation_checkpoint.hpp): when on, a forward with grad
  // mode enabled and no KV cache keeps only each decoder layer's input and recomputes the layer
  // in backward. Same results, less memory for long sequences, one more forward per layer.
  void set_activation_checkpointing(bool on) { checkpointing_ = on; }
  bool activation_checkpointing() const { return checkpointing_; }

  // LoRA adapters on the projections of the layers this model holds (model/lora.hpp); not
  // among named_weights(), which stay the base model's. Null: none.
  void set_lora(std::shared_ptr<LoraAdapters> lora) { lora_ = std::move(lora); }
  LoraAdapters* lora() const { return lora_.get(); }

 private:
  // Decoder layer i: x + attention, then + MLP (pre-norm residual blocks).
  torch::Tensor layer(int64_t i, const torch::Tensor& x, const torch::Tensor& mask, KVCache* cache, int64_t pos0,
                      const torch::Tensor& position_ids, const PackedAttention* packed);
  // Boolean [B, 1, T, total] mask, true = may attend: causal, never to padded keys.
  // On `device`: where the attention that takes it runs.
  static torch::Tensor attention_mask(int64_t B, int64_t T, int64_t pos0, const torch::Tensor& key_mask,
                                      const torch::Device& device);
  torch::Tensor run_layers(torch::Tensor x, const torch::Tensor& mask, KVCache* cache, int64_t pos0,
                           const torch::Tensor& position_ids, int64_t first, int64_t last,
                           std::shared_ptr<const PackedAttention> packed);
  torch::Tensor attention(int64_t layer, const torch::Tensor& x, const torch::Tensor& key_mask,
                          KVCache* cache, int64_t pos0, const torch::Tensor& position_ids,
                          const PackedAttention* packed);
  // x W^T, plus the layer's adapter on that projection when there is one.
  torch::Tensor project(int64_t layer, LoraTarget t, const torch::Tensor& x, const torch::Tensor& w,
                        const torch::Tensor& bias = {}) const;
  // Refuses a sequence longer than the model's sliding window (LlamaConfig::sliding_window).
  void check_window(int64_t length) const;
  LlamaConfig cfg_;
  bool checkpointing_ = false;
  std::shared_ptr<RopeTables> rope_;
  LlamaStage stage_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  torch::Tensor embed_tokens_, norm_, lm_head_;
  std::vector<torch::Tensor> attn_norm_, q_, k_, v_, o_, ffn_norm_, gate_, up_, down_;
  std::vector<torch::Tensor> q_bias_, k_bias_, v_bias_, o_bias_;  // undefined where the model has none
  std::shared_ptr<LoraAdapters> lora_;
};
TORCH_MODULE(Llama);

// Mean cross-entropy over positions whose label is not -100, Hugging Face style: labels are
// aligned with the inputs and shifted inside (position t predicts label t+1). 0 when no
// position is learned.
torch::Tensor causal_lm_loss(const torch::Tensor& logits, const torch::Tensor& labels);
// The summed cross-entropy (no division) and the number of learned positions it sums over:
// a step split over micro-batches and ranks divides the sum by the whole step's count, so its
// loss is the token mean over the global batch, however the batch is split.
torch::Tensor causal_lm_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels);
int64_t learned_positions(const torch::Tensor& labels);

}  // namespace gt
