#pragma once
// GraphGPT training batches from instruction records: each record's subgraphs get their node
// features (rows of the dataset's feature table, by node_list) and local edges, its conversation
// is tokenised with the graph tokens spliced in (data/conversation.hpp), and examples are
// right-padded into a GraphGptBatch (model/graphgpt.hpp).
//
// GraphBatchStream is what the trainer pulls from: an endless sequence of batches, epoch after
// epoch, each epoch a seeded shuffle of the records (gt::Rng: the same seed gives the same
// batches on every machine), prepared ahead by worker threads in a bounded queue, handed out in
// the same order whatever the number of workers (loader/prefetch.hpp). With group_by_length the
// shuffle is cut into batches of records of similar length (length_grouped_order), so that
// padding each micro-batch to its longest record costs little.
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/conversation.hpp"
#include "data/instructions.hpp"
#include "loader/feature_table.hpp"
#include "model/graphgpt.hpp"

namespace gt {

class Tokenizer;
template <typename T>
class OrderedPrefetcher;

// One record, ready to batch.
struct GraphExample {
  std::string id;
  TokenizedExample tokens;              // unpadded; graph_spans[k] is graph k's <g_patch> run
  std::vector<torch::Tensor> x;         // per graph [N, F] float32: table rows of node_list
  std::vector<torch::Tensor> edge_index;  // per graph [2, E] int64, local positions
};

// Checks the record's node ids against its dataset's feature table (record.dataset selects it;
// InputError naming `where` when the table or a row is missing), gathers the features and
// tokenises the conversation with one <g_patch> per node. A conversation longer than max_len
// is cut (tokens.truncated); a cut through graph tokens is an InputError naming the record.
GraphExample make_example(const InstructionRecord& record, const FeatureTable& features,
                          const Tokenizer& tokenizer, int64_t max_len, const std::string& where,
                          const ChatTemplate& tmpl = {});

// The same for generation: the features gathered as make_example does, the tokens only the
// prompt of the final answer (tokenize_prompt: up to what opens the answer, "ASSISTANT:" or
// "<|im_start|>assistant\n" by the template; labels all ignored; a
// prompt longer than max_len is an InputError naming the record). collate() batches these too.
GraphExample make_prompt_example(const InstructionRecord& record, const FeatureTable& features,
                                 const Tokenizer& tokenizer, int64_t max_len, const std::string& where,
                                 const ChatTemplate& tmpl = {});

// Right padding to the longest example: input_ids pad_id, labels kIgnoreIndex (-100) and
// attention_mask 0 on padding. One GraphInput per graph of each example (row = the example's
// index, start = its graph_spans[k][0]); a span whose length is not the graph's node count is
// an InputError naming the record. An empty list is std::invalid_argument.
GraphGptBatch collate(const std::vector<GraphExample>& examples, int32_t pad_id);

struct GraphBatchOptions {
  int64_t max_len = 2048;    // GraphGPT's model_max_length
  int64_t batch_size = 1;    // examples per batch; an epoch's last batch may be smaller
  uint64_t seed = 42;        // epoch shuffles, and each graph's dropout seed (graph_dropout_seed)
  int32_t num_workers = 0;   // 0: batches are built in the caller's thread, inside next()
  int64_t queue_capacity = 0;  // batches ready or being built ahead (0: 2 * num_workers)
  std::string where = "instructions";  // names the records in messages (the file)
  ChatTemplate chat_template;  // how conversations are rendered and masked ([data].template)
  // Every batch full: an epoch's remainder (fewer than batch_size records) is skipped, and the
  // next epoch's shuffle puts other records there. Training sets it, so that a global batch
  // can always be split evenly over ranks and micro-batches.
  bool drop_last = false;
  // Data parallelism and micro-batches: each global batch is cut into `shards` equal parts, in
  // order, and this stream yields parts first_shard .. first_shard + shards_here - 1 of every
  // batch, one per next(). A dp rank with m pipeline micro-batches takes parts
  // [dp_rank * m, (dp_rank + 1) * m) of dp * m; only those records are ever read and built.
  // shards > 1 needs drop_last and batch_size divisible by shards.
  int64_t shards = 1, first_shard = 0, shards_here = 1;
  // The stream's first element: a run resumed at optimizer step s starts at the element step s
  // would have read, so it sees exactly the batches the uninterrupted run saw.
  int64_t first_element = 0;
  // Batches in pinned host memory, for a trainer that copies them to a GPU (needs CUDA).
  bool pin_memory = false;
  // Records of similar token length share a global batch, and its parts (shards) are cut from
  // it longest first, so every micro-batch holds neighbours in length ([data].group_by_length,
  // length_grouped_order). The lengths are estimated once (LengthEstimator), when the stream is
  // made, on max(1, num_workers) threads.
  bool group_by_length = false;
};

class GraphBatchStream {
 public:
  // The tokenizer must have GraphGPT's special tokens and outlive the stream (it is only read:
  // Tokenizer::encode is const and keeps no state, so workers share it). The feature table is
  // copied (its tensors are shared, not duplicated). Bad options or no records: InputError.
  GraphBatchStream(std::shared_ptr<const std::vector<InstructionRecord>> records,
                   const FeatureTable& features, const Tokenizer& tokenizer,
                   GraphBatchOptions options);
  // The same with the options spelled out (queue capacity 2 * num_workers); `where` names the
  // records in messages (the instruction file).
  GraphBatchStream(std::shared_ptr<const std::vector<InstructionRecord>> records,
                   const FeatureTable& features, const Tokenizer& tokenizer, int64_t max_len,
                   int64_t batch_size, uint64_t seed, int32_t num_workers,
                   std::string where = "instructions");
  // Stops and joins the workers; no hang when destroyed mid-epoch.
  ~GraphBatchStream();
  GraphBatchStream(const GraphBatchStream&) = delete;
  GraphBatchStream& operator=(const GraphBatchStream&) = delete;

