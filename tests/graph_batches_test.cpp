// GraphGPT batches: examples from records and the feature table, collation, and the
// prefetching stream the trainer pulls from (order, errors, shutdown, wait time).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "data/chat_template.hpp"
#include "data/conversation.hpp"
#include "data/instruction_builder.hpp"
#include "data/instructions.hpp"
#include "data/synthetic_graph.hpp"
#include "loader/feature_table.hpp"
#include "loader/graph_batches.hpp"
#include "loader/prefetch.hpp"
#include "tests/assets.hpp"
#include "tests/input_error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace {

using gt::test::input_error_of;

std::unique_ptr<gt::Tokenizer> graph_tokenizer(std::unique_ptr<gt::Tokenizer> tok) {
  tok->add_special_tokens({"<g_patch>", "<g_start>", "<g_end>"});
  return tok;
}

// A record of dataset "toy" whose graph k has node_counts[k] nodes starting at first_node,
// a star around the centre; the answer's length varies with `i` so that lengths differ.
gt::InstructionRecord toy_record(int i, std::vector<int64_t> node_counts = {3}, int64_t first_node = 0) {
  gt::InstructionRecord r;
  r.id = "toy_train_" + std::to_string(i) + (node_counts.size() == 2 ? "_x_LP" : "");
  r.dataset = gt::dataset_of_id(r.id);
  for (size_t k = 0; k < node_counts.size(); ++k) {
    gt::GraphRef g;
    for (int64_t j = 0; j < node_counts[k]; ++j) g.node_list.push_back(first_node + (i * 7 + 3 * j + 5 * k) % 40);
    g.node_idx = g.node_list[0];
    for (int64_t j = 1; j < node_counts[k]; ++j) {
      g.edge_index[0].push_back(j);
      g.edge_index[1].push_back(0);
    }
    r.graphs.push_back(g);
  }
  std::string q = node_counts.size() == 2 ? "Are <graph> and <graph> linked?" : "Paper <graph>: class?";
  r.conversations = {{"human", q}, {"gpt", "answer " + std::string(static_cast<size_t>(i % 5), 'z')}};
  return r;
}

gt::FeatureTable toy_table(int64_t n = 40, int64_t f = 6) {
  gt::FeatureTable t;
  t.x["toy"] = torch::arange(n * f, torch::kFloat32).reshape({n, f});
  return t;
}

std::shared_ptr<const std::vector<gt::InstructionRecord>> toy_records(int n) {
  auto v = std::make_shared<std::vector<gt::InstructionRecord>>();
  for (int i = 0; i < n; ++i) v->push_back(toy_record(i, {static_cast<int64_t>(1 + i % 4)}));
  return v;
}

// What every batch must satisfy, against the records it came from.
void expect_consistent(const gt::GraphGptBatch& b, const gt::Tokenizer& tok, const gt::FeatureTable& table,
                       const std::map<std::string, const gt::InstructionRecord*>& by_id) {
  const int64_t rows = b.input_ids.size(0), t = b.input_ids.size(1);
  ASSERT_EQ(b.labels.sizes(), b.input_ids.sizes());
  ASSERT_EQ(b.attention_mask.sizes(), b.input_ids.sizes());
  ASSERT_EQ(static_cast<int64_t>(b.ids.size()), rows);
  const int32_t patch = tok.piece_to_id("<g_patch>");
  const int32_t start_id = tok.piece_to_id("<g_start>");
  const int32_t end_id = tok.piece_to_id("<g_end>");
  auto ids = b.input_ids.accessor<int64_t, 2>();
  auto labels = b.labels.accessor<int64_t, 2>();
  auto mask = b.attention_mask.accessor<int64_t, 2>();
  int64_t longest = 0;
  for (int64_t r = 0; r < rows; ++r) {
    int64_t len = 0;
    while (len < t && mask[r][len] == 1) ++len;
    longest = std::max(longest, len);
    EXPECT_EQ(ids[r][0], tok.bos_id());
    for (int64_t i = len; i < t; ++i) {
      EXPECT_EQ(mask[r][i], 0) << "mask not a prefix, row " << r;
      EXPECT_EQ(ids[r][i], tok.pad_id());
      EXPECT_EQ(labels[r][i], gt::kIgnoreIndex);
    }
  }
  EXPECT_EQ(longest, t) << "padded beyond the longest example";
  size_t gi = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const gt::InstructionRecord& rec = *by_id.at(b.ids[static_cast<size_t>(r)]);
    const torch::Tensor& x = table.x.at(rec.dataset);
    for (size_t k = 0; k < rec.graphs.size(); ++k, ++gi) {
      ASSERT_LT(gi, b.graphs.size());
      const gt::GraphInput& g = b.graphs[gi];
      const auto& ref = rec.graphs[k];
      const int64_t n = static_cast<int64_t>(ref.node_list.size());
      EXPECT_EQ(g.row, r);
      ASSERT_EQ(g.x.dim(), 2);
      ASSERT_EQ(g.x.size(0), n);
      EXPECT_EQ(g.x.scalar_type(), torch::kFloat32);
      EXPECT_EQ(ids[r][g.start - 1], start_id);
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_EQ(ids[r][g.start + i], patch) << rec.id << " graph " << k << " position " << i;
        EXPECT_TRUE(torch::equal(g.x[i], x[ref.node_list[static_cast<size_t>(i)]])) << rec.id << " node " << i;
      }
      EXPECT_EQ(ids[r][g.start + n], end_id);
      ASSERT_EQ(g.edge_index.dim(), 2);
      ASSERT_EQ(g.edge_index.size(0), 2);
      ASSERT_EQ(g.edge_index.size(1), static_cast<int64_t>(ref.edge_index[0].size()));
      EXPECT_EQ(g.edge_index.scalar_type(), torch::kLong);
      for (int64_t e = 0; e < g.edge_index.size(1); ++e) {
        EXPECT_EQ(g.edge_index[0][e].item<int64_t>(), ref.edge_index[0][static_cast<size_t>(e)]);
        EXPECT_EQ(g.edge_index[1][e].item<int64_t>(), ref.edge_index[1][static_cast<size_t>(e)]);
      }
    }
  }
  EXPECT_EQ(gi, b.graphs.size());
}

