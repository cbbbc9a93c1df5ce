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
#include "train/lm_trainer.hpp"
#include "train/mixed_precision.hpp"
#include "train/rank_report.hpp"
#include "train/train_checkpoint.hpp"
#include "weights/hf_folder.hpp"
#include "weights/load_model.hpp"

namespace gt {

int run_lm_stage(const TrainConfig& cfg, const World& world) {
  auto t0 = std::chrono::steady_clock::now();
  // Texts first (cheap, and every bad file is reported before anything is allocated).
  std::vector<InstructionRecord> records, questions;
  if (!cfg.instructions.empty()) records = read_job_records(cfg);
  for (const auto& r : records) questions.push_back(text_only_record(r));
  const ChatTemplate tmpl = chat_template_named(cfg.chat_template, cfg.path + ": [data].template");
  const std::vector<std::string> corpus = lm_documents(cfg, cfg.instructions.empty() ? nullptr : &records);

  std::string tok_path = resolve_tokenizer_path(cfg.tokenizer, cfg.model_path, cfg.path + ": [model].tokenizer");
  const bool trains_tokenizer = tok_path == "train";
  const ResumePoint resume = find_resume_point(cfg);
  if (trains_tokenizer && !resume.folder.empty()) {
    // The weights of a resumed run index the vocabulary they were trained with, which travels
    // with them: read it back instead of training another.
    auto saved = resume.index.files.find("tokenizer.model");
    if (saved == resume.index.files.end())
      fail(resume.folder, "has no tokenizer.model, the vocabulary this run trained ([model].tokenizer = \"train\")");
    ckpt::Index only;
    only.files.insert(*saved);
    ckpt::verify_files(resume.folder, only);
    make_dirs(cfg.out_dir);
    tok_path = cfg.out_dir + "/tokenizer.model";
    write_file_atomic(tok_path, read_file(resume.folder + "/tokenizer.model"));
  } else if (trains_tokenizer) {
    if (!cfg.model_path.empty())
      fail(cfg.path + ": [model].tokenizer", "\"train\" makes a new vocabulary, which only a fresh model can use; "
                                               "[model].path names an existing one");
    tok_path = cfg.out_dir + "/tokenizer.model";
    // Rank 0 trains it and writes it into the run folder; the others read that file (a folder
    // every rank sees, as for the checkpoints).
    if (world.rank() == 0) {
      // The tokenizer learns from exactly what the model will read: the corpus and the rendered
      // conversations (without the template's "</s>" or <|im_start|>/<|im_end|>: ids, not text).
      std::vector<std::string> texts = corpus;
      for (const auto& q : questions) {
        std::string p = render_chat(tmpl, q.conversations);
        for (const std::string& t : chat_token_texts(tmpl))
          for (size_t at = p.find(t); at != std::string::npos; at = p.find(t, at)) p.erase(at, t.size());
        texts.push_back(std::move(p));
      }
      const std::string model_bytes =
          train_sentencepiece(texts, static_cast<int32_t>(cfg.vocab_size), cfg.path + ": [model].vocab_size");
      make_dirs(cfg.out_dir);
      write_file_atomic(tok_path, model_bytes);
      std::fprintf(stderr, "graphtune: trained a SentencePiece BPE tokenizer (%lld pieces) on %zu texts: %s\n",
                   static_cast<long long>(cfg.vocab_size), texts.size(), tok_path.c_str());
    }
    world.barrier();
  }
  std::unique_ptr<Tokenizer> tok = load_tokenizer(tok_path);

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

  std::vector<std::vector<int32_t>> docs;
  for (const auto& text : corpus) docs.push_back(tok->encode(text, /*bos=*/true, /*eos=*/true));
  int64_t question_tokens = 0;
  if (!questions.empty()) {
    // Conversations tokenised exactly as the graph stages and eval will see them (BOS, the
    // vicuna_v1_1 prompt, the answer, EOS). That path checks GraphGPT's tokens are registered,
    // so a private copy of the tokenizer gets them; a graph-free text never produces them.
    std::unique_ptr<Tokenizer> conv_tok = load_tokenizer(tok_path);
    conv_tok->add_special_tokens(graph_special_tokens());
    for (const auto& q : questions) {
      docs.push_back(tokenize_conversation(q, {}, *conv_tok, int64_t{1} << 40, tmpl).input_ids);
      question_tokens += static_cast<int64_t>(docs.back().size());
    }
  }
  WindowSampler data(pack_documents(docs), cfg.seq_len, static_cast<uint64_t>(cfg.seed));
  if (world.rank() == 0) {
    std::fprintf(stderr, "graphtune: corpus '%s': %zu documents", cfg.source.c_str(), corpus.size());
    if (!questions.empty())
      std::fprintf(stderr, " + %zu text-only conversations from %s (%lld tokens)", questions.size(),
                   cfg.instructions.c_str(), static_cast<long long>(question_tokens));
    std::fprintf(stderr, ", %lld tokens\n", static_cast<long long>(data.stream_size()));
  }

  Llama model(mc);
  if (!cfg.model_path.empty()) {
    model->load_weights(load_model(cfg.model_path).weights, cfg.model_path);
  } else {
    model->init_weights(static_cast<uint64_t>(cfg.seed));
  }
  // Cut into stages (balanced by parameters: the embeddings count on stage 0, the norm and the
  // head, a copy of the table when tied, on the last), then each stage drops what it does not run.
  std::vector<int64_t> layer_params(static_cast<size_t>(mc.n_layers), 0);
  int64_t first_extra = 0, last_extra = mc.tie_embeddings ? mc.vocab_size * mc.dim : 0;
  for (auto& [name, p] : model->named_weights()) {
    const int64_t l = LlamaImpl::layer_of(name);
    if (l >= 0) layer_params[static_cast<size_t>(l)] += p.numel();
    else (name == "model.embed_tokens.weight" ? first_extra : last_extra) += p.numel();
  }
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [name, p] : model->named_weights()) shapes[name] = p.sizes().vec();
  ParallelRuntime rt = make_parallel_runtime(cfg, world, layer_params, first_extra, last_extra);
  model->keep_only(rt.first_layer, rt.last_layer, rt.first_stage(), rt.last_stage());
  // Every weight this stage holds is trained and checkpointed; the last stage's copy of tied
  // embeddings is the first stage's, saved there.
  std::vector<CheckpointedTensor> held;
  for (auto& [name, p] : model->named_weights())
    if (p.numel() > 0) held.push_back({name, p, -1, true, name != "model.embed_tokens.weight" || rt.first_stage()});
  TrainCheckpoint checkpoint(rt, cfg, cfg.steps, std::move(held), model_fingerprint(shapes));
  checkpoint.add_file_contents("config.json", llama_config_json(mc));
  if (trains_tokenizer) checkpoint.add_file(tok_path);
  const int64_t first_step = checkpoint.resume();
  data.skip(first_step);  // one draw per optimizer step
  if (rt.reports()) {
    std::fprintf(stderr, "graphtune: model %lld parameters (dim %lld, %lld layers, %lld heads, %lld kv heads), %d threads\n",
                 static_cast<long long>(mc.num_parameters()), static_cast<long long>(mc.dim),
                 static_cast<long long>(mc.n_layers), static_cast<long long>(mc.n_heads),
                 static_cast<long long>(mc.n_kv_heads), torch::get_num_threads());
    // Stage lm trains every parameter: all of them are fp32 master weights, bf16 or not.
    std::fprintf(stderr, "graphtune: %s\n", precision_summary(cfg.dtype, frozen_bytes(*model)).c_str());
  }
  report_layout(rt, cfg);

