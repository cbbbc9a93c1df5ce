// graphtune train --config FILE [--section.key VALUE ...]: runs the stage the config names.
// Stage `lm` trains a causal LM on the embedded corpus (or a text file) and writes the result
// as a Hugging Face folder with its tokenizer, ready for `graphtune generate`.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <fstream>

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/train_config.hpp"
#include "data/synthetic_graph.hpp"
#include "model/hf_folder.hpp"
#include "model/load_model.hpp"
#include "model/tokenizer.hpp"
#include "parallel/world.hpp"
#include "worker/commands.hpp"
#include "worker/graph_trainer.hpp"
#include "worker/lm_trainer.hpp"
#include "worker/mixed_precision.hpp"

namespace gt {

namespace {

std::vector<std::string> read_documents(const TrainConfig& cfg) {
  if (cfg.source == "embedded") {
    SyntheticGraphParams p;
    p.seed = static_cast<uint64_t>(cfg.data_seed);
    p.nodes = static_cast<int32_t>(cfg.nodes);
    p.classes = static_cast<int32_t>(cfg.classes);
    p.noise = cfg.noise;
    return corpus_texts(make_synthetic_graph(p));
  }
  std::ifstream in(cfg.source);
  if (!in) fail(cfg.source, "cannot open the [data].source text file (missing or unreadable)");
  std::vector<std::string> docs;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) docs.push_back(line);
  if (docs.empty()) fail(cfg.source, "has no non-empty lines to train on");
  return docs;
}

int run_train(const std::string& config_path, const std::vector<std::string>& extra) {
  std::vector<std::string> rest;
  auto overrides = take_overrides(extra, rest);
  if (!rest.empty()) fail("command line", "unexpected argument '" + rest[0] + "' (overrides are --section.key VALUE)");
  TrainConfig cfg = read_train_config(config_path, overrides);

  int argc = 0;
  char** argv = nullptr;
  World world(&argc, &argv);
  if (world.size() > 1)
    fail("mpirun", "not supported yet: training on " + std::to_string(world.size()) +
                       " ranks (data and pipeline parallelism come with the parallel runtime); run one rank");
  if (cfg.threads > 0) torch::set_num_threads(static_cast<int>(cfg.threads));
  if (cfg.stage == "graph_matching" || cfg.stage == "task") return run_graph_stage(cfg);

  // Tokenizer and model shape first: cheap, and every mismatch is reported before allocating.
  std::string tok_path = cfg.tokenizer;
  if (tok_path == "auto") {
    tok_path = cfg.model_path.empty() ? "bytes" : default_tokenizer_path(cfg.model_path);
    if (tok_path.empty()) fail(cfg.path + ": [model].tokenizer", "the model " + cfg.model_path + " has no tokenizer beside it: name one");
  }
  std::unique_ptr<Tokenizer> tok = tok_path == "bytes" ? byte_tokenizer() : load_tokenizer(tok_path);
  LlamaConfig mc;
  if (!cfg.model_path.empty()) {
    mc = read_model_config(cfg.model_path);
    check_tokenizer_vocab(*tok, static_cast<int32_t>(mc.vocab_size));
  } else {
    mc.dim = cfg.dim;
    mc.n_layers = cfg.n_layers;
    mc.n_heads = cfg.n_heads;
    mc.n_kv_heads = cfg.n_kv_heads;
    mc.hidden_dim = cfg.hidden_dim;
    mc.max_seq_len = cfg.max_seq_len;
    mc.vocab_size = tok->vocab_size();
    mc.tie_embeddings = true;
    mc.bos_id = tok->bos_id();
    mc.eos_id = tok->eos_id();
    mc.pad_id = tok->pad_id();
  }
  if (cfg.seq_len + 1 > mc.max_seq_len)
    fail(cfg.path + ": [training].seq_len", "seq_len + 1 = " + std::to_string(cfg.seq_len + 1) +
                                                " exceeds the model's context of " + std::to_string(mc.max_seq_len));

  auto t0 = std::chrono::steady_clock::now();
  std::vector<std::vector<int32_t>> docs;
  for (const auto& text : read_documents(cfg)) docs.push_back(tok->encode(text, /*bos=*/true, /*eos=*/true));
  WindowSampler data(pack_documents(docs), cfg.seq_len, static_cast<uint64_t>(cfg.seed));
  std::fprintf(stderr, "graphtune: corpus '%s': %zu documents, %lld tokens\n", cfg.source.c_str(), docs.size(),
               static_cast<long long>(data.stream_size()));

  Llama model(mc);
  if (!cfg.model_path.empty()) {
    model->load_weights(load_model(cfg.model_path).weights, cfg.model_path);
  } else {
    model->init_weights(static_cast<uint64_t>(cfg.seed));
  }
  std::fprintf(stderr, "graphtune: model %lld parameters (dim %lld, %lld layers, %lld heads, %lld kv heads), %d threads\n",
               static_cast<long long>(mc.num_parameters()), static_cast<long long>(mc.dim),
               static_cast<long long>(mc.n_layers), static_cast<long long>(mc.n_heads),
               static_cast<long long>(mc.n_kv_heads), torch::get_num_threads());
  // Stage lm trains every parameter: all of them are fp32 master weights, bf16 or not.
  std::fprintf(stderr, "graphtune: %s\n", precision_summary(cfg.dtype, frozen_bytes(*model)).c_str());

  train_lm(model, data, cfg, [&](const LmLogLine& l) {
    std::fprintf(stderr, "step %5lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s\n",
                 static_cast<long long>(l.step), static_cast<long long>(cfg.steps), l.loss, l.lr, l.grad_norm,
                 l.tokens_per_s);
  });

  const std::string out = cfg.out_dir + "/model";
  make_dirs(cfg.out_dir);
  std::map<std::string, torch::Tensor> weights;
  for (auto& [name, t] : model->named_weights()) weights[name] = t.detach();
  save_hf_folder(out, mc, weights, "fp32", /*max_shard_bytes=*/0, /*overwrite=*/true);
  save_llama2c_tokenizer(*tok, out + "/tokenizer.bin");
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "graphtune: trained %lld steps in %.1f s; model written to %s (fp32%s)\n",
               static_cast<long long>(cfg.steps), secs, out.c_str(), is_bf16(cfg.dtype) ? ": the master weights" : "");
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto config = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("train", "train from a TOML config; any key overridable as --section.key VALUE");
  sub->add_option("--config", *config, "TOML job config (configs/)");
  sub->allow_extras();
  sub->callback([sub, config, &exit_code] { exit_code = run_train(*config, sub->remaining()); });
}

}  // namespace gt