std::map<std::string, const gt::InstructionRecord*> index_of(const std::vector<gt::InstructionRecord>& v) {
  std::map<std::string, const gt::InstructionRecord*> m;
  for (const auto& r : v) m[r.id] = &r;
  return m;
}

TEST(GraphBatches, MakeExampleGathersRowsAndEdges) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto rec = toy_record(3, {4, 2});
  auto ex = gt::make_example(rec, table, *tok, 4096, "toy.json");
  EXPECT_EQ(ex.id, rec.id);
  ASSERT_EQ(ex.x.size(), 2u);
  ASSERT_EQ(ex.edge_index.size(), 2u);
  ASSERT_EQ(ex.tokens.graph_spans.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    const auto& nl = rec.graphs[k].node_list;
    ASSERT_EQ(ex.x[k].sizes(), (std::vector<int64_t>{static_cast<int64_t>(nl.size()), 6}));
    for (size_t i = 0; i < nl.size(); ++i)
      EXPECT_TRUE(torch::equal(ex.x[k][static_cast<int64_t>(i)], table.x["toy"][nl[i]]));
    EXPECT_EQ(ex.edge_index[k].sizes(), (std::vector<int64_t>{2, static_cast<int64_t>(nl.size()) - 1}));
    EXPECT_EQ(ex.tokens.graph_spans[k][1] - ex.tokens.graph_spans[k][0], static_cast<int64_t>(nl.size()));
  }
  EXPECT_FALSE(ex.tokens.truncated);
  // The same tokens as tokenize_conversation gives with the node counts.
  auto want = gt::tokenize_conversation(rec, {4, 2}, *tok, 4096);
  EXPECT_EQ(ex.tokens.input_ids, want.input_ids);
  EXPECT_EQ(ex.tokens.labels, want.labels);
}