  // The next batch (with shards, the next part of a batch): batch k of the stream is step
  // k % steps_per_epoch() of epoch k / steps_per_epoch(). An error building it (a bad record) is re-thrown here as it was
  // thrown (an InputError stays an InputError); the stream then moves on to the next batch.
  GraphGptBatch next();

  // ceil(records / batch_size), or floor with drop_last (in global batches, not parts)
  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  // The same for n records, before a stream exists.
  static int64_t epoch_steps(int64_t n, const GraphBatchOptions& o) {
    return o.drop_last ? n / o.batch_size : (n + o.batch_size - 1) / o.batch_size;
  }
  int64_t batches() const;          // element index of the next next() (first_element + those returned or failed)
  int64_t epoch() const { return batches() / (steps_per_epoch_ * options_.shards_here); }  // of the next one
  double wait_seconds() const;      // total time next() was blocked waiting for data
  int64_t num_records() const { return static_cast<int64_t>(records_->size()); }
  const GraphBatchOptions& options() const { return options_; }
  // With group_by_length: each record's estimated length (LengthEstimator), and the seconds
  // estimating them took (empty and 0 without).
  const std::vector<int64_t>& lengths() const { return lengths_; }
  double length_seconds() const { return length_seconds_; }

  // Record indices of global batch k (deterministic in seed), and of this stream's element e
  // (what the e-th next() builds: its part of batch e / shards_here).
  std::vector<int64_t> batch_indices(int64_t k) const;
  std::vector<int64_t> element_indices(int64_t e) const;

 private:
  GraphGptBatch build(int64_t k) const;
  void compute_lengths();
  std::shared_ptr<const std::vector<int64_t>> epoch_order(int64_t epoch) const;

  std::shared_ptr<const std::vector<InstructionRecord>> records_;
  FeatureTable features_;
  const Tokenizer& tokenizer_;
  GraphBatchOptions options_;
  int32_t pad_id_ = 0;
  int64_t steps_per_epoch_ = 0;
  std::vector<int64_t> lengths_;
  double length_seconds_ = 0;
  struct OrderCache;
  std::unique_ptr<OrderCache> orders_;
  std::unique_ptr<OrderedPrefetcher<GraphGptBatch>> prefetch_;  // reset first in the destructor
};

// The permutation of [0, n) that epoch `epoch` visits with `seed` (Fisher-Yates on gt::Rng).
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

// The dropout seed of graph `graph` (its place in the record) of record `record` in global batch
// `batch` of a stream with `seed`: what the stream puts in each GraphInput it builds.
uint64_t graph_dropout_seed(uint64_t seed, int64_t batch, int64_t record, int64_t graph);

// How many ids make_example gives a record (at most max_len), estimated for grouping records by
// length without tokenising every conversation: the text as the template renders it, each graph
// as its <g_start> <g_patch>xN <g_end>, each of the template's token texts ("</s>", ChatML's
// markers) one id, BOS where the template has one, and the text between them word by word: each
// word with the whitespace before it is tokenised once, as it continues text, and its count
// remembered. A corpus repeats its words (stage 1 lists the same titles in many records), so
// most words are looked up, not tokenised. Only a token merged across a word boundary would make
// it differ from the real count; it was exact on every record of bench/length_grouping.sh
// (LLaMA's tokenizer) and of the tests (byte tokenizer, both templates). A record that does not
// render counts as max_len (its batch reports the error when it is built). One per thread: it
// keeps its counts.
class LengthEstimator {
 public:
  // The tokenizer must have GraphGPT's special tokens and outlive the estimator.
  LengthEstimator(const Tokenizer& tokenizer, int64_t max_len, ChatTemplate tmpl = {});
  int64_t operator()(const InstructionRecord& record);

 private:
  int64_t text_ids(std::string_view text);
  int64_t continuation_ids(std::string_view text);
  const Tokenizer& tokenizer_;
  int64_t max_len_;
  ChatTemplate tmpl_;
  std::vector<std::string> token_texts_;  // the template's texts that stand for one id each
  int32_t sentinel_;                      // <g_end>: text after it tokenises as it continues a text
  std::unordered_map<std::string, int64_t> counts_;
  std::string key_;
};

// The record order of epoch `epoch` with length grouping, batch k being positions
// [k * batch_size, (k + 1) * batch_size), as Hugging Face's LengthGroupedSampler builds it: the
// epoch's permutation (epoch_permutation) keeps its last n % batch_size records as the short
// last batch (which drop_last skips); the rest is cut into megabatches of
// megabatch_batches(n / batch_size) batches, each sorted by length, longest first (ties in
// permutation order), and cut into batches; the batches are then shuffled (a second seeded
// permutation), and the one holding the longest record goes first, so that a batch too large
// for memory fails the first step, not one hours in. Deterministic in (lengths, seed, epoch).
std::vector<int64_t> length_grouped_order(const std::vector<int64_t>& lengths, int64_t batch_size, uint64_t seed,
                                          int64_t epoch);
// Batches per megabatch: a quarter of the epoch's, at most 50 and at least 1 (Hugging Face's
// choice). Larger megabatches pad less; a quarter keeps at least four megabatches, so which
// records meet in a batch still changes from epoch to epoch.
int64_t megabatch_batches(int64_t batches);

}  // namespace gt
