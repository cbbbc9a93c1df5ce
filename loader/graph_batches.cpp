#include "loader/graph_batches.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "common/error.hpp"
#include "common/rng.hpp"
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

std::shared_ptr<const std::vector<int64_t>> GraphBatchStream::epoch_order(int64_t epoch) const {
  std::lock_guard<std::mutex> lock(orders_->mu);
  auto& cache = orders_->by_epoch;
  auto it = cache.find(epoch);
  if (it != cache.end()) return it->second;
  auto order = std::make_shared<const std::vector<int64_t>>(
      epoch_permutation(static_cast<int64_t>(records_->size()), options_.seed, epoch));
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

GraphGptBatch GraphBatchStream::build(int64_t e) const {
  std::vector<GraphExample> examples;
  for (int64_t i : element_indices(e))
    examples.push_back(make_example((*records_)[static_cast<size_t>(i)], features_, tokenizer_,
                                    options_.max_len, options_.where, options_.chat_template));
  GraphGptBatch batch = collate(examples, pad_id_);
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