TEST(GraphBatches, MakeExampleErrors) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto bad = toy_record(1);
  bad.graphs[0].node_list[2] = 40;  // one past the table
  std::string msg = input_error_of([&] { gt::make_example(bad, table, *tok, 4096, "toy.json"); });
  EXPECT_NE(msg.find("toy.json"), std::string::npos) << msg;
  EXPECT_NE(msg.find("toy_train_1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("node_list[2]"), std::string::npos) << msg;

  auto other = toy_record(1);
  other.id = "cora_train_1";
  other.dataset = "cora";
  msg = input_error_of([&] { gt::make_example(other, table, *tok, 4096, "toy.json"); });
  EXPECT_NE(msg.find("cora"), std::string::npos) << msg;
  EXPECT_NE(msg.find("toy"), std::string::npos) << msg;

  // max_len cutting through the graph tokens.
  msg = input_error_of([&] { gt::make_example(toy_record(1), table, *tok, 20, "toy.json"); });
  EXPECT_NE(msg.find("toy_train_1"), std::string::npos) << msg;

  // Truncation after the graph is fine.
  auto full = gt::make_example(toy_record(1), table, *tok, 4096, "toy.json");
  const int64_t cut = full.tokens.graph_spans[0][1] + 2;
  auto ex = gt::make_example(toy_record(1), table, *tok, cut, "toy.json");
  EXPECT_TRUE(ex.tokens.truncated);
  EXPECT_EQ(static_cast<int64_t>(ex.tokens.input_ids.size()), cut);
}

TEST(GraphBatches, CollateShapesPaddingAndGraphs) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  std::vector<gt::InstructionRecord> recs = {toy_record(0, {1}), toy_record(4, {3, 2}), toy_record(2, {4})};
  std::vector<gt::GraphExample> exs;
  size_t longest = 0;
  for (const auto& r : recs) {
    exs.push_back(gt::make_example(r, table, *tok, 4096, "toy.json"));
    longest = std::max(longest, exs.back().tokens.input_ids.size());
  }
  auto b = gt::collate(exs, tok->pad_id());
  ASSERT_EQ(b.input_ids.sizes(), (std::vector<int64_t>{3, static_cast<int64_t>(longest)}));
  EXPECT_EQ(b.input_ids.scalar_type(), torch::kLong);
  EXPECT_EQ(b.labels.scalar_type(), torch::kLong);
  EXPECT_EQ(b.attention_mask.scalar_type(), torch::kLong);
  EXPECT_EQ(b.graphs.size(), 4u);
  EXPECT_EQ(b.ids, (std::vector<std::string>{recs[0].id, recs[1].id, recs[2].id}));
  int64_t real = 0;
  for (size_t r = 0; r < exs.size(); ++r) {
    const auto& tk = exs[r].tokens;
    real += static_cast<int64_t>(tk.input_ids.size());
    for (size_t i = 0; i < tk.input_ids.size(); ++i) {
      EXPECT_EQ(b.input_ids[r][i].item<int64_t>(), tk.input_ids[i]);
      EXPECT_EQ(b.labels[r][i].item<int64_t>(), tk.labels[i]);
    }
    // Some answer tokens are learned in every row.
    EXPECT_GT((b.labels[r] != gt::kIgnoreIndex).sum().item<int64_t>(), 0);
  }
  EXPECT_EQ(b.num_tokens(), real);
  EXPECT_EQ(b.graphs[1].row, 1);
  EXPECT_EQ(b.graphs[2].row, 1);
  EXPECT_EQ(b.graphs[1].start, exs[1].tokens.graph_spans[0][0]);
  EXPECT_EQ(b.graphs[2].start, exs[1].tokens.graph_spans[1][0]);
  expect_consistent(b, *tok, table, index_of(recs));

  // A span that does not match the graph's node count is an error naming the record.
  auto broken = exs;
  broken[2].x[0] = broken[2].x[0].narrow(0, 0, 3);
  std::string msg = input_error_of([&] { gt::collate(broken, tok->pad_id()); });
  EXPECT_NE(msg.find(recs[2].id), std::string::npos) << msg;
  EXPECT_THROW(gt::collate({}, 0), std::invalid_argument);
}

// The real LLaMA tokenizer on records built from a small synthetic citation graph.
TEST(GraphBatches, LlamaTokenizerOnBuiltInstructions) {
  GT_REQUIRE_ASSETS(assets);
  auto tok = graph_tokenizer(gt::load_tokenizer(assets + "/llm/tokenizer.model"));
  ASSERT_EQ(tok->piece_to_id("<g_patch>"), 32000);
  gt::SyntheticGraphParams p;
  p.nodes = 200;
  p.seed = 3;
  const gt::TextGraph g = gt::make_synthetic_graph(p);
  const gt::FeatureTable table = gt::feature_table_from_graph(g);
  for (auto task : {gt::InstructionTask::kNodeClassification, gt::InstructionTask::kLinkPrediction}) {
    gt::InstructionBuildOptions o;
    o.task = task;
    o.max_records = 10;
    o.max_nodes = 12;
    auto recs = std::make_shared<const std::vector<gt::InstructionRecord>>(
        gt::records_of(gt::build_instructions(g, o)));
    ASSERT_FALSE(recs->empty());
    gt::GraphBatchOptions bo;
    bo.batch_size = 3;
    bo.num_workers = 2;
    bo.seed = 11;
    gt::GraphBatchStream s(recs, table, *tok, bo);
    const auto by_id = index_of(*recs);
    std::multiset<std::string> seen;
    for (int64_t k = 0; k < s.steps_per_epoch(); ++k) {
      auto b = s.next();
      expect_consistent(b, *tok, table, by_id);
      seen.insert(b.ids.begin(), b.ids.end());
    }
    EXPECT_EQ(seen.size(), recs->size());
    EXPECT_EQ(std::set<std::string>(seen.begin(), seen.end()).size(), recs->size());
    EXPECT_EQ(s.epoch(), 1);
  }
}

