// The weights of a Hugging Face folder (model.safetensors, or shards listed in
// model.safetensors.index.json; pytorch_model.bin, or its shards listed in
// pytorch_model.bin.index.json) and their validation against the config: names, shapes and
// dtypes are checked from the safetensors headers and the pickles before any tensor is touched.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "weights/hf_detail.hpp"
#include "weights/hf_folder.hpp"
#include "weights/safetensors.hpp"
#include "weights/torch_file.hpp"

using json = nlohmann::json;

namespace gt {

using hf_detail::kIndexFile;
using hf_detail::kPickleFile;
using hf_detail::kPickleIndexFile;
using hf_detail::kSingleFile;

namespace {

// One weights file of a folder, in either format: the names, shapes and dtypes its header (or
// pickle) gives before any tensor is touched, and each tensor as a view of the mapped file.
struct WeightFile {
  std::string path;
  std::map<std::string, TensorFacts> facts;
  std::function<torch::Tensor(const std::string&)> get;
};

WeightFile safetensors_weights(const std::string& path) {
  auto f = std::make_shared<SafetensorsFile>(SafetensorsFile::open(path));
  WeightFile w{path, {}, [f](const std::string& name) { return f->get(name); }};
  for (const auto& name : f->names()) {
    const SafetensorsEntry& e = f->info(name);
    w.facts[name] = {e.shape, e.dtype, find_safetensors_dtype(e.dtype)->floating, path};
  }
  return w;
}

// pytorch_model.bin and its shards: torch.save'd state dicts, read by the restricted unpickler.
WeightFile pickle_weights(const std::string& path) {
  auto f = std::make_shared<TorchFile>(TorchFile::open(path));
  auto refs = std::make_shared<std::map<std::string, torch_pickle::TensorRef>>();
  for (auto& [name, ref] : state_dict_entries(*f)) (*refs)[name] = std::move(ref);
  WeightFile w{path, {}, [f, refs](const std::string& name) { return f->tensor(refs->at(name)); }};
  for (const auto& [name, ref] : *refs)
    w.facts[name] = {ref.sizes, f->pickle().storages[ref.storage].dtype, torch::isFloatingType(f->dtype(ref)), path};
  return w;
}

// The weight files of a folder, and which of them holds each tensor.
struct WeightFiles {
  std::vector<WeightFile> files;
  std::map<std::string, size_t> owner;  // tensor name -> index in files
};

// The shards an index (model.safetensors.index.json or pytorch_model.bin.index.json) lists,
// checked against the shards both ways: every mapped tensor is in its shard, and every tensor of
// a shard is mapped there.
void open_shards(const std::string& dir, const std::string& index_file, WeightFile (*open)(const std::string&),
                 WeightFiles& w) {
  std::vector<WeightFile>& files = w.files;
  std::map<std::string, size_t>& owner = w.owner;
  const std::string index_path = join_path(dir, index_file);
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
      files.push_back(open(p));
      it = shard_index.emplace(file, files.size() - 1).first;
    }
    if (!files[it->second].facts.count(name))
      fail(files[it->second].path, "tensor '" + name + "' is listed in " + index_file + " but absent from this shard");
    owner[name] = it->second;
  }
  for (size_t i = 0; i < files.size(); ++i)
    for (const auto& [n, facts] : files[i].facts) {
      auto it = owner.find(n);
      if (it == owner.end() || it->second != i)
        fail(files[i].path, "tensor '" + n + "' is in this shard but " + index_file + " does not map it here");
    }
}

WeightFiles open_weight_files(const std::string& dir) {
  WeightFiles w;
  // transformers' order: safetensors first, the single file before an index.
  const auto single = [&](const std::string& name, WeightFile (*open)(const std::string&)) {
    w.files.push_back(open(join_path(dir, name)));
    for (const auto& [n, facts] : w.files[0].facts) w.owner[n] = 0;
  };
  if (path_exists(join_path(dir, kSingleFile))) {
    single(kSingleFile, safetensors_weights);
  } else if (path_exists(join_path(dir, kIndexFile))) {
    open_shards(dir, kIndexFile, safetensors_weights, w);
  } else if (path_exists(join_path(dir, kPickleFile))) {
    single(kPickleFile, pickle_weights);
  } else if (path_exists(join_path(dir, kPickleIndexFile))) {
    open_shards(dir, kPickleIndexFile, pickle_weights, w);
  } else {
    fail(dir, std::string("no ") + kSingleFile + ", " + kIndexFile + ", " + kPickleFile + " or " + kPickleIndexFile);
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

  // Validate from the headers (or pickles) alone, before any tensor exists.
  std::map<std::string, TensorFacts> facts;
  for (const auto& [name, i] : w.owner) facts[name] = w.files[i].facts.at(name);
  check_llama_tensors(cfg, facts, dir);

  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, i] : w.owner) weights[name] = w.files[i].get(name);
  hf_detail::drop_extras(cfg, weights, facts.count("lm_head.weight") ? facts["lm_head.weight"].file : dir);
  return weights;
}

}  // namespace gt
