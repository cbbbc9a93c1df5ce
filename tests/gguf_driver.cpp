// graphtune's side of tests/test_gguf.py and tests/cli/gguf.sh: reads a GGUF file with
// formats/gguf.hpp and writes what it found for the Python test to compare with the gguf
// package. A program, not a gtest, so ctest lists no test that only ever skips.
//   dump FILE OUT.safetensors [NAME...]   tensors as decoded (torch order, no permutation);
//                                         all when no name is given
//   dump-bf16 FILE OUT.safetensors NAME...  the same, gguf_dequantized(file, name, bf16)
//   llama FILE OUT.safetensors [HF_NAME...] load_gguf_llama: HF-named weights, config as metadata
//   meta FILE                             metadata and tensor infos as JSON on stdout
//   get FILE string|int|float|bool|strings|ints KEY   one typed lookup, printed
// Bad input: one line on stderr and exit 2 (gt::run_main).
#include <torch/torch.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "formats/gguf.hpp"
#include "weights/gguf_tensor.hpp"
#include "weights/gguf_weights.hpp"
#include "weights/safetensors.hpp"

namespace {

// Strings may be any bytes; hex keeps the JSON valid whatever they hold.
std::string hex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : s) {
    out += digits[ch >> 4];
    out += digits[ch & 15];
  }
  return out;
}

nlohmann::json to_json(const gt::GgufValue& v) {
  using K = gt::GgufValue::Kind;
  nlohmann::json j;
  j["type"] = gt::gguf_value_type_name(v.gguf_type);
  switch (v.kind) {
    case K::Uint: j["value"] = v.u; break;
    case K::Int: j["value"] = v.i; break;
    case K::Float: j["value"] = v.f; break;
    case K::Bool: j["value"] = v.b; break;
    case K::String: j["value"] = hex(v.s); break;
    case K::Array: {
      j["element_type"] = gt::gguf_value_type_name(v.array_type);
      nlohmann::json items = nlohmann::json::array();
      for (const auto& e : v.array) items.push_back(to_json(e));
      j["value"] = items;
      break;
    }
  }
  return j;
}

int body(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s dump|dump-bf16|llama|meta|get FILE ...\n", argv[0]);
    return 1;
  }
  const std::string mode = argv[1], path = argv[2];
  if (mode == "dump" || mode == "dump-bf16") {
    const gt::GgufFile f = gt::GgufFile::open(path);
    std::vector<std::string> names(argv + 4, argv + argc);
    if (names.empty())
      for (const auto& t : f.tensors()) names.push_back(t.name);
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (const auto& n : names)
      out.push_back({n, gt::gguf_dequantized(f, n, mode == "dump" ? torch::kFloat32 : torch::kBFloat16)});
    gt::save_safetensors(argv[3], out);
    std::printf("dumped %zu tensors\n", out.size());
  } else if (mode == "llama") {
    const gt::LoadedModel m = gt::load_gguf_llama(path);
    const gt::LlamaConfig& c = m.config;
    std::vector<std::pair<std::string, torch::Tensor>> out;
    for (int k = 4; k < argc; ++k) out.push_back({argv[k], m.weights.at(argv[k])});
    auto s = [](auto v) { return nlohmann::json(v).dump(); };  // doubles round-trip exactly
    std::map<std::string, std::string> meta = {
        {"dim", s(c.dim)}, {"n_layers", s(c.n_layers)}, {"n_heads", s(c.n_heads)}, {"n_kv_heads", s(c.n_kv_heads)},
        {"hidden_dim", s(c.hidden_dim)}, {"vocab_size", s(c.vocab_size)}, {"max_seq_len", s(c.max_seq_len)},
        {"norm_eps", s(c.norm_eps)}, {"rope_theta", s(c.rope_theta)}, {"rope_scaling_factor", s(c.rope_scaling_factor)},
        {"tie_embeddings", s(c.tie_embeddings)}, {"bos_id", s(c.bos_id)}, {"eos_id", s(c.eos_id)},
        {"pad_id", s(c.pad_id)}, {"n_weights", s(m.weights.size())}};
    gt::save_safetensors(argv[3], out, meta);
    std::printf("loaded %zu weights\n", m.weights.size());
  } else if (mode == "meta") {
    const gt::GgufFile f = gt::GgufFile::open(path);
    nlohmann::json j;
    j["version"] = f.version();
    j["alignment"] = f.alignment();
    j["data_start"] = f.data_start();
    j["keys"] = f.keys();
    for (const auto& k : f.keys()) j["metadata"][k] = to_json(*f.find(k));
    j["tensors"] = nlohmann::json::array();
    for (const auto& t : f.tensors())
      j["tensors"].push_back({{"name", t.name}, {"type", t.type}, {"ne", t.ne}, {"offset", t.offset}, {"n_bytes", t.n_bytes}});
    std::cout << j.dump() << "\n";
  } else if (mode == "get" && argc == 5) {
    const gt::GgufFile f = gt::GgufFile::open(path);
    const std::string kind = argv[3], key = argv[4];
    nlohmann::json j;
    if (kind == "string") j = hex(f.get_string(key));
    else if (kind == "int") j = f.get_int(key);
    else if (kind == "float") j = f.get_float(key);
    else if (kind == "bool") j = f.get_bool(key);
    else if (kind == "ints") j = f.get_int_array(key);
    else if (kind == "strings") {
      j = nlohmann::json::array();
      for (const auto& s : f.get_string_array(key)) j.push_back(hex(s));
    } else {
      std::fprintf(stderr, "unknown kind %s\n", kind.c_str());
      return 1;
    }
    std::cout << j.dump() << "\n";
  } else {
    std::fprintf(stderr, "unknown mode or arguments: %s\n", mode.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gt::run_main("graphtune", body, argc, argv); }
