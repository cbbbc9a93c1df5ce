// graphtune export: a training checkpoint -> the files a finished run writes, so a run stopped
// (or a checkpoint picked from the middle of one) can be used without training to the end.
//   phase lm:                 DIR is a Hugging Face folder (fp32) with the run's tokenizer;
//   graph_matching / task:    DIR holds GraphGPT's stage files (graph_projector.bin, ...) and
//                             DIR/model, the LLM with the trained <g_start>/<g_end> rows merged
//                             into its embedding, with the tokenizer those ids belong to.
// Every shard's checksum is verified before anything is written, and DIR appears whole or not
// at all (common/staged_folder.hpp).
#include <torch/torch.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_dir.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/staged_folder.hpp"
#include "config/job_config.hpp"
#include "formats/model_presets.hpp"
#include "formats/safetensors_header.hpp"
#include "model/lora.hpp"
#include "model/peft_adapter.hpp"
#include "tokenizer/gguf_tokenizer.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/graphgpt_setup.hpp"
#include "train/mixed_precision.hpp"
#include "train/train_checkpoint.hpp"
#include "weights/checkpoint_shards.hpp"
#include "weights/hf_folder.hpp"
#include "weights/load_model.hpp"
#include "worker/commands.hpp"
#include "worker/model_tokenizer_files.hpp"