TEST(GraphBatches, StreamCoversEachEpochInAShuffledOrder) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto recs = toy_records(10);
  gt::GraphBatchOptions o;
  o.batch_size = 4;
  o.seed = 5;
  gt::GraphBatchStream s(recs, table, *tok, o);
  EXPECT_EQ(s.steps_per_epoch(), 3);
  const auto by_id = index_of(*recs);
  std::vector<std::vector<std::string>> epochs(2);
  for (int e = 0; e < 2; ++e) {
    EXPECT_EQ(s.epoch(), e);
    for (int k = 0; k < 3; ++k) {
      auto b = s.next();
      EXPECT_EQ(b.input_ids.size(0), k == 2 ? 2 : 4);  // the last batch holds the rest
      expect_consistent(b, *tok, table, by_id);
      epochs[e].insert(epochs[e].end(), b.ids.begin(), b.ids.end());
    }
    EXPECT_EQ(std::set<std::string>(epochs[e].begin(), epochs[e].end()).size(), 10u);
  }
  EXPECT_EQ(s.batches(), 6);
  EXPECT_EQ(s.epoch(), 2);
  EXPECT_NE(epochs[0], epochs[1]) << "epochs should be shuffled differently";
  EXPECT_EQ(gt::epoch_permutation(10, 5, 0), gt::epoch_permutation(10, 5, 0));
  EXPECT_NE(gt::epoch_permutation(100, 5, 0), gt::epoch_permutation(100, 6, 0));
}

// Data parallelism and micro-batches: every (replica, micro-batch) stream builds only its part of
// each global batch, and the parts, in order, are exactly the global batch; with drop_last every
// batch is full (10 records, batches of 4: two per epoch, the remaining 2 skipped).
TEST(GraphBatches, ShardsCutEachGlobalBatchInOrder) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto recs = toy_records(10);
  gt::GraphBatchOptions o;
  o.batch_size = 4;
  o.seed = 5;
  o.drop_last = true;
  gt::GraphBatchStream whole(recs, table, *tok, o);
  EXPECT_EQ(whole.steps_per_epoch(), 2);
  o.shards = 4;  // 2 replicas x 2 micro-batches
  for (int64_t k = 0; k < 5; ++k) {  // past an epoch boundary
    std::vector<int64_t> joined;
    for (int64_t replica = 0; replica < 2; ++replica) {
      o.first_shard = replica * 2;
      o.shards_here = 2;
      gt::GraphBatchStream part(recs, table, *tok, o);
      for (int64_t j = 0; j < 2; ++j) {
        auto ids = part.element_indices(k * 2 + j);
        EXPECT_EQ(ids.size(), 1u);
        joined.insert(joined.end(), ids.begin(), ids.end());
      }
    }
    EXPECT_EQ(joined, whole.batch_indices(k)) << "global batch " << k;
    EXPECT_EQ(whole.batch_indices(k).size(), 4u);
  }
  o.shards = 3;  // does not divide the batch
  o.first_shard = 0;
  o.shards_here = 1;
  EXPECT_THROW(gt::GraphBatchStream(recs, table, *tok, o), std::invalid_argument);
  o.shards = 1;
  o.batch_size = 11;  // more than there are records
  EXPECT_THROW(gt::GraphBatchStream(recs, table, *tok, o), gt::InputError);
}

TEST(GraphBatches, SameBatchesWhateverTheNumberOfWorkers) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto recs = toy_records(23);
  auto run = [&](int32_t workers) {
    gt::GraphBatchStream s(recs, table, *tok, /*max_len=*/512, /*batch_size=*/3, /*seed=*/99, workers);
    std::vector<torch::Tensor> out;
    for (int64_t k = 0; k < 2 * s.steps_per_epoch(); ++k) {
      auto b = s.next();
      out.push_back(b.input_ids);
      out.push_back(b.labels);
      for (const auto& g : b.graphs) out.push_back(g.x);
    }
    return out;
  };
  const auto a = run(0);
  for (int32_t w : {1, 3}) {
    const auto b = run(w);
    ASSERT_EQ(a.size(), b.size()) << w << " workers";
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_TRUE(a[i].sizes() == b[i].sizes() && torch::equal(a[i], b[i])) << w << " workers, tensor " << i;
  }
}

// Records whose answers run from 300 to 2,000 bytes (a byte per token with the byte tokenizer),
// spread evenly by a fixed stride: the shape of GraphGPT's stage 1, a few hundred tokens to 2,048.
std::shared_ptr<const std::vector<gt::InstructionRecord>> spread_records(int n) {
  auto v = std::make_shared<std::vector<gt::InstructionRecord>>();
  for (int i = 0; i < n; ++i) {
    gt::InstructionRecord r = toy_record(i, {static_cast<int64_t>(1 + i % 4)});
    r.conversations[1].value = "answer " + std::string(static_cast<size_t>(300 + (i * 769) % 1700), 'z');
    v->push_back(r);
  }
  return v;
}

