#include "model/llama.hpp"

#include <torch/torch.h>
#include <ATen/autocast_mode.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"
#include "model/activation_checkpoint.hpp"
#include "model/host_to_device.hpp"
#include "model/named_weights.hpp"
#include "model/packed_attention.hpp"

namespace gt {

namespace {

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  // In float32 whatever the storage dtype, as Hugging Face does, then back.
  auto xf = x.to(torch::kFloat32);
  auto normed = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return w * normed.to(x.scalar_type());
}

torch::Tensor rotate_half(const torch::Tensor& x) {
  int64_t h = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, h, h), x.narrow(-1, 0, h)}, -1);
}

}  // namespace

LlamaImpl::LlamaImpl(const LlamaConfig& cfg, const LlamaStage& stage) : cfg_(cfg), stage_(stage) {
  if (auto p = cfg.problem(); !p.empty()) fail("model config", p);
  if (stage_.last < 0) stage_.last = cfg.n_layers;
  rope_ = std::make_shared<RopeTables>(cfg.head_dim(), cfg.rope_theta, cfg.rope_scaling_factor, cfg.max_seq_len,
                                       cfg.rope_llama3, cfg.rope_freq_factors);
  const int64_t D = cfg.dim, H = cfg.hidden_dim, KV = cfg.kv_dim();
  // Each weight at its shape if this stage holds it, else empty: never allocated.
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    shapes_[name] = shape;
    const auto opts = torch::TensorOptions().dtype(stage_.dtype).device(stage_.device);
    return add_named_param(*this, name, holds(name) ? torch::empty(shape, opts) : torch::empty({0}, opts));
  };
  embed_tokens_ = add("model.embed_tokens.weight", {cfg.vocab_size, D});
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    attn_norm_.push_back(add(p + "input_layernorm.weight", {D}));
    q_.push_back(add(p + "self_attn.q_proj.weight", {D, D}));
    k_.push_back(add(p + "self_attn.k_proj.weight", {KV, D}));
    v_.push_back(add(p + "self_attn.v_proj.weight", {KV, D}));
    o_.push_back(add(p + "self_attn.o_proj.weight", {D, D}));
    q_bias_.push_back(cfg.qkv_bias ? add(p + "self_attn.q_proj.bias", {D}) : torch::Tensor());
    k_bias_.push_back(cfg.qkv_bias ? add(p + "self_attn.k_proj.bias", {KV}) : torch::Tensor());
    v_bias_.push_back(cfg.qkv_bias ? add(p + "self_attn.v_proj.bias", {KV}) : torch::Tensor());
    o_bias_.push_back(cfg.o_bias ? add(p + "self_attn.o_proj.bias", {D}) : torch::Tensor());
    ffn_norm_.push_back(add(p + "post_attention_layernorm.weight", {D}));
    gate_.push_back(add(p + "mlp.gate_proj.weight", {H, D}));
    up_.push_back(add(p + "mlp.up_proj.weight", {H, D}));
    down_.push_back(add(p + "mlp.down_proj.weight", {D, H}));
  }
  norm_ = add("model.norm.weight", {D});
  if (!cfg.tie_embeddings) lm_head_ = add("lm_head.weight", {cfg.vocab_size, D});
  if (stage_.initialise) init_weights(0);
}

bool LlamaImpl::holds(const std::string& name) const {
  const int64_t l = layer_of(name);
  if (l >= 0) return l >= stage_.first && l < stage_.last;
  if (name == "model.embed_tokens.weight") return stage_.embedding || (stage_.head && cfg_.tie_embeddings);
  return stage_.head;  // final norm, lm_head
}

void LlamaImpl::init_weights(uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  // GPT-2 style: residual-branch outputs scaled down with depth so the stream starts small.
  const double std = 0.02, resid_std = 0.02 / std::sqrt(2.0 * cfg_.n_layers);
  for (auto& [name, p] : named_weights()) {
    if (p.dim() == 1) {
      p.fill_(1.0);
    } else {
      bool resid = name.find("o_proj") != std::string::npos || name.find("down_proj") != std::string::npos;
      auto fresh = torch::empty(p.sizes(), torch::kFloat32).normal_(0.0, resid ? resid_std : std, gen);
      p.copy_(fresh);
    }
  }
}

std::vector<std::pair<std::string, torch::Tensor>> LlamaImpl::named_weights() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