namespace gt {

namespace {

struct ExportArgs {
  std::string checkpoint, out;
  bool overwrite = false;
};

const std::string kTokenRowsKey = weight_key(kGraphTokenRowsName);

std::string config_value(const ckpt::Index& index, const std::string& key, const std::string& fallback) {
  auto it = index.config.find(key);
  return it == index.config.end() ? fallback : it->second;
}

void copy_file(const std::string& from, const std::string& to) { write_file_atomic(to, read_file(from)); }

// ---- phase lm ----------------------------------------------------------------------------

// The tokenizer the run read its text with, into the folder, by the rules the run's own output
// follows (train/lm_phase.cpp): a SentencePiece model as tokenizer.model, the byte and llama2.c
// tokenizers as llama2.c's tokenizer.bin. Returns what was written, for the summary.
std::string write_lm_tokenizer(const std::string& checkpoint, const ckpt::Index& index, const std::string& dir) {
  if (index.files.count("tokenizer.model")) {  // [model].tokenizer = "train": the checkpoint carries it
    copy_file(join_path(checkpoint, "tokenizer.model"), join_path(dir, "tokenizer.model"));
    return "tokenizer.model (trained by the run)";
  }
  const std::string model_path = config_value(index, "model.path", "");
  const std::string setting = config_value(index, "model.tokenizer", "auto");
  if (setting != "auto") {  // a tokenizer file the run named
    if (!path_exists(setting)) {
      std::fprintf(stderr, "graphtune: export: no tokenizer written: the run's [model].tokenizer %s is gone\n",
                   setting.c_str());
      return "none";
    }
    if (ends_with(setting, ".model")) {
      copy_file(setting, join_path(dir, "tokenizer.model"));
      return "tokenizer.model";
    }
    save_llama2c_tokenizer(*load_tokenizer(setting), join_path(dir, "tokenizer.bin"));
    return "tokenizer.bin";
  }
  if (model_path.empty()) {  // a fresh model on the built-in byte tokenizer
    save_llama2c_tokenizer(*byte_tokenizer(), join_path(dir, "tokenizer.bin"));
    return "tokenizer.bin (the built-in byte tokenizer)";
  }
  const std::string resolved = resolve_model_path(model_path, join_path(checkpoint, "index.json") + ": model.path");
  const std::string written = write_model_tokenizer_files(resolved, dir);
  if (!written.empty()) return written;
  if (is_directory(resolved))
    std::fprintf(stderr, "graphtune: export: no tokenizer written: the run's model folder %s holds none\n",
                 resolved.c_str());
  else
    std::fprintf(stderr,
                 "graphtune: export: no tokenizer written: the run's model %s is a %s, whose vocabulary is no "
                 "Hugging Face tokenizer file (give `graphtune generate --tokenizer` the one the run used)\n",
                 model_path.c_str(), ends_with(resolved, ".gguf") ? "GGUF file" : "llama2.c file");
  return "none";
}

void export_lm(const std::string& checkpoint, const ckpt::Index& index, StagedFolder& out) {
  const LlamaConfig mc = read_hf_config(checkpoint);  // the checkpoint's config.json
  // The index's tensors against config.json before any is read: a damaged index is named as
  // such, not as the half-staged output folder save_hf_folder would name.
  const std::string index_path = join_path(checkpoint, "index.json");
  std::map<std::string, TensorFacts> facts;
  for (const auto& [key, entry] : index.tensors)
    if (key.rfind("model/", 0) == 0)
      facts[key.substr(6)] = {entry.shape, entry.dtype, find_safetensors_dtype(entry.dtype)->floating, index_path};
  check_llama_tensors(mc, facts, index_path);
  std::map<std::string, torch::Tensor> weights;
  ckpt::CheckpointReader reader(checkpoint);
  for (const auto& [key, entry] : index.tensors)
    if (key.rfind("model/", 0) == 0) weights[key.substr(6)] = reader.read(key).to(torch::kFloat32);
  // save_hf_folder stages its own folder: here, onto the empty one this export stages.
  save_hf_folder(out.path(), mc, weights, "fp32", /*max_shard_bytes=*/0, /*overwrite=*/true);
  const std::string tok = write_lm_tokenizer(checkpoint, index, out.path());
  std::fprintf(stderr, "graphtune: export: stage lm, %zu tensors, tokenizer: %s\n", weights.size(), tok.c_str());
}

// ---- phases graph_matching / task --------------------------------------------------------

// The job config the run had, as far as building its model needs: what the index records.
// Relative paths are as the run was given them (run export from the same folder).
JobConfig graph_config(const std::string& checkpoint, const ckpt::Index& index) {
  JobConfig cfg;
  cfg.file = join_path(checkpoint, "index.json");
  cfg.training.stage = index.stage;
  cfg.model.path = config_value(index, "model.path", "");
  const std::string dtype = config_value(index, "model.dtype", name_of(cfg.model.dtype));
  const std::optional<DType> parsed = value_named<DType>(dtype);
  if (!parsed) fail(cfg.file, "config.\"model.dtype\" is \"" + dtype + "\", not a dtype graphtune trains in");
  cfg.model.dtype = *parsed;
  cfg.model.tokenizer = config_value(index, "model.tokenizer", cfg.model.tokenizer);
  cfg.model.graph_encoder = config_value(index, "model.graph_encoder", "");
  cfg.model.graph_encoder_prefix = config_value(index, "model.graph_encoder_prefix", "");
  cfg.model.graph_encoder_type = config_value(index, "model.graph_encoder_type", "gt");  // a fresh encoder's
  cfg.model.llaga_hops = std::stoll(config_value(index, "model.llaga_hops", std::to_string(cfg.model.llaga_hops)));
  cfg.model.llaga_fanout = std::stoll(config_value(index, "model.llaga_fanout", std::to_string(cfg.model.llaga_fanout)));
  cfg.model.hop_field_hops =
      std::stoll(config_value(index, "model.hop_field_hops", std::to_string(cfg.model.hop_field_hops)));
  cfg.model.hop_field_rows = config_value(index, "model.hop_field_rows", "as_is");
  cfg.model.hop_field_projector = config_value(index, "model.hop_field_projector", "shared");
  cfg.model.hop_field_base = config_value(index, "model.hop_field_base", "");
  cfg.model.encoder_dropout = std::stod(config_value(index, "model.encoder_dropout", "0"));
  cfg.data.graph = config_value(index, "data.graph", cfg.data.graph);
  cfg.data.features = config_value(index, "data.features", "");
  cfg.data.max_len = std::stoll(config_value(index, "data.max_len", std::to_string(cfg.data.max_len)));
  cfg.training.seed = std::stoll(config_value(index, "training.seed", std::to_string(cfg.training.seed)));  // a fresh encoder's
  // What the run trained beyond the projector (the encoder, LoRA adapters), and an adapter it
  // started from: the outputs a finished run writes depend on them.
  const std::string trainable = config_value(index, "training.trainable", name_of(cfg.training.trainable));
  const std::optional<Trainable> parsed_trainable = value_named<Trainable>(trainable);
  if (!parsed_trainable)
    fail(cfg.file, "config.\"training.trainable\" is \"" + trainable + "\", not a choice graphtune trains");
  cfg.training.trainable = *parsed_trainable;
  cfg.model.adapter = config_value(index, "model.adapter", "");
  if (cfg.model.path.empty()) fail(cfg.file, "records no model.path: cannot rebuild the graph stage's LLM");
  return cfg;
}

// The added tokens' ids beyond the base vocabulary, as Hugging Face's added_tokens.json spells them.
nlohmann::ordered_json added_tokens(const Tokenizer& tok) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (tok.is_added_token(id)) j[tok.id_to_piece(id)] = id;
  return j;
}

// The merged model's tokenizer: the LLM's, grown by GraphGPT's three tokens exactly as the
// trainer and eval grow it (build_graphgpt), so that the ids match the embedding rows.
//   SentencePiece (a tokenizer.model, or a GGUF's "llama" vocabulary written as one):
//     tokenizer.model with added_tokens.json (how transformers' save_pretrained
//     stores added tokens; graphtune reads it too), and tokenizer.bin, llama2.c's format with
//     the added pieces, for llama2.c's tools;
//   byte-level BPE tokenizer.json (or a GGUF's "gpt2" vocabulary written as one, beside its
//     tokenizer_config.json): the tokens appended to its added_tokens (both read that);
//   llama2.c / byte tokenizers: tokenizer.bin with the added pieces.
std::string write_graph_tokenizer(const JobConfig& cfg, const Tokenizer& tok, const std::string& dir) {
  const std::string source = resolve_tokenizer_path(cfg.model.tokenizer, cfg.model.path, cfg.where("model", "tokenizer"));
  const std::string folder = parent_path(source);
  auto copy_beside = [&](const char* name) {
    if (path_exists(join_path(folder, name))) copy_file(join_path(folder, name), join_path(dir, name));
  };
  // A GGUF's SentencePiece vocabulary is written out as the tokenizer.model it came from.
  const std::optional<std::string> gguf_model =
      ends_with(source, ".gguf") ? gguf_sentencepiece_model(source) : std::nullopt;
  if (ends_with(source, ".model") || gguf_model) {
    if (gguf_model) {
      write_file_atomic(join_path(dir, "tokenizer.model"), *gguf_model);
    } else {
      copy_file(source, join_path(dir, "tokenizer.model"));
      copy_beside("tokenizer_config.json");
      copy_beside("special_tokens_map.json");
    }
    write_file_atomic(join_path(dir, "added_tokens.json"), added_tokens(tok).dump(2) + "\n");
    save_llama2c_tokenizer(tok, join_path(dir, "tokenizer.bin"));
    return std::string(gguf_model ? "tokenizer.model (the GGUF's vocabulary)" : "tokenizer.model") +
           " + added_tokens.json, tokenizer.bin";
  }
  // A byte-level GGUF vocabulary is written as the tokenizer.json it would be in a folder.
  const std::optional<HfTokenizerFiles> gguf_json =
      ends_with(source, ".gguf") ? gguf_hf_tokenizer_files(source) : std::nullopt;
  if (ends_with(source, ".json") || gguf_json) {
    // json, not ordered_json, whose key lookups are linear: the vocabulary has up to 150,000 keys.
    nlohmann::json j = nlohmann::json::parse(gguf_json ? gguf_json->tokenizer_json : read_file(source));
    const nlohmann::ordered_json added = added_tokens(tok);
    for (const auto& [piece, id] : added.items())
      j["added_tokens"].push_back({{"id", id}, {"content", piece}, {"single_word", false}, {"lstrip", false},
                                   {"rstrip", false}, {"normalized", false}, {"special", true}});
    write_file_atomic(join_path(dir, "tokenizer.json"), j.dump(2) + "\n");
    if (gguf_json) {
      write_file_atomic(join_path(dir, "tokenizer_config.json"), gguf_json->tokenizer_config_json);
      return "tokenizer.json (the GGUF's vocabulary) with the graph tokens added, tokenizer_config.json";
    }
    copy_beside("tokenizer_config.json");
    copy_beside("special_tokens_map.json");
    return "tokenizer.json with the graph tokens added";
  }
  if (ends_with(source, ".gguf")) {
    std::fprintf(stderr,
                 "graphtune: export: no tokenizer written to %s: the LLM's vocabulary is in %s, which no "
                 "tokenizer file here can hold with the graph tokens added\n",
                 dir.c_str(), source.c_str());
    return "none";
  }
  save_llama2c_tokenizer(tok, join_path(dir, "tokenizer.bin"));
  return "tokenizer.bin with the graph tokens added";
}

// The adapters a projector+lora run trained, from the checkpoint: its [lora] settings as the
// index records them, every layer's A and B read whole.
std::shared_ptr<LoraAdapters> trained_adapters(ckpt::CheckpointReader& reader, const std::string& checkpoint,
                                               const ckpt::Index& index, const LlamaConfig& llm) {
  const std::string where = join_path(checkpoint, "index.json");
  LoraSettings settings;
  settings.rank = std::stoll(config_value(index, "lora.rank", std::to_string(settings.rank)));
  settings.alpha = std::stod(config_value(index, "lora.alpha", std::to_string(settings.alpha)));
  settings.targets.clear();
  std::stringstream targets(config_value(index, "lora.targets", "q_proj,v_proj"));
  for (std::string t; std::getline(targets, t, ',');)
    settings.targets.push_back(lora_target_named(t, where + ": config.\"lora.targets\""));
  auto lora = std::make_shared<LoraAdapters>(settings, llm, 0, llm.n_layers, torch::kCPU, 0);
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, shape] : LoraAdapters::shapes(settings, llm)) {
    if (!reader.contains(weight_key(name))) fail(where, "has no tensor \"" + weight_key(name) + "\", which the run trained");
    weights[name] = reader.read(weight_key(name));
  }
  lora->load(weights, checkpoint);
  return lora;
}