// Padding over every part of one epoch, read off the built batches.
double padding_fraction(gt::GraphBatchStream& s) {
  int64_t computed = 0, real = 0;
  for (int64_t e = 0; e < s.steps_per_epoch() * s.options().shards_here; ++e) {
    auto b = s.next();
    computed += b.attention_mask.numel();
    real += b.num_tokens();
  }
  return 1.0 - static_cast<double>(real) / static_cast<double>(computed);
}

TEST(GraphBatches, LengthEstimateIsWhatMakeExampleGives) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  tok->add_special_tokens({gt::kImStart, gt::kImEnd});
  auto table = toy_table();
  auto recs = spread_records(20);
  std::vector<gt::InstructionRecord> all(recs->begin(), recs->end());
  all.push_back(toy_record(3, {4, 2}));  // two graphs
  gt::InstructionRecord spaced = toy_record(5, {2});
  spaced.conversations[0].value = "Two  spaces,\ta tab\nand a line: <graph> ok?";
  spaced.conversations[1].value = "yes\n\n";
  all.push_back(spaced);
  for (const gt::ChatTemplate& tmpl : {gt::ChatTemplate::vicuna_v1_1(), gt::ChatTemplate::chatml()}) {
    gt::LengthEstimator estimate(*tok, 4096, tmpl);
    for (const auto& r : all) {
      const auto ex = gt::make_example(r, table, *tok, 4096, "toy.json", tmpl);
      EXPECT_EQ(estimate(r), static_cast<int64_t>(ex.tokens.input_ids.size())) << r.id << " " << gt::chat_template_name(tmpl);
    }
    // Capped at max_len, as make_example cuts.
    gt::LengthEstimator capped(*tok, 100, tmpl);
    EXPECT_EQ(capped(all[0]), 100);
  }
  // A record that does not render counts as max_len.
  gt::InstructionRecord bad = toy_record(1);
  bad.conversations[0].from = "gpt";
  gt::LengthEstimator estimate(*tok, 777);
  EXPECT_EQ(estimate(bad), 777);
}

// The real LLaMA tokenizer, where a word's pieces depend on the space before it.
TEST(GraphBatches, LengthEstimateWithTheLlamaTokenizer) {
  GT_REQUIRE_ASSETS(assets);
  auto tok = graph_tokenizer(gt::load_tokenizer(assets + "/llm/tokenizer.model"));
  gt::SyntheticGraphParams p;
  p.nodes = 300;
  p.seed = 4;
  const gt::TextGraph g = gt::make_synthetic_graph(p);
  const gt::FeatureTable table = gt::feature_table_from_graph(g);
  for (auto task : {gt::InstructionTask::kGraphMatching, gt::InstructionTask::kNodeClassification,
                    gt::InstructionTask::kLinkPrediction}) {
    gt::InstructionBuildOptions o;
    o.task = task;
    o.max_records = 20;
    const auto recs = gt::records_of(gt::build_instructions(g, o));
    gt::LengthEstimator estimate(*tok, 1 << 20);
    for (const auto& r : recs)
      EXPECT_EQ(estimate(r), static_cast<int64_t>(gt::make_example(r, table, *tok, 1 << 20, "built").tokens.input_ids.size()))
          << r.id;
  }
}

TEST(GraphBatches, LengthGroupedOrder) {
  std::vector<int64_t> lengths;
  gt::Rng rng(3);
  for (int i = 0; i < 203; ++i) lengths.push_back(100 + rng.below(1900));
  const int64_t bs = 8, batches = 203 / bs;
  for (int64_t epoch : {0, 1}) {
    const auto order = gt::length_grouped_order(lengths, bs, 9, epoch);
    EXPECT_EQ(order, gt::length_grouped_order(lengths, bs, 9, epoch)) << "deterministic";
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (int64_t i = 0; i < 203; ++i) ASSERT_EQ(sorted[static_cast<size_t>(i)], i) << "a permutation";
    // The remainder is the permutation's tail, in its order: the short last batch drop_last skips.
    const auto perm = gt::epoch_permutation(203, 9, epoch);
    EXPECT_TRUE(std::equal(order.begin() + batches * bs, order.end(), perm.begin() + batches * bs));
    // Each batch longest first; the batch holding the longest record leads.
    for (int64_t b = 0; b < batches; ++b)
      for (int64_t i = 1; i < bs; ++i)
        EXPECT_GE(lengths[order[b * bs + i - 1]], lengths[order[b * bs + i]]) << "batch " << b;
    int64_t longest = 0;
    for (int64_t i = 0; i < batches * bs; ++i) longest = std::max(longest, lengths[order[i]]);
    EXPECT_EQ(lengths[order[0]], longest);
  }
  EXPECT_NE(gt::length_grouped_order(lengths, bs, 9, 0), gt::length_grouped_order(lengths, bs, 9, 1));
  EXPECT_NE(gt::length_grouped_order(lengths, bs, 9, 0), gt::length_grouped_order(lengths, bs, 10, 0));
  // Which records meet in a batch changes with the epoch too, not only the batches' order.
  auto batch_sets = [&](int64_t epoch) {
    const auto order = gt::length_grouped_order(lengths, bs, 9, epoch);
    std::set<std::set<int64_t>> sets;
    for (int64_t b = 0; b < batches; ++b) sets.insert(std::set<int64_t>(order.begin() + b * bs, order.begin() + (b + 1) * bs));
    return sets;
  };
  EXPECT_NE(batch_sets(0), batch_sets(1));
  EXPECT_EQ(gt::megabatch_batches(3), 1);
  EXPECT_EQ(gt::megabatch_batches(100), 25);
  EXPECT_EQ(gt::megabatch_batches(22899), 50);  // GraphGPT's stage 1 at batch 8
}

