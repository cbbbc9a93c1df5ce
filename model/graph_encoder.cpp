#include "model/graph_encoder.hpp"

#include <torch/torch.h>

#include <cmath>
#include <cstdio>
#include <sstream>

#include "common/error.hpp"
#include "common/fs.hpp"
#include "model/graph_projector.hpp"
#include "model/host_to_device.hpp"
#include "model/named_weights.hpp"
#include "weights/safetensors.hpp"
#include "weights/torch_file.hpp"

namespace gt {

int64_t GraphEncoderConfig::template_slots() const { return template_tree_slots(llaga_hops, llaga_fanout); }

int64_t GraphEncoderConfig::template_nodes() const {
  return is_llaga() ? template_slots() : is_hop_field() ? field_hops + 1 : 0;
}

std::string GraphEncoderConfig::template_reads() const {
  if (is_llaga())
    return "the llaga encoder reads LLaGA's trees of " + std::to_string(template_nodes()) + " slots (hops " +
           std::to_string(llaga_hops) + ", fanout " + std::to_string(llaga_fanout) + ")";
  return "the hop_field encoder reads its centre once a hop, " + std::to_string(template_nodes()) + " times (hops " +
         std::to_string(field_hops) + ")";
}

std::string GraphEncoderConfig::template_records_hint() const {
  if (is_llaga())
    return "build the records with graphtune data build --template llaga --hops " + std::to_string(llaga_hops) +
           " --fanout " + std::to_string(llaga_fanout);
  return "build the records with graphtune data build --template hop_field --hops " + std::to_string(field_hops);
}

GraphEncoderConfig hop_field_encoder_config(int64_t feature_width, int64_t hops, const std::string& rows,
                                            const std::string& projector) {
  GraphEncoderConfig c;
  c.gnn_type = "hop_field";
  c.field_hops = hops;
  c.field_rows = rows;
  c.field_projector = projector;
  c.gnn_input = feature_width * (hops + 1);
  c.gnn_output = c.field_token_width() + hops + 1;
  c.dropout = 0.0;
  return c;
}

GraphEncoderConfig llaga_encoder_config(int64_t gnn_input, int64_t hops, int64_t fanout) {
  GraphEncoderConfig c;
  c.gnn_type = "llaga";
  c.gnn_input = gnn_input;
  c.llaga_hops = hops;
  c.llaga_fanout = fanout;
  c.gnn_output = gnn_input + c.template_slots();
  c.dropout = 0.0;
  return c;
}

std::string GraphEncoderConfig::problem() const {
  std::ostringstream ss;
  if (gnn_type != "gt" && gnn_type != "gcn" && gnn_type != "llaga" && gnn_type != "hop_field")
    ss << "gnn_type must be \"gt\", \"gcn\", \"llaga\" or \"hop_field\", got \"" << gnn_type << "\"";
  else if (gnn_input <= 0) ss << "gnn_input must be positive, got " << gnn_input;
  else if (gnn_output <= 0) ss << "gnn_output must be positive, got " << gnn_output;
  else if (is_hop_field() && (field_hops < 1 || field_hops > kMaxFieldHops))
    ss << "the hop field's hops must be in [1, " << kMaxFieldHops << "], got " << field_hops;
  else if (is_hop_field() && gnn_input % (field_hops + 1) != 0)
    ss << "a hop_field encoder's gnn_input is its " << field_hops + 1 << " hops' features side by side, and "
       << gnn_input << " is not a multiple of " << field_hops + 1;
  else if (is_hop_field() && !is_one_of(field_projector, kFieldProjectors))
    ss << "the hop field's projector must be " << choices_text(kFieldProjectors) << ", got \"" << field_projector << "\"";
  else if (is_hop_field() && gnn_output != field_token_width() + field_hops + 1)
    ss << "a hop_field encoder's gnn_output is " << (is_field_per_hop() ? "all its hops' widths" : "one hop's width")
       << " + its " << field_hops + 1 << " hops (" << field_token_width() + field_hops + 1 << "), got " << gnn_output;
  else if (is_hop_field() && !is_one_of(field_rows, kFieldRows))
    ss << "the hop field's rows must be " << choices_text(kFieldRows) << ", got \"" << field_rows << "\"";
  else if (is_hop_field()) return "";
  else if (is_llaga() && (llaga_hops <= 0 || llaga_fanout <= 0))
    ss << "llaga's hops and fanout must be positive, got " << llaga_hops << " and " << llaga_fanout;
  else if (is_llaga() && template_slots() == 0)
    ss << "llaga's tree of hops " << llaga_hops << " and fanout " << llaga_fanout << " has more than "
       << kMaxTemplateSlots << " slots";
  else if (is_llaga() && gnn_output != gnn_input + template_slots())
    ss << "a llaga encoder's gnn_output is gnn_input + its " << template_slots() << " slots (" << gnn_input + template_slots()
       << "), got " << gnn_output;
  else if (is_llaga()) return "";
  else if (is_gcn() && gnn_hid <= 0) ss << "gnn_hid must be positive, got " << gnn_hid;
  else if (!is_gcn() && att_d_model <= 0) ss << "att_d_model must be positive, got " << att_d_model;
  else if (!is_gcn() && gt_layers < 0) ss << "gt_layers must not be negative, got " << gt_layers;
  else if (!is_gcn() && (head <= 0 || att_d_model % head != 0))
    ss << "head (" << head << ") must be positive and divide att_d_model (" << att_d_model << ")";
  else if (!(dropout >= 0.0 && dropout < 1.0)) ss << "dropout must be in [0, 1), got " << dropout;
  return ss.str();
}

GraphEncoderImpl::GraphEncoderImpl(const GraphEncoderConfig& cfg) : cfg_(cfg) {
  if (auto p = cfg.problem(); !p.empty()) fail("graph encoder config", p);
  auto mk = [](std::initializer_list<int64_t> shape) { return torch::empty(shape); };
  if (cfg.is_llaga()) {
    const int64_t n = cfg.template_slots();
    structure_ = add_named_param(*this, "structure_embedding", mk({n, n}));
    init_weights(0);
    return;
  }
  if (cfg.is_hop_field()) {
    hop_embedding_ = add_named_param(*this, "hop_embedding", mk({cfg.field_hops + 1, cfg.field_hops + 1}));
    init_weights(0);
    return;
  }
  if (cfg.is_gcn()) {
    gcn_w_.push_back(add_named_param(*this, "vars.0", mk({cfg.gnn_hid, cfg.gnn_input})));
    gcn_b_.push_back(add_named_param(*this, "vars.1", mk({cfg.gnn_hid})));
    gcn_w_.push_back(add_named_param(*this, "vars.2", mk({cfg.gnn_output, cfg.gnn_hid})));
    gcn_b_.push_back(add_named_param(*this, "vars.3", mk({cfg.gnn_output})));
    init_weights(0);
    return;
  }
  const int64_t D = cfg.att_d_model;
  w_pos_ = add_named_param(*this, "W_pos", mk({1, D}));
  w_p_w_ = add_named_param(*this, "W_P.weight", mk({D, cfg.gnn_input}));
  w_p_b_ = add_named_param(*this, "W_P.bias", mk({D}));
  for (int64_t i = 0; i < cfg.gt_layers; ++i) {
    const std::string p = "gtLayers." + std::to_string(i) + ".";
    q_.push_back(add_named_param(*this, p + "qTrans", mk({D, D})));
    k_.push_back(add_named_param(*this, p + "kTrans", mk({D, D})));
    v_.push_back(add_named_param(*this, p + "vTrans", mk({D, D})));
    if (cfg.att_norm) {
      norm_w_.push_back(add_named_param(*this, p + "norm.weight", mk({D})));
      norm_b_.push_back(add_named_param(*this, p + "norm.bias", mk({D})));
    }
  }
  inv_w_ = add_named_param(*this, "inverW_P.weight", mk({cfg.gnn_output, D}));
  inv_b_ = add_named_param(*this, "inverW_P.bias", mk({cfg.gnn_output}));
  init_weights(0);
}

GraphEncoderImpl::GraphEncoderImpl(const GraphEncoderConfig& cfg, std::shared_ptr<GraphEncoderImpl> base)
    : GraphEncoderImpl(cfg) {
  if (!cfg.is_hop_field()) fail("graph encoder config", "only a hop_field encoder has a base, not a " + cfg.gnn_type + " one");
  const GraphEncoderConfig& b = base->config();
  if (b.is_template()) fail("graph encoder config", "a hop field's base is one of GraphGPT's encoders (gt or gcn), not " + b.gnn_type);
  const int64_t width = cfg.field_width();
  if (width != b.gnn_input + b.gnn_output)
    fail("graph encoder config", "a hop field over a base of gnn_input " + std::to_string(b.gnn_input) + " and gnn_output " +
                                     std::to_string(b.gnn_output) + " has hops " + std::to_string(b.gnn_input + b.gnn_output) +
                                     " wide, not " + std::to_string(width));
  field_base_ = register_module("base", std::move(base));
}

void GraphEncoderImpl::init_weights(uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  auto uniform = [&](torch::Tensor& p, double bound) {
    p.copy_(torch::empty(p.sizes(), torch::kFloat32).uniform_(-bound, bound, gen));
  };
  if (cfg_.is_llaga()) {  // nothing drawn: the embedding is the tree's
    structure_.copy_(template_tree_embedding(cfg_.llaga_hops, cfg_.llaga_fanout));
    return;
  }
  if (cfg_.is_hop_field()) {
    hop_embedding_.copy_(torch::eye(cfg_.field_hops + 1));
    return;
  }
  if (cfg_.is_gcn()) {
    for (auto& w : gcn_w_) uniform(w, std::sqrt(6.0 / static_cast<double>(w.size(0) + w.size(1))));
    for (auto& b : gcn_b_) b.zero_();
    return;
  }
  uniform(w_pos_, 0.02);
  // nn.Linear's default: weight and bias uniform(+-1/sqrt(fan_in)).
  const double bp = 1.0 / std::sqrt(static_cast<double>(cfg_.gnn_input));
  uniform(w_p_w_, bp);
  uniform(w_p_b_, bp);
  const double bx = std::sqrt(6.0 / (2.0 * cfg_.att_d_model));  // xavier uniform, square matrix
  for (size_t i = 0; i < q_.size(); ++i) {
    uniform(q_[i], bx);
    uniform(k_[i], bx);
    uniform(v_[i], bx);
  }
  for (auto& w : norm_w_) w.fill_(1.0);
  for (auto& b : norm_b_) b.zero_();
  const double bi = 1.0 / std::sqrt(static_cast<double>(cfg_.att_d_model));
  uniform(inv_w_, bi);
  uniform(inv_b_, bi);
}

std::vector<std::pair<std::string, torch::Tensor>> GraphEncoderImpl::named_weights() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& item : named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

void GraphEncoderImpl::load_weights(const std::map<std::string, torch::Tensor>& weights,
                                    const std::string& source, const std::string& prefix) {
  copy_named_weights(named_weights(), weights, source, "this graph encoder config", prefix);
}

void GraphEncoderImpl::load_file(const std::string& path, const std::string& prefix) {
  if (ends_with(path, ".safetensors")) {
    load_weights(load_safetensors(path), path, prefix);
  } else {
    load_weights(load_torch_state_dict(path), path, prefix);
  }
}

std::map<std::string, std::string> GraphEncoderImpl::file_metadata() const {
  if (cfg_.is_hop_field()) {
    std::map<std::string, std::string> m = {{"graph_encoder_type", "hop_field"},
                                            {"gnn_input", std::to_string(cfg_.gnn_input)},
                                            {"hop_field_hops", std::to_string(cfg_.field_hops)},
                                            {"hop_field_rows", cfg_.field_rows},
                                            {"hop_field_projector", cfg_.field_projector}};
    if (field_base_) m["hop_field_base"] = field_base_->config().gnn_type;  // its shape is its tensors'
    return m;
  }
  if (!cfg_.is_llaga()) return {};  // GraphGPT's kinds are told by their tensors' names
  return {{"graph_encoder_type", "llaga"},
          {"gnn_input", std::to_string(cfg_.gnn_input)},
          {"llaga_hops", std::to_string(cfg_.llaga_hops)},
          {"llaga_fanout", std::to_string(cfg_.llaga_fanout)}};
}

void GraphEncoderImpl::save_safetensors(const std::string& path) const {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (auto& [name, p] : named_weights()) tensors.emplace_back(name, p.detach());
  gt::save_safetensors(path, tensors, file_metadata());
}

torch::Tensor template_tree_embedding(int64_t hops, int64_t fanout) {
  const GraphEncoderConfig c = llaga_encoder_config(1, hops, fanout);
  if (auto p = c.problem(); !p.empty()) fail("graph encoder config", p);
  const int64_t n = c.template_slots();
  // Breadth-first numbering of a full fanout-ary tree: slot i > 0 hangs under (i - 1) / fanout.
  auto a = torch::zeros({n, n}, torch::kFloat64);
  auto acc = a.accessor<double, 2>();
  for (int64_t i = 1; i < n; ++i) acc[i][(i - 1) / fanout] = acc[(i - 1) / fanout][i] = 1.0;
  const auto d = a.sum(1).rsqrt();
  const auto laplacian = torch::eye(n, torch::kFloat64) - d.unsqueeze(1) * a * d.unsqueeze(0);
  auto vectors = std::get<1>(torch::linalg_eigh(laplacian));
  // Not the largest entry: in so symmetric a tree several tie, and rounding would pick among them.
  const auto first = vectors.abs().gt(1e-6).to(torch::kInt64).argmax(0);
  const auto sign = vectors.gather(0, first.unsqueeze(0)).sign();
  return (vectors * sign).to(torch::kFloat32).contiguous();
}

namespace {

// The shape and dtype checks of checked_edge_index (no values read).
torch::Tensor shaped_edge_index(const torch::Tensor& edge_index, const torch::Device& device, const std::string& where) {
  if (!edge_index.defined()) fail(where, "edge_index is missing");
  if (edge_index.dim() != 2 || edge_index.size(0) != 2) {
    std::ostringstream ss;
    ss << "edge_index must have shape [2, E], got " << edge_index.sizes();
    fail(where, ss.str());
  }
  if (!at::isIntegralType(edge_index.scalar_type(), /*includeBool=*/false)) {
    fail(where, std::string("edge_index must hold integers, got dtype ") + c10::toString(edge_index.scalar_type()));
  }
  return edge_index.to(device, torch::kInt64).contiguous();
}

}  // namespace

torch::Tensor checked_edge_index(const torch::Tensor& edge_index, int64_t n_nodes, const torch::Device& device,
                                 const std::string& where) {
  auto ei = shaped_edge_index(edge_index, device, where);
  if (ei.numel() > 0) {
    const int64_t lo = ei.min().item<int64_t>(), hi = ei.max().item<int64_t>();
    if (lo < 0 || hi >= n_nodes) {
      std::ostringstream ss;
      ss << "edge_index holds node " << (lo < 0 ? lo : hi) << ", outside [0, " << n_nodes << ") for a graph of "
         << n_nodes << " nodes";
      fail(where, ss.str());
    }
  }
  return ei;
}

void GraphEncoderImpl::set_dropout(double p, const std::string& where) {
  if (!(p >= 0.0 && p < 1.0)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", p);
    fail(where, std::string("must be in [0, 1), got ") + got);
  }
  cfg_.dropout = p;
}

namespace {

// Dropout in training mode; with a seed its mask comes from a CPU generator, where uniform_ is
// serial, so it depends on the seed alone. Copied to a GPU from pinned memory, so the host does
// not wait for the device.
torch::Tensor dropout_of(const torch::Tensor& z, double p, bool training, std::optional<at::Generator>& seeded) {
  if (!training || p <= 0) return z;
  if (!seeded) return torch::dropout(z, p, true);
  auto keep = torch::empty(z.sizes(), torch::kFloat32).uniform_(0.0, 1.0, *seeded).ge(p);
  auto scale = keep.to(torch::kFloat32).div_(1.0 - p);
  return z * host_to_device(scale, z.device()).to(z.scalar_type());
}

// The generator every dropout mask of one forward is drawn from, in order (none: libtorch's global one).
// A per-node sum over this rank's edges, completed over the others' where the edges are split
// (forward_split), as it is in one process.
torch::Tensor sum_over_ranks(const GraphEncoderImpl::SumOverRanks* sum, const torch::Tensor& mine) {
  return sum ? (*sum)(mine) : mine;
}

std::optional<at::Generator> mask_generator(std::optional<uint64_t> seed) {
  if (!seed) return std::nullopt;
  return at::make_generator<at::CPUGeneratorImpl>(*seed);
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> GraphEncoderImpl::checked_inputs(const torch::Tensor& x_in,
                                                                         const torch::Tensor& edge_index,
                                                                         bool edges_checked) const {
  const std::string where = "graph encoder input";
  if (!x_in.defined() || x_in.dim() != 2) {
    std::ostringstream ss;
    ss << "node features must have shape [N, " << cfg_.gnn_input << "], got "
       << (x_in.defined() ? x_in.sizes() : torch::IntArrayRef{});
    fail(where, ss.str());
  }
  if (x_in.size(1) != cfg_.gnn_input) {
    fail(where, "node features have width " + std::to_string(x_in.size(1)) + ", the graph encoder needs gnn_input=" +
                    std::to_string(cfg_.gnn_input));
  }
  if (!x_in.is_floating_point()) fail(where, "node features must be floating point");
  const auto& w0 = first_weight();
  auto ei = edges_checked ? shaped_edge_index(edge_index, w0.device(), where)
                          : checked_edge_index(edge_index, x_in.size(0), w0.device(), where);
  return {x_in.to(w0.device(), w0.scalar_type()), ei};
}

torch::Tensor GraphEncoderImpl::forward(const torch::Tensor& x_in, const torch::Tensor& edge_index, bool edges_checked,
                                        std::optional<uint64_t> dropout_seed) {
  const auto [x, ei] = checked_inputs(x_in, edge_index, edges_checked);
  if (cfg_.is_llaga()) return forward_llaga(x, ei, dropout_seed);
  if (cfg_.is_hop_field()) return forward_hop_field(x, dropout_seed);
  return cfg_.is_gcn() ? forward_gcn(x, ei, dropout_seed) : forward_gt(x, ei, dropout_seed);
}

void GraphEncoderImpl::check_template_nodes(int64_t n) const {
  if (n == cfg_.template_nodes()) return;
  fail("graph encoder input",
       "a graph of " + std::to_string(n) + " nodes; " + cfg_.template_reads() + ": " + cfg_.template_records_hint());
}

torch::Tensor GraphEncoderImpl::forward_hop_field(const torch::Tensor& x, std::optional<uint64_t> dropout_seed) const {
  const int64_t n = x.size(0);
  check_template_nodes(n);
  const torch::Tensor hops = x.view({n, n, x.size(1) / n});
  // Row k's block k: per_hop keeps it in place, zeros elsewhere ([n, n, F] times the identity on
  // the first two dimensions); shared takes it out, the diagonal [F, n] -> [n, F].
  const torch::Tensor own_hop = cfg_.is_field_per_hop()
                                    ? (hops * torch::eye(n, x.options()).unsqueeze(2)).view({n, x.size(1)})
                                    : hops.diagonal(0, 0, 1).t();
  auto gen = mask_generator(dropout_seed);
  return torch::cat({dropout_of(own_hop, cfg_.dropout, is_training(), gen), hop_embedding_.to(x.scalar_type())}, 1);
}

torch::Tensor GraphEncoderImpl::forward_llaga(const torch::Tensor& x, const torch::Tensor& ei,
                                              std::optional<uint64_t> dropout_seed) const {
  const int64_t n = x.size(0);
  check_template_nodes(n);
  // A pad slot is one no edge touches; the centre is real on its own.
  auto real = torch::zeros({n}, x.options()).index_fill_(0, ei.flatten(), 1.0).index_fill_(0, torch::zeros({1}, ei.options()), 1.0);
  auto gen = mask_generator(dropout_seed);
  return torch::cat({dropout_of(x * real.unsqueeze(1), cfg_.dropout, is_training(), gen), structure_.to(x.scalar_type())}, 1);
}

GraphEncoderImpl::EdgeShare GraphEncoderImpl::edge_share(const torch::Tensor& edge_index, int64_t n_nodes, int rank,
                                                         int ranks) const {
  const torch::Tensor ei = checked_edge_index(edge_index, n_nodes, edge_index.device(), "graph encoder input");
  const torch::Tensor to = ei[cfg_.is_gcn() ? 1 : 0];
  const torch::Tensor upto = torch::bincount(to, {}, n_nodes).cumsum(0);  // edges into nodes 0..v
  const int64_t edges = to.size(0);
  const auto first = [&](int q) {  // the first receiving node of rank q's range
    return q == ranks ? n_nodes : upto.lt(edges * q / ranks).sum().item<int64_t>();
  };
  EdgeShare share;
  share.first = first(rank);
  share.last = first(rank + 1);
  share.edge_index = ei.index_select(1, to.ge(share.first).logical_and(to.lt(share.last)).nonzero().squeeze(1));
  return share;
}

torch::Tensor GraphEncoderImpl::forward_split(const torch::Tensor& x_in, const EdgeShare& mine, const SumOverRanks& sum) {
  if (cfg_.is_template())
    fail("graph encoder", "the " + cfg_.gnn_type + " encoder reads LLaGA's records; it does not run on a whole graph split over ranks");
  const auto [x, ei] = checked_inputs(x_in, mine.edge_index, false);
  if (cfg_.is_gcn()) return forward_gcn(x, ei, std::nullopt, &sum, std::make_pair(mine.first, mine.last));
  return forward_gt(x, ei, std::nullopt, &sum);
}

torch::Tensor GraphEncoderImpl::forward_gt(const torch::Tensor& x, const torch::Tensor& ei,
                                           std::optional<uint64_t> dropout_seed, const SumOverRanks* sum) {
  const int64_t N = x.size(0), D = cfg_.att_d_model, H = cfg_.head, dh = D / H;
  auto rows = ei[0], cols = ei[1];
  const int64_t E = rows.size(0);
  auto z = torch::linear(x, w_p_w_, w_p_b_);
  if (cfg_.if_pos) z = z + w_pos_;
  auto gen = mask_generator(dropout_seed);
  z = dropout_of(z, cfg_.dropout, is_training(), gen);
  for (int64_t i = 0; i < cfg_.gt_layers; ++i) {
    auto row_z = z.index_select(0, rows), col_z = z.index_select(0, cols);
    auto q = torch::matmul(row_z, q_[i]).view({E, H, dh});
    auto k = torch::matmul(col_z, k_[i]).view({E, H, dh});
    auto v = torch::matmul(col_z, v_[i]).view({E, H, dh});
    auto att = (q * k).sum(-1).clamp(-10.0, 10.0).exp();  // [E, H]
    // Over the edges into each node, which are all this rank's when edges are split by receiver.
    auto denom = torch::zeros({N, H}, att.options()).index_add(0, rows, att).index_select(0, rows);
    att = att / (denom + 1e-8);
    auto msg = (att.unsqueeze(-1) * v).reshape({E, D});
    auto res = sum_over_ranks(sum, torch::zeros({N, D}, msg.options()).index_add(0, rows, msg)) + z;
    if (cfg_.att_norm) {
      res = torch::layer_norm(res, {D}, norm_w_[i], norm_b_[i], 1e-6);
    }
    z = res;
  }
  return torch::linear(z, inv_w_, inv_b_);
}

torch::Tensor GraphEncoderImpl::forward_gcn(const torch::Tensor& x, const torch::Tensor& ei,
                                            std::optional<uint64_t> dropout_seed, const SumOverRanks* sum,
                                            std::optional<std::pair<int64_t, int64_t>> loops_of) {
  const int64_t N = x.size(0);
  // add_remaining_self_loops: the edges that are not loops, then one loop per node.
  auto not_loop = ei[0].ne(ei[1]);
  auto loops = loops_of ? torch::arange(loops_of->first, loops_of->second, ei.options()) : torch::arange(N, ei.options());
  auto src = torch::cat({ei[0].masked_select(not_loop), loops});
  auto dst = torch::cat({ei[1].masked_select(not_loop), loops});
  auto deg = sum_over_ranks(sum, torch::zeros({N}, x.options()).index_add(0, src, torch::ones(src.sizes(), x.options())));
  auto inv_sqrt = deg.rsqrt();  // every node has its loop: deg >= 1
  auto weight = (inv_sqrt.index_select(0, src) * inv_sqrt.index_select(0, dst)).unsqueeze(1);
  auto propagate = [&](const torch::Tensor& h) {
    return sum_over_ranks(sum, torch::zeros({N, h.size(1)}, h.options()).index_add(0, dst, h.index_select(0, src) * weight));
  };
  auto gen = mask_generator(dropout_seed);
  auto h = torch::leaky_relu(torch::linear(propagate(dropout_of(x, cfg_.dropout, is_training(), gen)), gcn_w_[0], gcn_b_[0]),
                             0.01);
  return torch::linear(propagate(dropout_of(h, cfg_.dropout, is_training(), gen)), gcn_w_[1], gcn_b_[1]);
}

}  // namespace gt
