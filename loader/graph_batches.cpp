#include "loader/graph_batches.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "data/chat_template.hpp"
#include "loader/prefetch.hpp"
#include "model/host_to_device.hpp"
#include "tokenizer/tokenizer.hpp"

namespace gt {

namespace {

std::string record_where(const std::string& where, const std::string& id) {
  return (where.empty() ? std::string() : where + ": ") + "record id \"" + id + "\"";
}

// The record's graphs (features gathered, local edges), its graph node counts in `counts`.
GraphExample gather_graphs(const InstructionRecord& record, const FeatureTable& features,
                           const std::string& where, std::vector<int64_t>& counts) {
  const torch::Tensor& table = features.of(record.dataset, record_where(where, record.id));
  if (table.dim() != 2 || table.scalar_type() != torch::kFloat32)
    fail(where, "feature table of dataset '" + record.dataset + "' is not a [N, F] float32 tensor");
  check_node_ids(record, table.size(0), where);

  GraphExample ex;
  ex.id = record.id;
  counts.clear();
  counts.reserve(record.graphs.size());
  for (const GraphRef& g : record.graphs) {
    const int64_t n = static_cast<int64_t>(g.node_list.size());
    counts.push_back(n);
    auto idx = torch::empty({n}, torch::kLong);
    if (n > 0) std::memcpy(idx.data_ptr<int64_t>(), g.node_list.data(), n * sizeof(int64_t));
    ex.x.push_back(table.index_select(0, idx).contiguous());
    const int64_t e = static_cast<int64_t>(g.edge_index[0].size());
    if (static_cast<int64_t>(g.edge_index[1].size()) != e)
      fail(record_where(where, record.id), "edge_index rows differ in length");
    auto ei = torch::empty({2, e}, torch::kLong);
    if (e > 0) {
      std::memcpy(ei.data_ptr<int64_t>(), g.edge_index[0].data(), e * sizeof(int64_t));
      std::memcpy(ei.data_ptr<int64_t>() + e, g.edge_index[1].data(), e * sizeof(int64_t));
    }
    ex.edge_index.push_back(ei);
  }
  return ex;
}

}  // namespace

GraphExample make_example(const InstructionRecord& record, const FeatureTable& features,
                          const Tokenizer& tokenizer, int64_t max_len, const std::string& where,
                          const ChatTemplate& tmpl) {
  std::vector<int64_t> counts;
  GraphExample ex = gather_graphs(record, features, where, counts);
  ex.tokens = tokenize_conversation(record, counts, tokenizer, max_len, tmpl);
  return ex;
}

GraphExample make_prompt_example(const InstructionRecord& record, const FeatureTable& features,
                                 const Tokenizer& tokenizer, int64_t max_len, const std::string& where,
                                 const ChatTemplate& tmpl) {
  std::vector<int64_t> counts;
  GraphExample ex = gather_graphs(record, features, where, counts);
  ex.tokens = tokenize_prompt(record, counts, tokenizer, max_len, tmpl);
  return ex;
}

GraphGptBatch collate(const std::vector<GraphExample>& examples, int32_t pad_id) {
  if (examples.empty()) throw std::invalid_argument("collate: no examples");
  const int64_t b = static_cast<int64_t>(examples.size());
  int64_t t = 0;
  for (const auto& ex : examples) {
    if (ex.tokens.labels.size() != ex.tokens.input_ids.size())
      throw std::invalid_argument("collate: record \"" + ex.id + "\": labels and input_ids differ in length");
    t = std::max<int64_t>(t, static_cast<int64_t>(ex.tokens.input_ids.size()));
  }
  GraphGptBatch batch;
  batch.input_ids = torch::full({b, t}, static_cast<int64_t>(pad_id), torch::kLong);
  batch.labels = torch::full({b, t}, static_cast<int64_t>(kIgnoreIndex), torch::kLong);
  batch.attention_mask = torch::zeros({b, t}, torch::kLong);
  auto* ids = batch.input_ids.data_ptr<int64_t>();
  auto* labels = batch.labels.data_ptr<int64_t>();
  auto* mask = batch.attention_mask.data_ptr<int64_t>();
  for (int64_t r = 0; r < b; ++r) {
    const GraphExample& ex = examples[static_cast<size_t>(r)];
    const auto& tk = ex.tokens;
    for (size_t i = 0; i < tk.input_ids.size(); ++i) {
      ids[r * t + static_cast<int64_t>(i)] = tk.input_ids[i];
      labels[r * t + static_cast<int64_t>(i)] = tk.labels[i];
      mask[r * t + static_cast<int64_t>(i)] = 1;
    }
    const std::string where = "record id \"" + ex.id + "\"";
    if (tk.graph_spans.size() != ex.x.size() || ex.edge_index.size() != ex.x.size())
      fail(where, std::to_string(tk.graph_spans.size()) + " graph spans in the tokens, " +
                      std::to_string(ex.x.size()) + " graphs");
    for (size_t k = 0; k < ex.x.size(); ++k) {
      const auto& span = tk.graph_spans[k];
      const int64_t n = ex.x[k].size(0);
      if (span[1] - span[0] != n)
        fail(where, "graph " + std::to_string(k) + " has " + std::to_string(n) + " nodes but " +
                        std::to_string(span[1] - span[0]) + " <g_patch> tokens");
      if (span[0] < 0 || span[1] > static_cast<int64_t>(tk.input_ids.size()))
        fail(where, "graph " + std::to_string(k) + "'s tokens lie outside the example");
      GraphInput g;
      g.row = r;
      g.start = span[0];
      g.x = ex.x[k];
      g.edge_index = ex.edge_index[k];
      batch.graphs.push_back(std::move(g));
    }
    batch.ids.push_back(ex.id);
  }
  return batch;
}

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  if (n < 0 || n > static_cast<int64_t>(UINT32_MAX))
    throw std::invalid_argument("epoch_permutation: n out of range");
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  // One stream per (seed, epoch); Rng's SplitMix64 seeding spreads the mixed value.
  Rng rng(seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(epoch + 1)));
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = rng.below(static_cast<uint32_t>(i + 1));
    std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(j)]);
  }
  return p;
}

