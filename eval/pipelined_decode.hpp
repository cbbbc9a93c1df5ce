#pragma once
// Generation on one pipeline of ranks, the LLM's layers split over its stages as in training:
// several batches in flight, served round robin, so that the stages work side by side
// (layout/decode_pipeline.hpp holds the protocol and its simulator). Each stage runs its own
// layers with StageDecode and keeps only their keys and values; stage 0 also embeds (graph
// tokens spliced); the last runs the head and picks the tokens (AnswerRows). The operations are
// those of generate_graph_answers in the same order, so the answers equal one process's bit for
// bit.
//
// The channels: hidden states go down the pipeline on the data communicator (NCCL on GPUs: a
// chain, never a cycle, so its in-order streams cannot deadlock); what the host decides with goes
// on the host communicator (MPI): each round's header (its kind, slot, batch and the states'
// dtype) down, and the picked tokens with "finished" from the last stage back to stage 0.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "layout/decode_pipeline.hpp"
#include "model/graph_generate.hpp"

namespace gt {

struct ParallelRuntime;

// What the stages need of the batches, by batch index.
struct PipelineBatches {
  std::function<GraphGptBatch(int64_t batch)> prompts;             // stage 0: collated, on the host
  std::function<std::vector<int64_t>(int64_t batch)> lengths;      // every stage: its rows' prompt lengths
  std::function<AnswerSampling(int64_t batch)> sampling;           // the last stage
  std::function<void(int64_t batch, std::vector<std::vector<int32_t>>& answers)> finished;  // the last stage
  std::function<bool()> stop_requested;                            // stage 0: start no more batches
  // The prompt prefix the records share (loader/shared_prefix.hpp; empty: none), and whether all
  // of a batch's rows begin with it (every stage). Its keys and values are computed once, at the
  // start, by a round of its own through the stages.
  std::vector<int32_t> prefix;
  std::function<bool(int64_t batch)> shares_prefix;
};

struct PipelineDecodeStats {
  double wall_s = 0, busy_s = 0;       // this stage, from its first round to its last
  double prefill_s = 0, step_s = 0;    // busy in prefills, in decoding steps
  int64_t prefill_tokens = 0, steps = 0;
  std::vector<DecodeSimBatch> batches;  // stage 0: each batch as it ran (rows, padded prompt tokens, rounds)
};

// Runs this rank's stage of one pipeline (rt.pp) with `slots` in flight over the batches stage 0
// takes from `next_batch` as slots free up (-1: none left; the later stages learn them as they
// come). Every stage of the pipeline calls it.
PipelineDecodeStats decode_pipelined(GraphGpt& model, ParallelRuntime& rt, const std::function<int64_t()>& next_batch,
                                     int slots, int64_t max_new_tokens, int32_t eos_id, const torch::Device& device,
                                     bool bf16, const PipelineBatches& io);

}  // namespace gt