void LlamaImpl::load_weights(std::map<std::string, torch::Tensor> weights, const std::string& source) {
  std::vector<std::pair<std::string, torch::Tensor>> held;
  for (auto& [name, p] : named_weights())
    if (holds(name)) held.emplace_back(name, p);
  for (auto it = weights.begin(); it != weights.end();) {
    if (!shapes_.count(it->first)) fail(source, "unexpected tensor '" + it->first + "' for this model config");
    it = holds(it->first) ? std::next(it) : weights.erase(it);
  }
  copy_named_weights(held, std::move(weights), source, "this model config");
}

torch::Tensor LlamaImpl::embed(const torch::Tensor& tokens) {
  return torch::embedding(embed_tokens_, tokens);
}

KVCache LlamaImpl::new_cache(int64_t batch, int64_t capacity, int64_t first, int64_t last) const {
  if (last < 0) last = cfg_.n_layers;
  KVCache c;
  c.k.resize(static_cast<size_t>(cfg_.n_layers));
  c.v.resize(static_cast<size_t>(cfg_.n_layers));
  // The layer's own weights tell the cache's dtype and device: a later pipeline stage holds no
  // embeddings.
  for (int64_t i = first; i < last; ++i) {
    auto opts = q_[i].options().requires_grad(false);
    c.k[i] = torch::zeros({batch, cfg_.n_kv_heads, capacity, cfg_.head_dim()}, opts);
    c.v[i] = torch::zeros({batch, cfg_.n_kv_heads, capacity, cfg_.head_dim()}, opts);
  }
  return c;
}

namespace {

// The dtype attention runs in on q's device: q's own, or autocast's lower precision there.
at::ScalarType attention_dtype(const torch::Tensor& q) {
  const auto t = q.device().type();
  return at::autocast::is_autocast_enabled(t) ? at::autocast::get_autocast_dtype(t) : q.scalar_type();
}

}  // namespace

torch::Tensor LlamaImpl::attention(int64_t layer, const torch::Tensor& x, const torch::Tensor& attn_mask,
                                   KVCache* cache, int64_t pos0, const torch::Tensor& position_ids,
                                   const PackedAttention* packed) {
  const int64_t B = x.size(0), T = x.size(1), hd = cfg_.head_dim();
  auto heads = [&](LoraTarget t, const torch::Tensor& w, const torch::Tensor& b, int64_t n) {
    return project(layer, t, x, w, b).view({B, T, n, hd}).transpose(1, 2);
  };
  auto q = heads(LoraTarget::kQ, q_[layer], q_bias_[layer], cfg_.n_heads);
  auto k = heads(LoraTarget::kK, k_[layer], k_bias_[layer], cfg_.n_kv_heads);
  auto v = heads(LoraTarget::kV, v_[layer], v_bias_[layer], cfg_.n_kv_heads);

  // Rotary embeddings, Hugging Face pairing (i, i + hd/2); linear scaling divides positions. In
  // q's dtype, as Hugging Face casts them to the hidden states': under bf16 autocast q and k then
  // stay bf16 (fp32 tables would widen them, and every pass over them, for a kernel that reads
  // bf16 anyway).
  const auto [cos, sin] = rope_->get(pos0, T, position_ids, q);
  q = q * cos + rotate_half(q) * sin;
  k = k * cos + rotate_half(k) * sin;

  if (cache) {
    cache->k[layer].narrow(2, pos0, T).copy_(k);
    cache->v[layer].narrow(2, pos0, T).copy_(v);
    k = cache->k[layer].narrow(2, 0, pos0 + T);
    v = cache->v[layer].narrow(2, 0, pos0 + T);
  }
  // No mask: plain causal attention over these positions alone (forward_layers). Grouped-query
  // attention: each key/value head serves n_heads / n_kv_heads query heads. The causal kernel
  // takes the groups as they are (enable_gqa: no copies of k and v, 8% less time a layer on this
  // machine's bench model); with a mask, the heads are repeated first.
  const bool causal = !attn_mask.defined();
  const int64_t rep = cfg_.n_heads / cfg_.n_kv_heads;
  if (rep > 1 && !causal) {
    k = k.repeat_interleave(rep, 1);
    v = v.repeat_interleave(rep, 1);
  }
  torch::Tensor y;
  if (!packed) {
    y = at::scaled_dot_product_attention(q, k, v, causal ? std::nullopt : std::optional<at::Tensor>(attn_mask), 0.0,
                                         causal, std::nullopt, /*enable_gqa=*/causal && rep > 1);
    y = y.transpose(1, 2);
  } else if (flash_varlen_applies(q.device(), attention_dtype(q), hd)) {
    y = varlen_attention(q, k, v, *packed, attention_dtype(q), flash_varlen_kernel);
  } else {
    y = segment_attention(q, k, v, *packed);
  }
  return project(layer, LoraTarget::kO, y.reshape({B, T, cfg_.dim}), o_[layer], o_bias_[layer]);
}