// The encoder a graphgpt+encoder or projector+lora+encoder run trained, from the checkpoint.
void load_trained_encoder(GraphGpt& model, ckpt::CheckpointReader& reader, const std::string& checkpoint,
                          const ckpt::Index& index) {
  const std::string prefix = "model.graph_tower.";
  std::map<std::string, torch::Tensor> weights;
  for (const auto& [key, entry] : index.tensors)
    if (key.rfind(weight_key(prefix), 0) == 0) weights[key.substr(weight_key("").size())] = reader.read(key);
  torch::NoGradGuard ng;
  model->encoder->load_weights(weights, checkpoint, prefix);
}

// Each adapted projection W of the LLM's weights becomes W + (alpha / r) B A, as PEFT's
// merge_and_unload writes it, so that the merged folder computes what the run's model did.
void merge_adapters(std::map<std::string, torch::Tensor>& weights, const LoraAdapters& lora) {
  const std::string a_suffix = ".lora_A.weight";
  std::map<std::string, torch::Tensor> named;
  for (const auto& [name, t] : lora.named_weights()) named[name] = t.detach().to(torch::kFloat32);
  for (const auto& [name, a] : named) {
    if (!ends_with(name, a_suffix)) continue;
    const std::string module = name.substr(0, name.size() - a_suffix.size());
    torch::Tensor& w = weights.at(module + ".weight");
    w = w + named.at(module + ".lora_B.weight").mm(a) * lora.settings().scale();
  }
}