// Options of a length-grouped stream.
gt::GraphBatchOptions grouped_options(int64_t batch_size, uint64_t seed, bool drop_last) {
  gt::GraphBatchOptions o;
  o.batch_size = batch_size;
  o.seed = seed;
  o.drop_last = drop_last;
  o.group_by_length = true;
  return o;
}

TEST(GraphBatches, GroupedStreamCoversEachEpochOnce) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto recs = spread_records(50);
  for (bool drop_last : {false, true}) {
    gt::GraphBatchStream s(recs, table, *tok, grouped_options(4, 7, drop_last));
    ASSERT_EQ(s.lengths().size(), 50u);
    EXPECT_EQ(s.steps_per_epoch(), drop_last ? 12 : 13);
    std::vector<std::vector<std::string>> epochs(3);
    for (int e = 0; e < 3; ++e) {
      for (int64_t k = 0; k < s.steps_per_epoch(); ++k) {
        auto b = s.next();
        EXPECT_EQ(b.input_ids.size(0), !drop_last && k == 12 ? 2 : 4);
        epochs[e].insert(epochs[e].end(), b.ids.begin(), b.ids.end());
      }
      const std::set<std::string> once(epochs[e].begin(), epochs[e].end());
      EXPECT_EQ(once.size(), epochs[e].size()) << "a record twice in epoch " << e;
      EXPECT_EQ(once.size(), drop_last ? 48u : 50u);
    }
    EXPECT_NE(epochs[0], epochs[1]);
    EXPECT_NE(epochs[1], epochs[2]);
  }
}

// The same global batches whatever the number of workers, and parts that join into them.
TEST(GraphBatches, GroupedBatchesWhateverTheWorkersAndShards) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto recs = spread_records(70);
  const gt::GraphBatchOptions o = grouped_options(8, 3, true);
  auto run = [&](int32_t workers) {
    gt::GraphBatchOptions w = o;
    w.num_workers = workers;
    gt::GraphBatchStream s(recs, table, *tok, w);
    std::vector<torch::Tensor> out;
    for (int64_t k = 0; k < 2 * s.steps_per_epoch(); ++k) out.push_back(s.next().input_ids);
    return out;
  };
  const auto a = run(0);
  for (int32_t w : {1, 3}) {
    const auto b = run(w);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_TRUE(torch::equal(a[i], b[i])) << w << " workers, batch " << i;
  }
  gt::GraphBatchStream whole(recs, table, *tok, o);
  for (int64_t shards : {2, 4, 8}) {
    for (int64_t k = 0; k < 2 * whole.steps_per_epoch(); ++k) {
      std::vector<int64_t> joined;
      for (int64_t replica = 0; replica < 2; ++replica) {
        gt::GraphBatchOptions p = o;
        p.shards = shards;
        p.shards_here = shards / 2;
        p.first_shard = replica * p.shards_here;
        gt::GraphBatchStream part(recs, table, *tok, p);
        for (int64_t j = 0; j < p.shards_here; ++j) {
          auto ids = part.element_indices(k * p.shards_here + j);
          joined.insert(joined.end(), ids.begin(), ids.end());
        }
      }
      ASSERT_EQ(joined, whole.batch_indices(k)) << shards << " shards, global batch " << k;
    }
  }
}

