// The weights of a Hugging Face folder (model.safetensors, or shards listed in
// model.safetensors.index.json) and their validation against the config: names, shapes and
// dtypes are checked from the safetensors headers before any tensor is touched.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "weights/hf_detail.hpp"
#include "weights/hf_folder.hpp"
#include "weights/safetensors.hpp"

using json = nlohmann::json;

namespace gt {

using hf_detail::kIndexFile;
using hf_detail::kSingleFile;

namespace {

// The safetensors files of a folder, and which of them holds each tensor.
struct WeightFiles {
  std::vector<SafetensorsFile> files;
  std::map<std::string, size_t> owner;  // tensor name -> index in files
};

// The shards model.safetensors.index.json lists, checked against their headers both ways:
// every mapped tensor is in its shard, and every tensor of a shard is mapped there.
void open_shards(const std::string& dir, WeightFiles& w) {
  std::vector<SafetensorsFile>& files = w.files;
  std::map<std::string, size_t>& owner = w.owner;
  const std::string index_path = join_path(dir, kIndexFile);
  json index;
  try {
    index = json::parse(read_file(index_path));
  } catch (const json::exception& e) {
    fail(index_path, std::string("not valid JSON: ") + e.what());
  }
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail(index_path, "has no \"weight_map\" object");
  std::map<std::string, size_t> shard_index;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string()) fail(index_path, "weight_map entry for '" + name + "' is not a file name");
    const std::string file = shard.get<std::string>();
    // Shards live in the folder itself: no paths, so an index cannot point elsewhere.
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
      fail(index_path, "weight_map entry for '" + name + "' names '" + file + "', not a file in the folder");
    auto it = shard_index.find(file);
    if (it == shard_index.end()) {
      const std::string p = join_path(dir, file);
      if (!path_exists(p)) fail(index_path, "weight_map names shard '" + file + "', which is missing");
      files.push_back(SafetensorsFile::open(p));
      it = shard_index.emplace(file, files.size() - 1).first;
    }
    if (!files[it->second].contains(name))
      fail(files[it->second].path(), "tensor '" + name + "' is listed in " + kIndexFile + " but absent from this shard");
    owner[name] = it->second;
  }
  for (size_t i = 0; i < files.size(); ++i)
    for (const auto& n : files[i].names()) {
      auto it = owner.find(n);
      if (it == owner.end() || it->second != i)
        fail(files[i].path(), "tensor '" + n + "' is in this shard but " + kIndexFile + " does not map it here");
    }
}

WeightFiles open_weight_files(const std::string& dir) {
  WeightFiles w;
  if (path_exists(join_path(dir, kSingleFile))) {
    // transformers also prefers the single file when both are present.
    w.files.push_back(SafetensorsFile::open(join_path(dir, kSingleFile)));
    for (const auto& n : w.files[0].names()) w.owner[n] = 0;
  } else if (path_exists(join_path(dir, kIndexFile))) {
    open_shards(dir, w);
  } else if (path_exists(join_path(dir, "pytorch_model.bin")) || path_exists(join_path(dir, "pytorch_model.bin.index.json"))) {
    fail(dir, "only safetensors weights are supported, not pytorch_model.bin (pickle); re-save with "
              "save_pretrained(dir, safe_serialization=True)");
  } else {
    fail(dir, std::string("no ") + kSingleFile + " or " + kIndexFile);
  }
  return w;
}

}  // namespace

namespace hf_detail {

void drop_extras(const LlamaConfig& cfg, std::map<std::string, torch::Tensor>& weights,
                 const std::string& head_file) {
  for (auto it = weights.begin(); it != weights.end();)
    it = is_rotary_frequency_buffer(it->first) ? weights.erase(it) : std::next(it);
  auto head = weights.find("lm_head.weight");
  if (cfg.tie_embeddings && head != weights.end()) {
    if (!torch::equal(head->second, weights.at("model.embed_tokens.weight").to(head->second.scalar_type())))
      fail(head_file, "tensor 'lm_head.weight' differs from 'model.embed_tokens.weight' but "
                      "tie_word_embeddings is true");
    weights.erase(head);
  }
}

}  // namespace hf_detail

std::map<std::string, torch::Tensor> read_hf_weights(const std::string& dir) {
  const LlamaConfig cfg = read_hf_config(dir);
  const WeightFiles w = open_weight_files(dir);
  const std::vector<SafetensorsFile>& files = w.files;

  // Validate from the headers alone, before any tensor exists.
  std::map<std::string, TensorFacts> facts;
  for (const auto& [name, i] : w.owner) {
    const SafetensorsEntry& e = files[i].info(name);
    facts[name] = {e.shape, e.dtype, find_safetensors_dtype(e.dtype)->floating, files[i].path()};
  }
  check_llama_tensors(cfg, facts, dir);

  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, i] : w.owner) weights[name] = files[i].get(name);
  hf_detail::drop_extras(cfg, weights, facts.count("lm_head.weight") ? facts["lm_head.weight"].file : dir);
  return weights;
}

}  // namespace gt
