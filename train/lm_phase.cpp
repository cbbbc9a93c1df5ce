#include "train/lm_phase.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <map>

#include "checkpoint/checkpoint_dir.hpp"
#include "comm/world.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "data/conversation.hpp"
#include "data/instructions.hpp"
#include "loader/job_records.hpp"
#include "loader/lm_documents.hpp"
#include "loader/window_sampler.hpp"
#include "model/special_tokens.hpp"
#include "parallel/gather_weights.hpp"
#include "parallel/parallel_runtime.hpp"
#include "tokenizer/sentencepiece_training.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/decoder_stage.hpp"
#include "train/lm_trainer.hpp"
#include "train/mixed_precision.hpp"
#include "train/rank_report.hpp"
#include "train/train_checkpoint.hpp"
#include "weights/hf_folder.hpp"
#include "weights/load_model.hpp"

namespace gt {

namespace {

// The phase's texts: the corpus, and the records' conversations answered from their text alone.
struct LmTexts {
  std::vector<std::string> corpus;
  std::vector<InstructionRecord> questions;
  ChatTemplate tmpl;
};

LmTexts read_texts(const JobConfig& cfg) {
  LmTexts t;
  std::vector<InstructionRecord> records;
  if (!cfg.data.instructions.empty()) records = read_job_records(cfg.data);
  for (const auto& r : records) t.questions.push_back(text_only_record(r));
  t.tmpl = chat_template_named(cfg.data.chat_template, cfg.where("data", "template"));
  t.corpus = lm_documents(cfg.data, cfg.data.instructions.empty() ? nullptr : &records);
  return t;
}

// [model].tokenizer = "train": rank 0 trains a SentencePiece BPE tokenizer on exactly what the
// model will read, the corpus and the rendered conversations (without the template's "</s>" or
// <|im_start|>/<|im_end|>: ids, not text), and writes it to `path`.
void train_tokenizer(const JobConfig& cfg, const LmTexts& texts, const std::string& path) {
  std::vector<std::string> all = texts.corpus;
  for (const auto& q : texts.questions) {
    std::string p = render_chat(texts.tmpl, q.conversations);
    for (const std::string& t : chat_token_texts(texts.tmpl))
      for (size_t at = p.find(t); at != std::string::npos; at = p.find(t, at)) p.erase(at, t.size());
    all.push_back(std::move(p));
  }
  const std::string model_bytes =
      train_sentencepiece(all, static_cast<int32_t>(cfg.model.vocab_size), cfg.where("model", "vocab_size"));
  make_dirs(cfg.job.out_dir);
  write_file_atomic(path, model_bytes);
  std::fprintf(stderr, "graphtune: trained a SentencePiece BPE tokenizer (%lld pieces) on %zu texts: %s\n",
               static_cast<long long>(cfg.model.vocab_size), all.size(), path.c_str());
}

// The tokenizer file the phase reads its texts with: the model's or the one named, or with
// "train" the run's own (trained now, or read back from the checkpoint a resume continues).
struct LmTokenizer {
  std::string path;
  bool trained = false;  // the run's own, which its checkpoints carry
};

LmTokenizer find_tokenizer(const JobConfig& cfg, const World& world, const LmTexts& texts) {
  LmTokenizer tok;
  tok.path = resolve_tokenizer_path(cfg.model.tokenizer, cfg.model.path, cfg.where("model", "tokenizer"));
  tok.trained = tok.path == "train";
  if (!tok.trained) return tok;
  tok.path = cfg.job.out_dir + "/tokenizer.model";
  const ResumePoint resume = find_resume_point(cfg);
  if (!resume.folder.empty()) {
    // The weights of a resumed run index the vocabulary they were trained with, which travels
    // with them: read it back instead of training another.
    auto saved = resume.index.files.find("tokenizer.model");
    if (saved == resume.index.files.end())
      fail(resume.folder, "has no tokenizer.model, the vocabulary this run trained ([model].tokenizer = \"train\")");
    ckpt::Index only;
    only.files.insert(*saved);
    ckpt::verify_files(resume.folder, only);
    make_dirs(cfg.job.out_dir);
    write_file_atomic(tok.path, read_file(resume.folder + "/tokenizer.model"));
    return tok;
  }
  if (!cfg.model.path.empty())
    fail(cfg.where("model", "tokenizer"), "\"train\" makes a new vocabulary, which only a fresh model can use; "
                                         "[model].path names an existing one");
  // Rank 0 trains it and writes it into the run folder; the others read that file (a folder
  // every rank sees, as for the checkpoints).
  if (world.rank() == 0) train_tokenizer(cfg, texts, tok.path);
  world.barrier();
  return tok;
}

// The model the user names, or a fresh one of [model]'s shape on the tokenizer's vocabulary.
LlamaConfig model_config(const JobConfig& cfg, Tokenizer& tok) {
  LlamaConfig mc;
  if (!cfg.model.path.empty()) {
    mc = read_model_config(cfg.model.path);
    check_tokenizer_vocab(tok, static_cast<int32_t>(mc.vocab_size));
  } else {
    mc.dim = cfg.model.dim;
    mc.n_layers = cfg.model.n_layers;
    mc.n_heads = cfg.model.n_heads;
    mc.n_kv_heads = cfg.model.n_kv_heads;
    mc.hidden_dim = cfg.model.hidden_dim;
    mc.max_seq_len = cfg.model.max_seq_len;
    mc.vocab_size = tok.vocab_size();
    mc.tie_embeddings = true;
    mc.bos_id = tok.bos_id();
    mc.eos_id = tok.eos_id();
    mc.pad_id = tok.pad_id();
  }
  if (cfg.training.seq_len + 1 > mc.max_seq_len)
    fail(cfg.where("training", "seq_len"), "seq_len + 1 = " + std::to_string(cfg.training.seq_len + 1) +
                                               " exceeds the model's context of " + std::to_string(mc.max_seq_len));
  return mc;
}

// The token stream the windows are drawn from: every document, then every conversation
// tokenised exactly as the graph phases and eval will see it (BOS, the template's prompt, the
// answer, EOS). That path checks GraphGPT's tokens are registered, so a private copy of the
// tokenizer gets them; a graph-free text never produces them.
WindowSampler token_windows(const JobConfig& cfg, const World& world, const LmTexts& texts, const Tokenizer& tok,
                            const std::string& tok_path) {
  std::vector<std::vector<int32_t>> docs;
  for (const auto& text : texts.corpus) docs.push_back(tok.encode(text, /*bos=*/true, /*eos=*/true));
  int64_t question_tokens = 0;
  if (!texts.questions.empty()) {
    std::unique_ptr<Tokenizer> conv_tok = load_tokenizer(tok_path);
    conv_tok->add_special_tokens(graph_special_tokens());
    for (const auto& q : texts.questions) {
      docs.push_back(tokenize_conversation(q, {}, *conv_tok, int64_t{1} << 40, texts.tmpl).input_ids);
      question_tokens += static_cast<int64_t>(docs.back().size());
    }
  }
  WindowSampler windows(pack_documents(docs), cfg.training.seq_len, static_cast<uint64_t>(cfg.training.seed));
  if (world.rank() == 0) {
    std::fprintf(stderr, "graphtune: corpus '%s': %zu documents", cfg.data.source.c_str(), texts.corpus.size());
    if (!texts.questions.empty())
      std::fprintf(stderr, " + %zu text-only conversations from %s (%lld tokens)", texts.questions.size(),
                   cfg.data.instructions.c_str(), static_cast<long long>(question_tokens));
    std::fprintf(stderr, ", %lld tokens\n", static_cast<long long>(windows.stream_size()));
  }
  return windows;
}

// This stage's share of the model. Read from a file, only its weights are (`file`: the views
// load_model made, checked against the config before the ranks formed their groups). Fresh,
// the weights come from one random stream over the whole model, so that a stage draws exactly
// its share of what one process would: the model is drawn whole, then cut.
Llama build_model(const JobConfig& cfg, const LlamaConfig& mc, const LlamaStage& stage,
                  std::map<std::string, torch::Tensor> file) {
  if (cfg.model.path.empty()) {
    Llama model(mc);
    model->init_weights(static_cast<uint64_t>(cfg.training.seed));
    model->keep_only(stage.first, stage.last, stage.embedding, stage.head);
    model->to(stage.device);
    return model;
  }
  LlamaStage reading = stage;
  reading.initialise = false;
  Llama model(mc, reading);
  model->load_weights(std::move(file), cfg.model.path);
  return model;
}

// Every weight this stage holds is trained and checkpointed; the last stage's copy of tied
// embeddings is the first stage's, saved there.
std::vector<CheckpointedTensor> checkpointed_tensors(Llama& model, const ParallelRuntime& rt) {
  std::vector<CheckpointedTensor> held;
  for (auto& [name, p] : model->named_weights())
    if (p.numel() > 0) held.push_back({name, p, -1, true, name != "model.embed_tokens.weight" || rt.first_stage()});
  return held;
}

void report_model(const JobConfig& cfg, const LlamaConfig& mc, Llama& model) {
  std::fprintf(stderr, "graphtune: model %lld parameters (dim %lld, %lld layers, %lld heads, %lld kv heads), %d threads\n",
               static_cast<long long>(mc.num_parameters()), static_cast<long long>(mc.dim),
               static_cast<long long>(mc.n_layers), static_cast<long long>(mc.n_heads),
               static_cast<long long>(mc.n_kv_heads), torch::get_num_threads());
  // Phase lm trains every parameter: all of them are fp32 master weights, bf16 or not.
  std::fprintf(stderr, "graphtune: %s\n", precision_summary(cfg.model.dtype, frozen_bytes(*model)).c_str());
}

// The trained model as a Hugging Face folder, OUT/model, with the tokenizer it read: a
// SentencePiece model travels as itself (Hugging Face folders carry tokenizer.model), the byte
// and llama2.c tokenizers as llama2.c's tokenizer.bin.
std::string save_model(const JobConfig& cfg, const LlamaConfig& mc, const std::map<std::string, torch::Tensor>& weights,
                       const Tokenizer& tok, const std::string& tok_path) {
  const std::string out = cfg.job.out_dir + "/model";
  make_dirs(cfg.job.out_dir);
  save_hf_folder(out, mc, weights, "fp32", /*max_shard_bytes=*/0, /*overwrite=*/true);
  if (ends_with(tok_path, ".model")) {
    write_file_atomic(out + "/tokenizer.model", read_file(tok_path));
  } else {
    save_llama2c_tokenizer(tok, out + "/tokenizer.bin");
  }
  return out;
}

}  // namespace

int run_lm_phase(const JobConfig& cfg, const World& world, const c10::Device& device) {
  const auto t0 = std::chrono::steady_clock::now();
  // Texts first (cheap, and every bad file is reported before anything is allocated).
  const LmTexts texts = read_texts(cfg);
  const LmTokenizer tok_file = find_tokenizer(cfg, world, texts);
  std::unique_ptr<Tokenizer> tok = load_tokenizer(tok_file.path);
  const LlamaConfig mc = model_config(cfg, *tok);
  WindowSampler windows = token_windows(cfg, world, texts, *tok, tok_file.path);

  // A file's weights are checked now, before the ranks form their groups; a stage reads its
  // share of them only (cut into stages balanced by parameters).
  std::map<std::string, torch::Tensor> file;
  if (!cfg.model.path.empty()) file = load_model(cfg.model.path).weights;
  ParallelRuntime rt = make_parallel_runtime(cfg.parallelism, world, LlamaImpl::stage_weights(mc));
  LlamaStage stage{rt.first_layer, rt.last_layer, rt.first_stage(), rt.last_stage()};
  stage.device = device;
  Llama model = build_model(cfg, mc, stage, std::move(file));
  const std::map<std::string, std::vector<int64_t>> shapes = model->weight_shapes();
  TrainCheckpoint checkpoint(rt, cfg, cfg.training.steps, checkpointed_tensors(model, rt), model_fingerprint(shapes));
  checkpoint.add_file_contents("config.json", llama_config_json(mc));
  if (tok_file.trained) checkpoint.add_file(tok_file.path);
  const int64_t first_step = checkpoint.resume();
  windows.skip(first_step);  // one draw per optimizer step
  if (rt.reports()) report_model(cfg, mc, model);
  report_layout(rt, cfg.parallelism);

  TrainLogFile log_file(rt.reports() ? cfg.job.out_dir : "", first_step);
  train_lm(model, windows, cfg, rt, step_log_printer(rt, cfg.training.steps, log_file), checkpoint.hooks(),
           /*report=*/true);

  const std::map<std::string, torch::Tensor> weights = gather_pipeline_weights(rt, model->named_weights());
  if (rt.reports()) {
    const std::string out = save_model(cfg, mc, weights, *tok, tok_file.path);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "graphtune: trained %lld steps in %.1f s; model written to %s (fp32%s)\n",
                 static_cast<long long>(cfg.training.steps), secs, out.c_str(),
                 cfg.model.bf16() ? ": the master weights" : "");
  }
  rt.host.world->barrier();  // nobody exits (finalising MPI) while rank 0 still writes
  return 0;
}

}  // namespace gt