LengthEstimator::LengthEstimator(const Tokenizer& tokenizer, int64_t max_len, ChatTemplate tmpl)
    : tokenizer_(tokenizer), max_len_(max_len), tmpl_(std::move(tmpl)), token_texts_(chat_token_texts(tmpl_)),
      sentinel_(tokenizer.piece_to_id("<g_end>")) {}

// Text after the sentinel tokenises as it does inside a longer text (no dummy prefix).
int64_t LengthEstimator::continuation_ids(std::string_view text) {
  key_.assign(text.data(), text.size());
  auto it = counts_.find(key_);
  if (it != counts_.end()) return it->second;
  const std::vector<int32_t> ids = tokenizer_.encode("<g_end>" + key_, false, false);
  const int64_t n = static_cast<int64_t>(ids.size()) - (!ids.empty() && ids[0] == sentinel_ ? 1 : 0);
  counts_.emplace(key_, n);
  return n;
}

// Word by word, each with the whitespace before it (how SentencePiece and byte-level BPE attach
// spaces); trailing whitespace on its own.
int64_t LengthEstimator::text_ids(std::string_view text) {
  auto space = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  int64_t n = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = pos;
    while (end < text.size() && space(text[end])) ++end;
    while (end < text.size() && !space(text[end])) ++end;
    n += continuation_ids(text.substr(pos, end - pos));
    pos = end;
  }
  return n;
}