torch::Tensor LlamaImpl::project(int64_t layer, LoraTarget t, const torch::Tensor& x, const torch::Tensor& w,
                                 const torch::Tensor& bias) const {
  torch::Tensor y = torch::linear(x, w, bias);
  return lora_ ? lora_->add(layer, t, x, y) : y;
}

torch::Tensor LlamaImpl::layer(int64_t i, const torch::Tensor& x0, const torch::Tensor& mask, KVCache* cache,
                               int64_t pos0, const torch::Tensor& position_ids, const PackedAttention* packed) {
  auto x = x0 + attention(i, rms_norm(x0, attn_norm_[i], cfg_.norm_eps), mask, cache, pos0, position_ids, packed);
  auto h = rms_norm(x, ffn_norm_[i], cfg_.norm_eps);
  auto a = torch::silu(project(i, LoraTarget::kGate, h, gate_[i])) * project(i, LoraTarget::kUp, h, up_[i]);
  return x + project(i, LoraTarget::kDown, a, down_[i]);
}

torch::Tensor LlamaImpl::attention_mask(int64_t B, int64_t T, int64_t pos0, const torch::Tensor& key_mask,
                                        const torch::Device& device) {
  const int64_t total = pos0 + T;
  auto causal = torch::ones({T, total}, torch::TensorOptions().dtype(torch::kBool).device(device)).tril(pos0);
  auto mask = causal.view({1, 1, T, total});
  if (key_mask.defined()) {
    if (key_mask.size(0) != B || key_mask.size(1) != total)
      throw std::runtime_error("key_mask must be [batch, cached + new positions]");
    mask = mask & key_mask.to(device, torch::kBool).view({B, 1, 1, total});
  }
  return mask;
}

namespace {
// Whether no row of a [B, T] key mask has a real position after a padded one.
bool right_padded(const torch::Tensor& key_mask) {
  const int64_t T = key_mask.size(1);
  if (T < 2) return true;
  const auto m = key_mask.to(torch::kBool);
  return !(m.narrow(1, 1, T - 1) & ~m.narrow(1, 0, T - 1)).any().item<bool>();
}
}  // namespace

torch::Tensor LlamaImpl::run_layers(torch::Tensor x, const torch::Tensor& mask, KVCache* cache, int64_t pos0,
                                    const torch::Tensor& position_ids, int64_t first, int64_t last,
                                    std::shared_ptr<const PackedAttention> packed) {
  // A cache is written as a side effect, which a recomputation would repeat: generation runs
  // without grad anyway, so checkpointing only ever applies to training forwards.
  const bool ckpt = checkpointing_ && cache == nullptr && torch::GradMode::is_enabled();
  for (int64_t i = first; i < last; ++i) {
    if (!ckpt) {
      x = layer(i, x, mask, cache, pos0, position_ids, packed.get());
      continue;
    }
    // The mask, positions and packing are captured by value: backward runs after this call has
    // returned.
    auto body = [this, i, mask, pos0, position_ids, packed](const torch::Tensor& in) {
      return layer(i, in, mask, nullptr, pos0, position_ids, packed.get());
    };
    std::vector<torch::Tensor> params{attn_norm_[i], q_[i],    k_[i],  v_[i],   o_[i],
                                      ffn_norm_[i],  gate_[i], up_[i], down_[i]};
    for (const torch::Tensor& b : {q_bias_[i], k_bias_[i], v_bias_[i], o_bias_[i]})
      if (b.defined()) params.push_back(b);
    if (lora_)
      for (const torch::Tensor& w : lora_->layer_weights(i)) params.push_back(w);
    x = checkpoint(body, x, params);
  }
  return x;
}

int64_t PackedRecords::sharers() const {
  int64_t n = 0;
  for (size_t r = 0; r < lengths.size(); ++r) n += shares(r) ? 1 : 0;
  return n;
}

int64_t PackedRecords::tokens() const {
  int64_t n = prefix;
  for (int64_t l : lengths) n += l;
  return n;
}