void export_graph_phase(const std::string& checkpoint, const ckpt::Index& index, StagedFolder& out) {
  JobConfig cfg = graph_config(checkpoint, index);
  // The LLM (with GraphGPT's tokens added), the encoder as the run had them; the projector and
  // the token rows from the checkpoint, read whole whatever layout saved them. Built in fp32:
  // the merged LLM keeps the model's own weights, not a bf16 run's rounded working copy.
  cfg.model.projector = checkpoint;
  const bool run_in_bf16 = cfg.model.bf16();
  cfg.model.dtype = DType::kFp32;
  GraphGptSetup s = build_graphgpt(cfg);
  GraphGpt& model = s.model;
  // As the run set it (train/graph_phase.cpp): graph_tower/config.json records it.
  model->encoder->set_dropout(cfg.model.encoder_dropout, cfg.where("model", "encoder_dropout"));
  ckpt::CheckpointReader reader(checkpoint);
  if (cfg.training.trains_encoder()) load_trained_encoder(model, reader, checkpoint, index);
  if (cfg.training.trains_lora()) model->llm->set_lora(trained_adapters(reader, checkpoint, index, model->llm->config()));

  // The merged LLM in fp32 (the token rows are fp32 master weights, which a bf16 table would round).
  torch::NoGradGuard ng;
  const GraphTokenIds& ids = model->token_ids();
  torch::Tensor table = model->merged_embedding().to(torch::kFloat32);
  table[ids.start].copy_(model->graph_token_rows()[0]);
  table[ids.end].copy_(model->graph_token_rows()[1]);
  std::map<std::string, torch::Tensor> weights;
  for (auto& [name, p] : model->llm->named_weights())
    weights[name] = name == "model.embed_tokens.weight" ? table : p.detach().to(torch::kFloat32);
  // The adapters the run trained, or the [model].adapter it ran with frozen.
  LoraAdapters* lora = model->llm->lora();
  if (lora) merge_adapters(weights, *lora);
  const std::string merged = join_path(out.path(), "model");
  save_hf_folder(merged, model->llm->config(), weights, "fp32");
  const std::string tok = write_graph_tokenizer(cfg, *s.tokenizer, merged);
  // The stage files as the run wrote them: a bf16 run stored its frozen encoder in bf16
  // (build_graphgpt), and graph_encoder.safetensors holds those values, widened.
  if (run_in_bf16) store_frozen_in_bf16(*model);
  save_graph_phase_outputs(model, out.path());
  if (cfg.training.trains_lora()) {  // as the run writes its adapters: for the base LLM
    const auto named = lora->named_weights();
    save_peft_adapter(join_path(out.path(), "adapter"), lora->settings(), cfg.model.path,
                      std::vector<std::pair<std::string, torch::Tensor>>(named.begin(), named.end()));
  }
  std::fprintf(stderr,
               "graphtune: export: stage %s (%s%s%s), LLM %s with <g_start>/<g_end> %s%s; vocabulary %lld; tokenizer: %s\n",
               name_of(index.stage), index.tensors.count(kTokenRowsKey) ? "projector and token rows" : "projector",
               cfg.training.trains_encoder() ? ", the trained encoder" : "",
               cfg.training.trains_lora() ? ", LoRA adapters in adapter/" : "", cfg.model.path.c_str(),
               index.tensors.count(kTokenRowsKey) ? "trained" : "as initialised",
               lora ? " and the LoRA adapters merged" : "", static_cast<long long>(model->llm->config().vocab_size),
               tok.c_str());
}