int64_t LengthEstimator::operator()(const InstructionRecord& record) {
  std::string text;
  try {
    text = render_chat(tmpl_, record.conversations);
  } catch (const InputError&) {
    return max_len_;
  }
  const std::string marker = kGraphMarker;
  const bool bos = tmpl_.format == ChatFormat::kVicunaV11 && tokenizer_.bos_id() >= 0;
  int64_t n = bos ? 1 : 0;
  size_t pos = 0, graph = 0;
  const std::string_view all(text);
  while (pos < text.size()) {
    // The nearest of the texts that are not tokenised as text.
    size_t at = text.find(marker, pos), len = marker.size();
    bool is_graph = at != std::string::npos;
    for (const std::string& t : token_texts_) {
      const size_t a = text.find(t, pos);
      if (a < at) at = a, len = t.size(), is_graph = false;
    }
    n += text_ids(all.substr(pos, at == std::string::npos ? std::string::npos : at - pos));
    if (at == std::string::npos) break;
    if (!is_graph) n += 1;
    else if (graph < record.graphs.size()) n += static_cast<int64_t>(record.graphs[graph++].node_list.size()) + 2;
    else n += text_ids(marker);  // a marker beyond the graphs stays text
    pos = at + len;
    if (n >= max_len_) return max_len_;
  }
  return std::min(n, max_len_);
}

int64_t megabatch_batches(int64_t batches) { return std::clamp<int64_t>(batches / 4, 1, 50); }

std::vector<int64_t> length_grouped_order(const std::vector<int64_t>& lengths, int64_t batch_size, uint64_t seed,
                                          int64_t epoch) {
  if (batch_size < 1) throw std::invalid_argument("length_grouped_order: batch_size < 1");
  const int64_t n = static_cast<int64_t>(lengths.size());
  const std::vector<int64_t> p = epoch_permutation(n, seed, epoch);
  const int64_t batches = n / batch_size, full = batches * batch_size;
  const int64_t mega = megabatch_batches(batches) * batch_size;
  std::vector<int64_t> sorted(p.begin(), p.begin() + full);
  auto longer = [&lengths](int64_t a, int64_t b) {
    return lengths[static_cast<size_t>(a)] > lengths[static_cast<size_t>(b)];
  };
  for (int64_t begin = 0; begin < full; begin += mega)
    std::stable_sort(sorted.begin() + begin, sorted.begin() + std::min(full, begin + mega), longer);

  // Another stream than the records' shuffle, so that the batch order is not tied to it.
  std::vector<int64_t> batch_order = epoch_permutation(batches, seed ^ 0xD1B54A32D192ED03ULL, epoch);
  if (batches > 0) {
    // Each batch starts with its longest record; the first of the longest batches leads.
    int64_t longest = 0;
    for (int64_t b = 1; b < batches; ++b)
      if (longer(sorted[static_cast<size_t>(b * batch_size)], sorted[static_cast<size_t>(longest * batch_size)]))
        longest = b;
    std::swap(*std::find(batch_order.begin(), batch_order.end(), longest), batch_order.front());
  }
  std::vector<int64_t> order;
  order.reserve(static_cast<size_t>(n));
  for (int64_t b : batch_order)
    order.insert(order.end(), sorted.begin() + b * batch_size, sorted.begin() + (b + 1) * batch_size);
  order.insert(order.end(), p.begin() + full, p.end());
  return order;
}

// The permutations of the epochs being built (workers near an epoch boundary may need two).
struct GraphBatchStream::OrderCache {
  std::mutex mu;
  std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> by_epoch;
};