int64_t PackedRecords::record_tokens() const { return tokens() - prefix + prefix * sharers(); }

torch::Tensor packed_positions(const PackedRecords& packed) {
  auto pos = torch::empty({1, packed.tokens()}, torch::kInt64);
  int64_t* p = pos.data_ptr<int64_t>();
  for (int64_t t = 0; t < packed.prefix; ++t) *p++ = t;
  for (size_t r = 0; r < packed.lengths.size(); ++r) {
    const int64_t from = packed.shares(r) ? packed.prefix : 0;
    for (int64_t t = 0; t < packed.lengths[r]; ++t) *p++ = from + t;
  }
  return pos;
}

torch::Tensor LlamaImpl::forward_layers(torch::Tensor x, const torch::Tensor& key_mask, int64_t first, int64_t last,
                                        const PackedRecords& packed) {
  if (first < 0 || first > last || last > cfg_.n_layers)
    throw std::logic_error("forward_layers: layers [" + std::to_string(first) + ", " + std::to_string(last) +
                           ") outside the model's " + std::to_string(cfg_.n_layers));
  if (!packed.empty()) {
    for (size_t r = 0; r < packed.lengths.size(); ++r)
      check_window(packed.lengths[r] + (packed.shares(r) ? packed.prefix : 0));
    const int64_t n = packed.tokens();
    if (x.size(0) != 1 || x.size(1) != n)
      throw std::logic_error("forward_layers: packed records of " + std::to_string(n) + " tokens in all, but x is [" +
                             std::to_string(x.size(0)) + ", " + std::to_string(x.size(1)) + ", ...]");
    if (packed.prefix > 0 && packed.after_prefix.size() != packed.lengths.size())
      throw std::logic_error("forward_layers: a shared prefix, but not which records share it");
    auto plan = std::make_shared<const PackedAttention>(packed, x.device());
    return run_layers(std::move(x), {}, nullptr, 0, packed_positions(packed), first, last, std::move(plan));
  }
  check_window(x.size(1));
  // Training batches are padded on the right: each row's real positions come before its
  // padding, so causal attention alone gives them the outputs the padding mask would. Only
  // the padded positions' outputs change, and nothing is learned there (their labels are
  // -100), so the loss and the gradients are the same. The kernel without a mask is the faster
  // one (0.13 against 0.18 s a layer on this machine's bench model).
  if (!key_mask.defined() || right_padded(key_mask)) return run_layers(std::move(x), {}, nullptr, 0, {}, first, last, {});
  const auto mask = attention_mask(x.size(0), x.size(1), 0, key_mask, x.device());
  return run_layers(std::move(x), mask, nullptr, 0, {}, first, last, {});
}

torch::Tensor LlamaImpl::head(const torch::Tensor& x) {
  auto h = rms_norm(x, norm_, cfg_.norm_eps);
  return torch::linear(h, cfg_.tie_embeddings ? embed_tokens_ : lm_head_).to(torch::kFloat32);
}

torch::Tensor LlamaImpl::head_loss_sum(const torch::Tensor& x, const torch::Tensor& labels) {
  const int64_t T = x.size(1);
  // The learned positions are found where the labels are: on the host, where the trainers keep
  // them, that costs no wait for the device (a mask index on the device would). Position t of
  // row b predicts label t+1: flat index b*T + t of the states, b*T + t + 1 of the labels.
  const auto bt = (labels.narrow(1, 1, T - 1) != -100).nonzero();  // [n, 2], row-major order
  const auto flat = bt.select(1, 0) * T + bt.select(1, 1);
  const auto targets = labels.reshape({-1}).index_select(0, flat + 1);
  const auto logits = head(x.reshape({-1, x.size(2)}).index_select(0, host_to_device(flat, x.device())));  // fp32
  return torch::nn::functional::cross_entropy(logits, host_to_device(targets, x.device()),
                                              torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum));
}

torch::Tensor LlamaImpl::forward_embeds(torch::Tensor x, const torch::Tensor& key_mask, KVCache* cache,
                                        const torch::Tensor& position_ids) {
  return head(forward_hidden(std::move(x), key_mask, cache, position_ids));
}

torch::Tensor LlamaImpl::forward_hidden(torch::Tensor x, const torch::Tensor& key_mask, KVCache* cache,
                                        const torch::Tensor& position_ids) {
  return forward_stage(std::move(x), key_mask, cache, position_ids, 0, cfg_.n_layers);
}

