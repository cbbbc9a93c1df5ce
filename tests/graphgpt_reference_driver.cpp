// graphtune's side of tests/test_graphgpt_reference.py (bench/reference/graphgpt_reference.py is
// the other): from a job config of a graph phase, builds GraphGPT and its first batch exactly as
// the trainer does (train/graph_phase.cpp), runs one forward and backward, and writes to
// OUT/graphtune.safetensors what the reference needs to rebuild the same inputs and what it is
// compared on:
//   inputs     input_ids, labels, attention_mask [B, T]; token_ids [3] (<g_patch>, <g_start>,
//              <g_end>); graph_rows, graph_starts [K]; graph.{k}.x [N, F], graph.{k}.edge_index [2, E]
//   outputs    logits [B, T, V] (forward(), no gradient); loss [] (the trainer's: summed over
//              learned positions, divided by their count); grad.projector.weight / .bias and
//              grad.token_rows [2, D] after loss.backward()
// and, for the weights that are not files of the job already, OUT/graph_encoder.safetensors,
// OUT/graph_projector.safetensors and OUT/graph_tokens.safetensors (save_graph_phase_outputs).
// The LLM is read by the reference from [model].path itself: it adds GraphGPT's three rows there.
//
// usage: graphgpt_reference_driver CONFIG OUT [--section.key VALUE ...]
#include <torch/torch.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "config/job_config.hpp"
#include "data/chat_template.hpp"
#include "loader/graph_batches.hpp"
#include "loader/job_records.hpp"
#include "train/graphgpt_setup.hpp"
#include "weights/safetensors.hpp"

namespace {

int run(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CONFIG OUT [--section.key VALUE ...]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[2];
  std::vector<std::string> rest;
  const auto overrides = gt::take_overrides(std::vector<std::string>(argv + 3, argv + argc), rest);
  if (!rest.empty()) gt::fail("command line", "unexpected argument '" + rest[0] + "'");
  const gt::JobConfig cfg = gt::read_job_config(argv[1], overrides);
  if (!gt::is_graph_phase(cfg.training.stage))
    gt::fail(cfg.file + ": [training].stage", std::string(gt::name_of(cfg.training.stage)) + " is not a graph stage");
  if (cfg.model.dtype != gt::DType::kFp32) gt::fail(cfg.file + ": [model].dtype", "the reference compares fp32 only");

  // As run_graph_phase: records read and checked, the model built, batches from the stream with
  // the trainer's options (one process: one shard, one micro-batch).
  std::vector<gt::InstructionRecord> read = gt::read_job_records(cfg.data);
  gt::GraphGptSetup s = gt::build_graphgpt(cfg);
  gt::GraphGpt& model = s.model;
  gt::check_records_against_features(read, s.features, cfg.data);
  auto records = std::make_shared<const std::vector<gt::InstructionRecord>>(std::move(read));
  gt::GraphBatchOptions bo;
  bo.max_len = cfg.data.max_len;
  bo.batch_size = cfg.training.batch_size;
  bo.seed = static_cast<uint64_t>(cfg.training.seed);
  bo.where = cfg.data.instructions;
  bo.chat_template = gt::chat_template_named(cfg.data.chat_template, cfg.file + ": [data].template");
  bo.drop_last = true;
  gt::GraphBatchStream stream(records, s.features, *s.tokenizer, bo);
  const gt::GraphGptBatch batch = stream.next();

  model->train();
  model->encoder->eval();
  if (cfg.training.trainable != gt::Trainable::kGraphGpt) model->graph_token_rows().set_requires_grad(false);

  torch::Tensor logits;
  {
    torch::NoGradGuard ng;
    logits = model->forward(batch);
  }
  // The trainer's loss: the head only where labels are learned, summed, over the step's count.
  const int64_t learned = gt::learned_positions(batch.labels);
  if (learned == 0)
    gt::fail(cfg.data.instructions, "the first batch has no learned position (every answer cut at [data].max_len " +
                                   std::to_string(cfg.data.max_len) + "): nothing to compare");
  gt::Llama& llm = model->llm;
  auto x = llm->forward_layers(model->embed(batch), batch.attention_mask, 0, llm->config().n_layers);
  auto loss = llm->head_loss_sum(x, batch.labels) / static_cast<double>(learned);
  loss.backward();

  const auto& ids = model->token_ids();
  std::vector<std::pair<std::string, torch::Tensor>> t{
      {"input_ids", batch.input_ids},
      {"labels", batch.labels},
      {"attention_mask", batch.attention_mask},
      {"token_ids", torch::tensor({ids.patch, ids.start, ids.end}, torch::kInt64)},
      {"logits", logits},
      {"loss", loss.detach()},
      {"grad.projector.weight", model->projector->weight().grad()},
      {"grad.projector.bias", model->projector->bias().grad()}};
  if (model->graph_token_rows().grad().defined()) t.emplace_back("grad.token_rows", model->graph_token_rows().grad());
  std::vector<int64_t> rows, starts;
  for (size_t k = 0; k < batch.graphs.size(); ++k) {
    const auto& g = batch.graphs[k];
    rows.push_back(g.row);
    starts.push_back(g.start);
    t.emplace_back("graph." + std::to_string(k) + ".x", g.x);
    t.emplace_back("graph." + std::to_string(k) + ".edge_index", g.edge_index);
  }
  t.emplace_back("graph_rows", torch::tensor(rows, torch::kInt64));
  t.emplace_back("graph_starts", torch::tensor(starts, torch::kInt64));
  gt::make_dirs(out);
  gt::save_graph_phase_outputs(model, out);
  gt::save_safetensors(out + "/graphtune.safetensors", t);
  std::printf("graphgpt reference driver: %lld rows x %lld tokens, %zu graphs, %lld learned, loss %.6f\n",
              static_cast<long long>(batch.input_ids.size(0)), static_cast<long long>(batch.input_ids.size(1)),
              batch.graphs.size(), static_cast<long long>(learned), loss.item<double>());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gt::run_main("graphgpt_reference_driver", run, argc, argv); }