  TrainLogFile log_file(rt.reports() ? cfg.out_dir : "", first_step);
  train_lm(
      model, data, cfg, rt,
      [&](const LmLogLine& l) {
        log_file.write(l);
        if (!rt.reports()) return;
        std::fprintf(stderr, "step %5lld/%lld | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s%s\n",
                     static_cast<long long>(l.step), static_cast<long long>(cfg.steps), l.loss, l.lr, l.grad_norm,
                     l.tokens_per_s, skipped_note(l).c_str());
      },
      [&](const StepRunner& runner) { report_rank_peak(rt, runner); }, checkpoint.hooks());

  std::map<std::string, torch::Tensor> weights = gather_pipeline_weights(rt, model->named_weights());
  if (!rt.reports()) {
    rt.world->barrier();  // nobody exits (finalising MPI) while rank 0 still writes
    return 0;
  }
  const std::string out = cfg.out_dir + "/model";
  make_dirs(cfg.out_dir);
  save_hf_folder(out, mc, weights, "fp32", /*max_shard_bytes=*/0, /*overwrite=*/true);
  // A SentencePiece model travels as itself (Hugging Face folders carry tokenizer.model); the
  // byte and llama2.c tokenizers as llama2.c's tokenizer.bin.
  if (ends_with(tok_path, ".model")) {
    write_file_atomic(out + "/tokenizer.model", read_file(tok_path));
  } else {
    save_llama2c_tokenizer(*tok, out + "/tokenizer.bin");
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "graphtune: trained %lld steps in %.1f s; model written to %s (fp32%s)\n",
               static_cast<long long>(cfg.steps), secs, out.c_str(), is_bf16(cfg.dtype) ? ": the master weights" : "");
  rt.world->barrier();
  return 0;
}

}  // namespace gt