torch::Tensor LlamaImpl::forward_stage(torch::Tensor x, const torch::Tensor& key_mask, KVCache* cache,
                                       const torch::Tensor& position_ids, int64_t first, int64_t last) {
  if (first < 0 || first > last || last > cfg_.n_layers)
    throw std::logic_error("forward_stage: layers [" + std::to_string(first) + ", " + std::to_string(last) +
                           ") outside the model's " + std::to_string(cfg_.n_layers));
  const int64_t B = x.size(0), T = x.size(1);
  if (position_ids.defined() && (position_ids.dim() != 2 || position_ids.size(0) != B || position_ids.size(1) != T))
    throw std::runtime_error("position_ids must be [batch, new positions]");
  const int64_t pos0 = cache ? cache->len : 0, total = pos0 + T;
  check_window(total);
  if (cache && total > cache->capacity())
    throw std::runtime_error("KV cache capacity " + std::to_string(cache->capacity()) + " exceeded");
  x = run_layers(std::move(x), attention_mask(B, T, pos0, key_mask, x.device()), cache, pos0, position_ids, first, last,
                 nullptr);
  if (cache) cache->len = total;
  return x;
}

void LlamaImpl::check_window(int64_t length) const {
  if (cfg_.sliding_window > 0 && length > cfg_.sliding_window)
    throw InputError("model", "not supported yet: a sequence of " + std::to_string(length) +
                                  " tokens, longer than the model's sliding_window " +
                                  std::to_string(cfg_.sliding_window) +
                                  " (graphtune attends to every earlier position; keep [data].max_len within it)");
}

int64_t LlamaImpl::layer_of(const std::string& name) {
  const std::string prefix = "model.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  return std::stoll(name.substr(prefix.size()));
}

StageWeights LlamaImpl::stage_weights(const LlamaConfig& cfg) {
  const int64_t D = cfg.dim, H = cfg.hidden_dim, KV = cfg.kv_dim();
  StageWeights w;
  // Two norms, q and o, k and v, gate up and down: as the constructor shapes them.
  w.layers.assign(static_cast<size_t>(cfg.n_layers), 2 * D + 2 * D * D + 2 * KV * D + 3 * H * D +
                                                        (cfg.qkv_bias ? D + 2 * KV : 0) + (cfg.o_bias ? D : 0));
  w.first_extra = cfg.vocab_size * D;
  w.last_extra = D + cfg.vocab_size * D;  // final norm, and the head or the tied table's copy
  return w;
}

void LlamaImpl::keep_only(int64_t first, int64_t last, bool keep_embedding, bool keep_head) {
  torch::NoGradGuard ng;
  stage_.first = std::max(stage_.first, first);
  stage_.last = std::min(stage_.last, last);
  stage_.embedding = stage_.embedding && keep_embedding;
  stage_.head = stage_.head && keep_head;
  for (auto& [name, p] : named_weights())
    if (!holds(name)) p.set_data(torch::empty({0}, p.options()));
}

torch::Tensor LlamaImpl::forward(const torch::Tensor& tokens, const torch::Tensor& key_mask, KVCache* cache,
                                 const torch::Tensor& position_ids) {
  return forward_embeds(embed(tokens), key_mask, cache, position_ids);
}

torch::Tensor causal_lm_loss_sum(const torch::Tensor& logits, const torch::Tensor& labels) {
  const int64_t T = logits.size(1), V = logits.size(2);
  auto l = logits.narrow(1, 0, T - 1).reshape({-1, V});
  auto y = labels.narrow(1, 1, T - 1).reshape({-1}).to(l.device());  // labels may stay on the host
  return torch::nn::functional::cross_entropy(
      l, y, torch::nn::functional::CrossEntropyFuncOptions().ignore_index(-100).reduction(torch::kSum));
}

int64_t learned_positions(const torch::Tensor& labels) {
  return (labels.narrow(1, 1, labels.size(1) - 1) != -100).sum().item<int64_t>();
}

torch::Tensor causal_lm_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  // Summed, then divided by the learned positions: a batch whose answers were all truncated away
  // has none, and gives 0 (no gradient) instead of the NaN of an empty mean.
  const int64_t T = labels.size(1);
  return causal_lm_loss_sum(logits, labels) / (labels.narrow(1, 1, T - 1) != -100).sum().clamp_min(1);
}

}  // namespace gt