int run_export(const ExportArgs& a) {
  const std::string checkpoint = ckpt::find_checkpoint(a.checkpoint);
  const ckpt::Index index = ckpt::read_index(checkpoint);
  const bool lm = index.stage == Phase::kLm;
  if (!lm && !is_graph_phase(index.stage))
    fail(join_path(checkpoint, "index.json"), "a checkpoint of stage " + std::string(name_of(index.stage)) +
                                                  ", which export does not write (lm, graph_matching, task)");
  // An existing DIR is replaced only with --overwrite, and only if it is an earlier export.
  ReplaceRule rule;
  rule.overwrite = a.overwrite;
  rule.empty_needs_overwrite = true;
  rule.marker_file = lm ? "config.json" : "graph_projector.bin";
  rule.kind = lm ? "model folder" : "graph stage's output folder";
  StagedFolder::check(a.out, rule);
  ckpt::verify_files(checkpoint, index);  // every byte checked before anything is written

  StagedFolder out(a.out, rule);
  if (lm) {
    export_lm(checkpoint, index, out);
  } else {
    export_graph_phase(checkpoint, index, out);
  }
  out.commit();
  std::fprintf(stderr, "graphtune: exported %s (step %lld of %lld) to %s\n", checkpoint.c_str(),
               static_cast<long long>(index.step), static_cast<long long>(index.total_steps), out.dir().c_str());
  return 0;
}

}  // namespace

void add_export_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* sub = app.add_subcommand("export", "write a training checkpoint as the files a finished run writes");
  sub->add_option("--checkpoint", a->checkpoint,
                  "a checkpoint folder (step_N), or a folder of them (its newest committed one)")
      ->required();
  sub->add_option("--out", a->out,
                  "folder to create, whole or not at all: a Hugging Face folder (stage lm) or GraphGPT's stage files "
                  "with the merged model in OUT/model (graph_matching, task)")
      ->required();
  sub->add_flag("--overwrite", a->overwrite, "replace --out if it is an earlier export");
  sub->callback([a, &exit_code] { exit_code = run_export(*a); });
}

}  // namespace gt