GraphBatchStream::GraphBatchStream(std::shared_ptr<const std::vector<InstructionRecord>> records,
                                   const FeatureTable& features, const Tokenizer& tokenizer,
                                   GraphBatchOptions options)
    : records_(std::move(records)),
      features_(features),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      pad_id_(tokenizer.pad_id()),
      orders_(std::make_unique<OrderCache>()) {
  if (!records_ || records_->empty()) fail(options_.where, "no instruction records to train on");
  if (options_.batch_size < 1)
    fail("batch_size", std::to_string(options_.batch_size) + " must be at least 1");
  if (options_.max_len < 1) fail("max_len", std::to_string(options_.max_len) + " must be at least 1");
  if (options_.num_workers < 0)
    fail("num_workers", std::to_string(options_.num_workers) + " must be 0 or more");
  if (options_.queue_capacity < 0)
    fail("queue_capacity", std::to_string(options_.queue_capacity) + " must be 0 or more");
  if (records_->size() > UINT32_MAX) fail(options_.where, "too many records");
  const int64_t n = static_cast<int64_t>(records_->size());
  const auto& o = options_;
  if (o.shards < 1 || o.first_shard < 0 || o.shards_here < 1 || o.first_shard + o.shards_here > o.shards)
    throw std::invalid_argument("GraphBatchStream: shards " + std::to_string(o.first_shard) + " + " +
                                std::to_string(o.shards_here) + " outside 0.." + std::to_string(o.shards));
  if (o.shards > 1 && (!o.drop_last || o.batch_size % o.shards))
    throw std::invalid_argument("GraphBatchStream: " + std::to_string(o.shards) +
                                " shards need drop_last and a batch size they divide");
  if (o.first_element < 0) throw std::invalid_argument("GraphBatchStream: first_element < 0");
  if (o.drop_last && n < o.batch_size)
    fail(o.where, std::to_string(n) + " records are fewer than one batch of " + std::to_string(o.batch_size) +
                      " ([training].batch_size)");
  steps_per_epoch_ = epoch_steps(n, o);
  if (o.group_by_length) compute_lengths();
  prefetch_ = std::make_unique<OrderedPrefetcher<GraphGptBatch>>(
      [this](int64_t k) { return build(options_.first_element + k); }, options_.num_workers, options_.queue_capacity);
}

namespace {
GraphBatchOptions options_of(int64_t max_len, int64_t batch_size, uint64_t seed, int32_t num_workers,
                             std::string where) {
  GraphBatchOptions o;
  o.max_len = max_len;
  o.batch_size = batch_size;
  o.seed = seed;
  o.num_workers = num_workers;
  o.where = std::move(where);
  return o;
}
}  // namespace

GraphBatchStream::GraphBatchStream(std::shared_ptr<const std::vector<InstructionRecord>> records,
                                   const FeatureTable& features, const Tokenizer& tokenizer,
                                   int64_t max_len, int64_t batch_size, uint64_t seed,
                                   int32_t num_workers, std::string where)
    : GraphBatchStream(std::move(records), features, tokenizer,
                       options_of(max_len, batch_size, seed, num_workers, std::move(where))) {}

GraphBatchStream::~GraphBatchStream() { prefetch_.reset(); }  // joins before anything else goes

GraphGptBatch GraphBatchStream::next() { return prefetch_->next(); }

int64_t GraphBatchStream::batches() const { return options_.first_element + prefetch_->consumed(); }

double GraphBatchStream::wait_seconds() const { return prefetch_->wait_seconds(); }

