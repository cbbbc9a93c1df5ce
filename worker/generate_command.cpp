// graphtune generate: the prompt and its continuation on stdout, as llama2.c's run prints them;
// everything else on stderr.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <optional>

#include "common/error.hpp"
#include "config/names.hpp"
#include "data/chat_template.hpp"
#include "model/generate.hpp"
#include "tokenizer/tokenizer.hpp"
#include "weights/load_model.hpp"
#include "worker/commands.hpp"
#include "worker/device_choice.hpp"

namespace gt {

namespace {

struct GenerateArgs {
  std::string model, tokenizer, prompt, dtype = "fp32", chat, device = "auto";
  int64_t max_new_tokens = 256;
  float temperature = 1.0f, top_p = 0.9f;
  uint64_t seed = 0;
  int threads = 0;
  bool no_kv_cache = false;
};

// run.c's safe_printf: stray bytes of a split UTF-8 character never reach the terminal.
void print_piece(const std::string& piece) {
  if (!Tokenizer::is_printable_piece(piece)) return;
  std::fwrite(piece.data(), 1, piece.size(), stdout);
  std::fflush(stdout);
}

int run_generate(const GenerateArgs& a) {
  if (a.prompt.empty()) fail("--prompt", "empty prompt");
  if (a.max_new_tokens < 1) fail("--max-new-tokens", "must be at least 1");
  if (a.temperature < 0) fail("--temperature", "must be >= 0");
  if (a.top_p < 0 || a.top_p > 1) fail("--top-p", "must be in [0, 1]");
  const std::optional<DType> dtype = value_named<DType>(a.dtype);
  if (!dtype || *dtype == DType::kFp16) fail("--dtype", "expected fp32 or bf16, got '" + a.dtype + "'");
  const std::optional<DeviceKind> device = value_named<DeviceKind>(a.device);
  if (!device) fail("--device", "expected auto, cpu or cuda, got '" + a.device + "'");
  const c10::Device on = choose_device(*device, "--device");  // a device this host has, or one line saying why not
  use_device(on, /*tf32=*/true, /*deterministic=*/false);

  // Validate everything cheap before reading weights.
  LlamaConfig cfg = read_model_config(a.model);
  std::string tok_path = a.tokenizer.empty() ? default_tokenizer_path(a.model) : a.tokenizer;
  if (tok_path.empty()) fail(a.model, "no tokenizer beside the model: pass --tokenizer");
  auto tok = load_tokenizer(tok_path, static_cast<int32_t>(cfg.vocab_size));
  // --chat: the prompt is one user turn in the model's chat template, and only the answer is
  // printed. Otherwise the text is continued as it is, printed with its continuation.
  const bool chat = !a.chat.empty();
  std::vector<int32_t> prompt;
  int32_t stop = tok->eos_id();
  if (chat) {
    const ChatTemplate tmpl = chat_template_named(a.chat, "--chat");
    const std::string text = render_chat(tmpl, {{"human", a.prompt}}, /*add_generation_prompt=*/true);
    prompt = tok->encode(text, /*bos=*/tmpl.format == ChatFormat::kVicunaV11, /*eos=*/false);
    stop = chat_stop_id(tmpl, *tok);
  } else {
    prompt = tok->encode(a.prompt, tok->adds_bos(), /*eos=*/false);
  }
  if (static_cast<int64_t>(prompt.size()) >= cfg.max_seq_len)
    fail("--prompt", "is " + std::to_string(prompt.size()) + " tokens, the model's context is " +
                         std::to_string(cfg.max_seq_len));

  if (a.threads > 0) torch::set_num_threads(a.threads);
  LoadedModel loaded = load_model(a.model);
  // Each weight straight from the file into its dtype on the device, none drawn at random first.
  LlamaStage whole;
  whole.dtype = *dtype == DType::kBf16 ? torch::kBFloat16 : torch::kFloat32;
  whole.device = on;
  whole.initialise = false;
  Llama model(loaded.config, whole);
  model->load_weights(std::move(loaded.weights), a.model);
  loaded.weights.clear();
  model->eval();

  if (!chat) {
    if (!tok->adds_bos()) print_piece(tok->decode({prompt[0]}));
    for (size_t i = 1; i < prompt.size(); ++i) print_piece(tok->decode_piece(prompt[i - 1], prompt[i]));
  }
  int32_t prev = prompt.back();
  SamplingParams sp;
  sp.temperature = a.temperature;
  sp.top_p = a.top_p;
  sp.seed = a.seed;
  sp.max_new_tokens = a.max_new_tokens;
  sp.stop_id = stop;
  sp.kv_cache = !a.no_kv_cache;
  auto t0 = std::chrono::steady_clock::now();
  auto out = generate(model, prompt, sp, [&](int32_t id) {
    print_piece(tok->decode_piece(prev, id));
    prev = id;
  });
  std::printf("\n");
  std::fflush(stdout);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr, "graphtune: %zu tokens in %.2f s (%.1f tok/s)\n", out.size(), s, out.size() / std::max(s, 1e-9));
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int& exit_code) {
  auto a = std::make_shared<GenerateArgs>();
  CLI::App* sub = app.add_subcommand("generate", "generate text from a llama2.c file or a Hugging Face folder");
  sub->add_option("--model", a->model, "llama2.c .bin file or Hugging Face folder")->required();
  sub->add_option("--tokenizer", a->tokenizer,
                  "tokenizer.model (SentencePiece) or llama2.c tokenizer .bin; default: the model's own");
  sub->add_option("--prompt", a->prompt, "text to continue (with --chat: the user's message)")->required();
  sub->add_option("--chat", a->chat, "vicuna_v1_1, chatml, qwen2.5, llama3 or llama3.1: answer the prompt as a chat model, in this template");
  sub->add_option("--max-new-tokens", a->max_new_tokens, "tokens to generate after the prompt");
  sub->add_option("--temperature", a->temperature, "0 = greedy");
  sub->add_option("--top-p", a->top_p, "nucleus sampling threshold (0 or 1 disables it)");
  sub->add_option("--seed", a->seed, "sampling seed (0 = from the clock)");
  sub->add_option("--dtype", a->dtype, "fp32 or bf16");
  sub->add_option("--device", a->device, "auto, cpu or cuda (auto: this rank's GPU where libtorch sees one, else the CPU)");
  sub->add_option("--threads", a->threads, "CPU threads (0 = libtorch's default, OMP_NUM_THREADS)");
  sub->add_flag("--no-kv-cache", a->no_kv_cache,
                "recompute the whole sequence for every new token (the baseline the KV cache is measured against)");
  sub->callback([a, &exit_code] { exit_code = run_generate(*a); });
}

}  // namespace gt
