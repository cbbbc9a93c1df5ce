// graphtune convert: a llama2.c .bin, a GGUF file or a Hugging Face folder -> a Hugging Face
// folder that transformers loads, with the tokenizer the model carries
// (worker/model_tokenizer_files.hpp). graphtune-worker dump-logits: the logits of given token ids
// as safetensors, so tests can hold graphtune's forward pass against transformers'.
#include <torch/torch.h>

#include <cctype>

#include <cstdio>
#include <optional>
#include <set>

#include "common/error.hpp"
#include "common/staged_folder.hpp"
#include "config/names.hpp"
#include "formats/model_config.hpp"
#include "formats/model_presets.hpp"
#include "model/llama.hpp"
#include "weights/hf_folder.hpp"
#include "weights/load_model.hpp"
#include "weights/safetensors.hpp"
#include "worker/commands.hpp"
#include "worker/model_tokenizer_files.hpp"

namespace gt {

namespace {

struct ConvertArgs {
  std::string model, out, dtype = "auto", max_shard_size = "0";
  bool overwrite = false;
};

struct DumpArgs {
  std::string model, tokens, out;
};

// "123", "500KB", "2GB" (powers of 1000, as transformers' max_shard_size) or "64MiB".
int64_t parse_bytes(const std::string& text) {
  const std::string where = "--max-shard-size";
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i == 0 || i > 15) fail(where, "expected a byte count like 2000000000, 2GB or 512MiB, got '" + text + "'");
  const int64_t n = std::stoll(text.substr(0, i));
  std::string unit = text.substr(i);
  for (auto& c : unit) c = char(std::toupper(static_cast<unsigned char>(c)));
  const std::pair<const char*, int64_t> units[] = {{"", 1},           {"B", 1},          {"KB", 1000},
                                                   {"MB", 1000000},   {"GB", 1000000000}, {"KIB", 1 << 10},
                                                   {"MIB", 1 << 20},  {"GIB", 1 << 30}};
  for (const auto& [name, mult] : units)
    if (unit == name) return n * mult;
  fail(where, "unknown unit '" + text.substr(i) + "' in '" + text + "' (use B, KB, MB, GB, KiB, MiB, GiB)");
}

// "auto": the dtype the weights already have when it is one graphtune writes, else fp32
// (llama2.c files are fp32), so converting a bf16 folder does not double its size.
DType resolve_dtype(const std::optional<DType>& requested, const std::map<std::string, torch::Tensor>& weights) {
  if (requested) return *requested;
  std::set<torch::ScalarType> types;
  for (const auto& kv : weights) types.insert(kv.second.scalar_type());
  if (types.size() == 1) {
    if (*types.begin() == torch::kBFloat16) return DType::kBf16;
    if (*types.begin() == torch::kFloat16) return DType::kFp16;
  }
  return DType::kFp32;
}

int run_convert(const ConvertArgs& a) {
  const bool keep = a.dtype == "auto";  // --dtype auto: as the source's weights are
  const std::optional<DType> requested = value_named<DType>(a.dtype);
  if (!keep && !requested) fail("--dtype", "expected auto, fp32, bf16 or fp16, got '" + a.dtype + "'");
  const int64_t shard = parse_bytes(a.max_shard_size);
  // The model's tokenizer goes in the same folder, which appears whole or not at all: staged
  // here, as export stages its own, with save_hf_folder's rule for what --overwrite replaces.
  // Checked before gigabytes of weights are read.
  const ReplaceRule rule = model_folder_rule(a.overwrite);
  StagedFolder::check(a.out, rule);
  if (!read_model_config(a.model).rope_freq_factors.empty())  // before any weight is read
    fail(a.model, "not supported yet: a folder for a model with llama.cpp's rope_freqs factors (a Llama 3 GGUF): config.json has no place for them, and the folder would run without its scaling");
  LoadedModel m = load_model(a.model);
  const char* dtype = name_of(resolve_dtype(requested, m.weights));
  StagedFolder out(a.out, rule);
  save_hf_folder(out.path(), m.config, m.weights, dtype, shard, /*overwrite=*/true);
  std::string tokenizer = write_model_tokenizer_files(resolve_model_path(a.model, "--model"), out.path());
  out.commit();
  std::fprintf(stderr, "graphtune: wrote %s (%s, %lld parameters; tokenizer: %s)\n", out.dir().c_str(), dtype,
               static_cast<long long>(m.config.num_parameters()), tokenizer.empty() ? "none" : tokenizer.c_str());
  return 0;
}

std::vector<int64_t> parse_tokens(const std::string& text, int64_t vocab) {
  std::vector<int64_t> ids;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size()) fail("--tokens", "'" + item + "' is not a token id (want e.g. 1,403,9)");
    if (v < 0 || v >= vocab)
      fail("--tokens", "id " + item + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    ids.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return ids;
}

int run_dump_logits(const DumpArgs& a) {
  LlamaConfig cfg = read_model_config(a.model);
  std::vector<int64_t> ids = parse_tokens(a.tokens, cfg.vocab_size);
  if (static_cast<int64_t>(ids.size()) > cfg.max_seq_len)
    fail("--tokens", std::to_string(ids.size()) + " tokens exceed the model's context of " + std::to_string(cfg.max_seq_len));

  LoadedModel m = load_model(a.model);
  Llama model(m.config);
  model->load_weights(m.weights, a.model);
  m.weights.clear();
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor tokens = torch::tensor(ids, torch::kInt64).view({1, -1});
  torch::Tensor logits = model->forward(tokens).to(torch::kFloat32);
  save_safetensors(a.out, {{"logits", logits}}, {{"model", a.model}, {"tokens", a.tokens}});
  return 0;
}

}  // namespace

void add_convert_commands(CLI::App& app, int& exit_code) {
  auto c = std::make_shared<ConvertArgs>();
  CLI::App* conv = app.add_subcommand("convert", "convert a llama2.c .bin, a GGUF file or a Hugging Face folder into a Hugging Face folder, "
                                       "with the model's tokenizer");
  conv->add_option("--model", c->model, "llama2.c .bin file, GGUF file, Hugging Face folder or preset name")->required();
  conv->add_option("--out", c->out, "folder to create (written whole or not at all)")->required();
  conv->add_option("--dtype", c->dtype, "auto (keep the source's), fp32, bf16 or fp16");
  conv->add_option("--max-shard-size", c->max_shard_size,
                   "split the weights into shards of at most this size (bytes, or 2GB, 512MiB); 0 = one file");
  conv->add_flag("--overwrite", c->overwrite, "replace --out if it is an existing model folder");
  conv->callback([c, &exit_code] { exit_code = run_convert(*c); });

  auto d = std::make_shared<DumpArgs>();
  CLI::App* dump = app.add_subcommand("dump-logits", "(testing) write the fp32 logits [1, T, vocab] of token ids as safetensors");
  dump->add_option("--model", d->model, "llama2.c .bin file or Hugging Face folder")->required();
  dump->add_option("--tokens", d->tokens, "comma-separated token ids, e.g. 1,403,9")->required();
  dump->add_option("--out", d->out, "output .safetensors file (tensor 'logits')")->required();
  dump->callback([d, &exit_code] { exit_code = run_dump_logits(*d); });
}

}  // namespace gt