// Every rank estimates every record's length (the order must be the same everywhere), once, on
// the data workers' threads. On one thread of the 2-core bench machine, for stage-1-like records
// under LLaMA's tokenizer (bench/length_grouping.sh): 0.22 s per 10k records where words repeat
// as stage 1's titles do, 5.1 s per 10k if no word ever repeated, against 25 s per 10k to
// tokenise them; so GraphGPT's 183k stage-1 records cost seconds at start, not minutes.
void GraphBatchStream::compute_lengths() {
  const auto t0 = std::chrono::steady_clock::now();
  const size_t n = records_->size();
  lengths_.assign(n, 0);
  const size_t threads = std::min<size_t>(n, static_cast<size_t>(std::max(1, options_.num_workers)));
  std::vector<std::exception_ptr> errors(threads);
  auto measure = [this, n, threads, &errors](size_t t) {
    try {
      LengthEstimator length(tokenizer_, options_.max_len, options_.chat_template);
      for (size_t i = t; i < n; i += threads) lengths_[i] = length((*records_)[i]);
    } catch (...) {
      errors[t] = std::current_exception();  // re-thrown once every thread is joined
    }
  };
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(measure, t);
  measure(0);
  for (auto& th : pool) th.join();
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  length_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::shared_ptr<const std::vector<int64_t>> GraphBatchStream::epoch_order(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(orders_->mu);
  auto& cache = orders_->by_epoch;
  auto it = cache.find(epoch);
  if (it != cache.end()) return it->second;
  auto order = std::make_shared<const std::vector<int64_t>>(
      options_.group_by_length
          ? length_grouped_order(lengths_, options_.batch_size, options_.seed, epoch)
          : epoch_permutation(static_cast<int64_t>(records_->size()), options_.seed, epoch));
  cache.emplace(epoch, order);
  // Workers claim batches in order, so older epochs are done with (holders keep their copy).
  while (cache.size() > 2) cache.erase(cache.begin());
  return order;
}

std::vector<int64_t> GraphBatchStream::batch_indices(int64_t k) const {
  if (k < 0) throw std::invalid_argument("batch_indices: k < 0");
  const int64_t epoch = k / steps_per_epoch_;
  const int64_t step = k % steps_per_epoch_;
  auto order = epoch_order(epoch);
  const int64_t n = static_cast<int64_t>(order->size());
  const int64_t begin = step * options_.batch_size;
  const int64_t end = std::min(n, begin + options_.batch_size);
  return std::vector<int64_t>(order->begin() + begin, order->begin() + end);
}

std::vector<int64_t> GraphBatchStream::element_indices(int64_t e) const {
  std::vector<int64_t> all = batch_indices(e / options_.shards_here);
  if (options_.shards == 1) return all;
  const int64_t part = options_.batch_size / options_.shards;
  const int64_t s = options_.first_shard + e % options_.shards_here;
  return std::vector<int64_t>(all.begin() + s * part, all.begin() + (s + 1) * part);
}

uint64_t graph_dropout_seed(uint64_t seed, int64_t batch, int64_t record, int64_t graph) {
  // SplitMix64's finaliser over each part in turn, so that nearby keys give unrelated seeds.
  auto mix = [](uint64_t h, uint64_t v) {
    uint64_t z = h ^ (v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2));
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  };
  uint64_t h = mix(0x6A09E667F3BCC909ULL, seed);
  for (int64_t v : {batch, record, graph}) h = mix(h, static_cast<uint64_t>(v));
  return h;
}

GraphGptBatch GraphBatchStream::build(int64_t e) const {
  std::vector<GraphExample> examples;
  const std::vector<int64_t> indices = element_indices(e);
  for (int64_t i : indices)
    examples.push_back(make_example((*records_)[static_cast<size_t>(i)], features_, tokenizer_,
                                    options_.max_len, options_.where, options_.chat_template));
  GraphGptBatch batch = collate(examples, pad_id_);
  // Keyed by what a graph is in the run (global batch, record, its place in the record), not by
  // where it is built, so that every layout draws the same dropout masks.
  const int64_t global_batch = e / options_.shards_here;
  int64_t nth = 0;
  for (size_t k = 0; k < batch.graphs.size(); ++k) {
    GraphInput& g = batch.graphs[k];
    nth = k > 0 && batch.graphs[k - 1].row == g.row ? nth + 1 : 0;
    g.dropout_seed = graph_dropout_seed(options_.seed, global_batch, indices[static_cast<size_t>(g.row)], nth);
  }
  if (!options_.pin_memory) return batch;
  // Pinned here, in the worker that built it: the step's copy to the GPU then waits for nothing.
  batch.input_ids = pinned(batch.input_ids);
  batch.labels = pinned(batch.labels);
  batch.attention_mask = pinned(batch.attention_mask);
  for (GraphInput& g : batch.graphs) {
    g.x = pinned(g.x);
    g.edge_index = pinned(g.edge_index);
  }
  return batch;
}

}  // namespace gt