// A run resumed at element e (first_element) yields what the uninterrupted run yields from e on,
// across an epoch boundary.
TEST(GraphBatches, GroupedResumeSeesTheSameBatches) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto recs = spread_records(40);
  gt::GraphBatchOptions o = grouped_options(8, 11, true);
  o.shards = 4;
  o.first_shard = 2;
  o.shards_here = 2;
  o.num_workers = 2;
  gt::GraphBatchStream full(recs, table, *tok, o);
  std::vector<torch::Tensor> uninterrupted;
  for (int64_t e = 0; e < 16; ++e) uninterrupted.push_back(full.next().input_ids);
  o.first_element = 7;  // mid-epoch (5 batches of 2 parts an epoch)
  gt::GraphBatchStream resumed(recs, table, *tok, o);
  for (int64_t e = 7; e < 16; ++e)
    ASSERT_TRUE(torch::equal(resumed.next().input_ids, uninterrupted[static_cast<size_t>(e)])) << "element " << e;
}

// GraphGPT's stage-1 shape: batch 8 over 4 parts of 2 (4 GPUs x 2), lengths from 300 to 2,000.
TEST(GraphBatches, GroupingCutsPadding) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto recs = spread_records(256);
  gt::GraphBatchOptions o;
  o.max_len = 4096;
  o.batch_size = 8;
  o.seed = 5;
  o.drop_last = true;
  o.shards = 4;
  o.shards_here = 4;
  gt::GraphBatchStream shuffled(recs, table, *tok, o);
  o.group_by_length = true;
  gt::GraphBatchStream grouped(recs, table, *tok, o);
  const double off = padding_fraction(shuffled), on = padding_fraction(grouped);
  EXPECT_LT(on, 0.05) << "grouped: " << on << ", shuffled: " << off;
  EXPECT_GT(off, 0.15) << "grouped: " << on << ", shuffled: " << off;
  EXPECT_GT(off, 4 * on) << "grouped: " << on << ", shuffled: " << off;
}

// Each graph's dropout seed is a function of the run's seed, the global batch, the record and the
// graph's place in it: the same whichever part of the batch builds it, and another every epoch.
TEST(GraphBatches, DropoutSeedsFollowTheGraphNotTheLayout) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto v = std::make_shared<std::vector<gt::InstructionRecord>>();
  for (int i = 0; i < 12; ++i) v->push_back(toy_record(i, i % 3 ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 3}));
  gt::GraphBatchOptions o;
  o.batch_size = 4;
  o.seed = 21;
  o.drop_last = true;
  // (record id, its graph's place in it) -> the seeds that graph got, one per epoch.
  using Seeds = std::map<std::pair<std::string, int64_t>, std::set<uint64_t>>;
  auto seeds_of = [&](gt::GraphBatchOptions w, int64_t elements, Seeds& out) {
    gt::GraphBatchStream s(v, table, *tok, w);
    for (int64_t e = 0; e < elements; ++e) {
      const auto b = s.next();
      int64_t nth = 0;
      for (size_t k = 0; k < b.graphs.size(); ++k) {
        nth = k > 0 && b.graphs[k - 1].row == b.graphs[k].row ? nth + 1 : 0;
        ASSERT_TRUE(b.graphs[k].dropout_seed.has_value());
        out[{b.ids[static_cast<size_t>(b.graphs[k].row)], nth}].insert(*b.graphs[k].dropout_seed);
      }
    }
  };
  Seeds whole;
  seeds_of(o, 6, whole);  // two epochs of 3 batches
  std::set<uint64_t> distinct;
  for (const auto& [key, seeds] : whole) {
    EXPECT_EQ(seeds.size(), 2u) << key.first << ": not another mask in the second epoch";
    distinct.insert(seeds.begin(), seeds.end());
  }
  EXPECT_EQ(distinct.size(), 2 * whole.size());
  Seeds joined;
  for (int64_t part = 0; part < 4; ++part) {
    gt::GraphBatchOptions p = o;
    p.shards = 4;
    p.first_shard = part;
    seeds_of(p, 6, joined);
  }
  EXPECT_EQ(joined, whole);
  Seeds reseeded;
  o.seed = 22;
  seeds_of(o, 6, reseeded);
  for (const auto& [key, seeds] : reseeded) EXPECT_NE(seeds, whole[key]) << key.first;
}

