// Padding with and without length-grouped batches ([data].group_by_length) on records shaped like
// GraphGPT's stage 1, and what computing the lengths costs.
//
//   length_grouping TOKENIZER [--records 2048] [--batch 8] [--shards 4] [--max-len 2048]
//
// The records are graph_matching records of a synthetic citation graph (graphtune data build's:
// 2 hops x 10 neighbours, up to 111 nodes, each node's title in the question and in the answer),
// tokenised by TOKENIZER ("bytes" or a tokenizer.model). Every part of every global batch of one
// epoch is built by GraphBatchStream as training builds it (batch `--batch`, cut into `--shards`
// parts: GraphGPT's 4 GPUs x 2), and padding is read off each part's attention mask.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "data/conversation.hpp"
#include "data/instruction_builder.hpp"
#include "data/synthetic_graph.hpp"
#include "loader/feature_table.hpp"
#include "loader/graph_batches.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Padding {
  int64_t computed = 0, real = 0, parts = 0;
  double fraction() const { return computed ? 1.0 - static_cast<double>(real) / static_cast<double>(computed) : 0.0; }
};

// One epoch, every part of every global batch, built and measured.
Padding epoch_padding(std::shared_ptr<const std::vector<gt::InstructionRecord>> records, const gt::FeatureTable& table,
                      const gt::Tokenizer& tok, gt::GraphBatchOptions o) {
  Padding p;
  o.drop_last = true;
  o.first_shard = 0;
  o.shards_here = o.shards;
  o.num_workers = 2;
  gt::GraphBatchStream s(records, table, tok, o);
  for (int64_t e = 0; e < s.steps_per_epoch() * o.shards; ++e) {
    const gt::GraphGptBatch b = s.next();
    p.computed += b.attention_mask.numel();
    p.real += b.num_tokens();
    ++p.parts;
  }
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: length_grouping TOKENIZER [--records N] [--batch B] [--shards S] [--max-len L]\n");
    return 2;
  }
  int64_t n = 2048, batch = 8, shards = 4, max_len = 2048;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int64_t v = std::atoll(argv[i + 1]);
    if (k == "--records") n = v;
    else if (k == "--batch") batch = v;
    else if (k == "--shards") shards = v;
    else if (k == "--max-len") max_len = v;
    else {
      std::fprintf(stderr, "length_grouping: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  torch::set_num_threads(1);
  auto tok = gt::load_tokenizer(argv[1]);
  tok->add_special_tokens({"<g_patch>", "<g_start>", "<g_end>"});

  gt::SyntheticGraphParams gp;
  gp.nodes = static_cast<int32_t>(n * 2);  // 60% of the nodes are training centres
  gp.seed = 7;
  gp.title_min_words = 2;  // titles of about 10 tokens: records of a few hundred to 2,048 tokens
  gp.title_max_words = 4;
  gp.mean_out_degree = 2.5;
  const gt::TextGraph g = gt::make_synthetic_graph(gp);
  const gt::FeatureTable table = gt::feature_table_from_graph(g);
  gt::InstructionBuildOptions bo;
  bo.task = gt::InstructionTask::kGraphMatching;
  bo.max_records = n;
  auto records = std::make_shared<const std::vector<gt::InstructionRecord>>(gt::records_of(gt::build_instructions(g, bo)));

  // What the estimate costs, on one thread, next to tokenising each record once, and how far it is
  // from the real count.
  auto t0 = std::chrono::steady_clock::now();
  std::vector<int64_t> lengths;
  {
    gt::LengthEstimator estimate(*tok, max_len);
    for (const auto& r : *records) lengths.push_back(estimate(r));
  }
  const double estimate_s = seconds_since(t0);
  // The bound for a corpus that never repeats a word across records: nothing remembered.
  t0 = std::chrono::steady_clock::now();
  for (const auto& r : *records) gt::LengthEstimator(*tok, max_len)(r);
  const double fresh_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  std::vector<int64_t> exact;
  for (const auto& r : *records) {
    std::vector<int64_t> counts;
    for (const auto& gr : r.graphs) counts.push_back(static_cast<int64_t>(gr.node_list.size()));
    exact.push_back(static_cast<int64_t>(gt::tokenize_conversation(r, counts, *tok, max_len).input_ids.size()));
  }
  const double exact_s = seconds_since(t0);
  int64_t worst = 0, off_by = 0, equal = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    const int64_t d = std::abs(lengths[i] - exact[i]);
    worst = std::max(worst, d);
    off_by += d;
    equal += d == 0;
  }
  std::vector<int64_t> sorted = exact;
  std::sort(sorted.begin(), sorted.end());
  double mean = 0;
  for (int64_t l : exact) mean += static_cast<double>(l);
  mean /= static_cast<double>(exact.size());
  const auto q = [&](double f) { return sorted[static_cast<size_t>(f * static_cast<double>(sorted.size() - 1))]; };
  const double per10k = 1e4 / static_cast<double>(records->size());
  std::printf("records %zu, tokens per record: min %lld, 10%% %lld, median %lld, 90%% %lld, max %lld, mean %.0f "
              "(max_len %lld, %lld at it)\n",
              records->size(), static_cast<long long>(sorted.front()), static_cast<long long>(q(0.1)),
              static_cast<long long>(q(0.5)), static_cast<long long>(q(0.9)), static_cast<long long>(sorted.back()), mean,
              static_cast<long long>(max_len), static_cast<long long>(std::count(sorted.begin(), sorted.end(), max_len)));
  std::printf("lengths on 1 thread: estimated in %.3f s (%.2f s per 10k records; %.2f s per 10k with no word "
              "remembered across records), tokenised in %.3f s (%.2f s per 10k): %.0fx; estimate exact for %lld of "
              "%zu, off by %.2f tokens on average, %lld at most\n",
              estimate_s, estimate_s * per10k, fresh_s * per10k, exact_s, exact_s * per10k, exact_s / estimate_s,
              static_cast<long long>(equal), exact.size(), static_cast<double>(off_by) / static_cast<double>(exact.size()),
              static_cast<long long>(worst));

  gt::GraphBatchOptions o;
  o.max_len = max_len;
  o.batch_size = batch;
  o.shards = shards;
  o.seed = 42;
  const Padding off = epoch_padding(records, table, *tok, o);
  o.group_by_length = true;
  const Padding on = epoch_padding(records, table, *tok, o);
  std::printf("batch %lld in %lld parts of %lld, one epoch (%lld parts):\n", static_cast<long long>(batch),
              static_cast<long long>(shards), static_cast<long long>(batch / shards), static_cast<long long>(off.parts));
  std::printf("  %-22s computed %10lld  real %10lld  padding %6.2f%%\n", "shuffled", static_cast<long long>(off.computed),
              static_cast<long long>(off.real), 100 * off.fraction());
  std::printf("  %-22s computed %10lld  real %10lld  padding %6.2f%%\n", "group_by_length", static_cast<long long>(on.computed),
              static_cast<long long>(on.real), 100 * on.fraction());
  std::printf("padding ratio shuffled / grouped: %.1fx; computed tokens %.3fx\n", off.fraction() / on.fraction(),
              static_cast<double>(on.computed) / static_cast<double>(off.computed));
  return 0;
}