TEST(GraphBatches, BadRecordSurfacesAsInputErrorFromNext) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  for (int32_t workers : {0, 2}) {
    auto v = std::make_shared<std::vector<gt::InstructionRecord>>(*toy_records(6));
    (*v)[4].graphs[0].node_list[0] = 1000;
    (*v)[4].graphs[0].node_idx = 1000;
    gt::GraphBatchOptions o;
    o.batch_size = 1;
    o.num_workers = workers;
    o.where = "train.json";
    gt::GraphBatchStream s(v, table, *tok, o);
    int errors = 0;
    std::string msg;
    for (int64_t k = 0; k < s.steps_per_epoch(); ++k) {
      try {
        auto b = s.next();
        EXPECT_NE(b.ids[0], "toy_train_4");
      } catch (const gt::InputError& e) {
        ++errors;
        msg = e.what();
      }
    }
    EXPECT_EQ(errors, 1) << workers << " workers";
    EXPECT_NE(msg.find("train.json"), std::string::npos) << msg;
    EXPECT_NE(msg.find("toy_train_4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1000"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_EQ(s.batches(), s.steps_per_epoch());
  }
}

TEST(GraphBatches, BadOptionsAreInputErrors) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto recs = toy_records(3);
  auto make = [&](gt::GraphBatchOptions o) { gt::GraphBatchStream s(recs, table, *tok, o); };
  gt::GraphBatchOptions o;
  o.batch_size = 0;
  EXPECT_NE(input_error_of([&] { make(o); }).find("batch_size"), std::string::npos);
  o = {};
  o.num_workers = -1;
  EXPECT_NE(input_error_of([&] { make(o); }).find("num_workers"), std::string::npos);
  o = {};
  o.max_len = 0;
  EXPECT_NE(input_error_of([&] { make(o); }).find("max_len"), std::string::npos);
  auto none = std::make_shared<const std::vector<gt::InstructionRecord>>();
  EXPECT_NE(input_error_of([&] { gt::GraphBatchStream s(none, table, *tok, {}); }).find("no instruction records"),
            std::string::npos);
}

TEST(GraphBatches, DestroyedMidEpochReturns) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto recs = toy_records(200);
  for (int32_t workers : {1, 3}) {
    gt::GraphBatchOptions o;
    o.num_workers = workers;
    {
      gt::GraphBatchStream s(recs, table, *tok, o);  // never read
    }
    {
      gt::GraphBatchStream s(recs, table, *tok, o);
      s.next();
      s.next();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the queue fill up
    }  // the test hanging here would be the failure
  }
}

TEST(OrderedPrefetcher, InOrderAndErrorsKeepTheirType) {
  for (int32_t workers : {0, 1, 4}) {
    gt::OrderedPrefetcher<int64_t> p(
        [](int64_t k) -> int64_t {
          // Later items finish first sometimes.
          std::this_thread::sleep_for(std::chrono::microseconds((k * 37) % 5 * 300));
          if (k == 3) gt::fail("file.json", "record 3 is bad");
          if (k == 5) throw std::logic_error("bug at 5");
          return k * k;
        },
        workers);
    for (int64_t k = 0; k < 12; ++k) {
      if (k == 3) {
        EXPECT_EQ(input_error_of([&] { p.next(); }), "file.json: record 3 is bad");
      } else if (k == 5) {
        EXPECT_THROW(p.next(), std::logic_error);
      } else {
        EXPECT_EQ(p.next(), k * k) << workers << " workers";
      }
    }
    EXPECT_EQ(p.consumed(), 12);
  }
}

// A slow consumer with 2 workers waits much less than building in its own thread. Loose on
// purpose (a shared machine): only the ratio, never absolute times.
TEST(OrderedPrefetcher, WorkersHideTheBuildTime) {
  auto wait_with = [](int32_t workers) {
    gt::OrderedPrefetcher<int> p(
        [](int64_t) {
          std::this_thread::sleep_for(std::chrono::milliseconds(15));
          return 1;
        },
        workers);
    for (int i = 0; i < 12; ++i) {
      p.next();
      std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the "training step"
    }
    return p.wait_seconds();
  };
  const double w0 = wait_with(0), w2 = wait_with(2);
  EXPECT_TRUE(std::isfinite(w0) && std::isfinite(w2));
  EXPECT_GT(w0, 0.0);
  EXPECT_GE(w2, 0.0);
  EXPECT_LT(w2, 0.5 * w0) << "0 workers waited " << w0 << " s, 2 workers " << w2 << " s";
}

TEST(GraphBatches, WaitTimeIsMeasured) {
  auto tok = graph_tokenizer(gt::byte_tokenizer());
  auto table = toy_table();
  auto recs = toy_records(12);
  for (int32_t workers : {0, 2}) {
    gt::GraphBatchOptions o;
    o.batch_size = 2;
    o.num_workers = workers;
    gt::GraphBatchStream s(recs, table, *tok, o);
    EXPECT_EQ(s.wait_seconds(), 0.0);
    for (int k = 0; k < 6; ++k) s.next();
    EXPECT_TRUE(std::isfinite(s.wait_seconds()));
    EXPECT_GE(s.wait_seconds(), 0.0);
    if (workers == 0) EXPECT_GT(s.wait_seconds(), 0.0);  // it built them itself
    EXPECT_EQ(s.batches(), 6);
  }
}

}  // namespace
