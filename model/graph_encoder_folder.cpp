#include "model/graph_encoder_folder.hpp"

#include <nlohmann/json.hpp>

#include <torch/torch.h>

#include <map>
#include <regex>
#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/json_file.hpp"
#include "weights/safetensors.hpp"
#include "weights/torch_file.hpp"

namespace gt {
namespace {

using json = nlohmann::json;

int64_t positive(const json& j, const std::string& path, const char* key) {
  if (!j.contains(key)) fail(path, std::string("key '") + key + "' is missing");
  const json& v = j[key];
  if (!v.is_number_integer() || v.get<int64_t>() <= 0)
    fail(path, std::string("key '") + key + "' must be a positive integer (got " + v.dump() + ")");
  return v.get<int64_t>();
}

bool flag(const json& j, const std::string& path, const char* key, bool def) {
  if (!j.contains(key) || j[key].is_null()) return def;
  if (!j[key].is_boolean()) fail(path, std::string("key '") + key + "' must be true or false (got " + j[key].dump() + ")");
  return j[key].get<bool>();
}

// The one weights file of an encoder folder.
std::string weights_file(const std::string& dir) {
  std::vector<std::string> found;
  for (const std::string& name : list_dir(dir))
    for (const char* ext : {".pkl", ".pt", ".pth", ".bin", ".safetensors"})
      if (ends_with(name, ext)) found.push_back(name);
  if (found.empty()) fail(dir, "an encoder folder without its weights (a .pkl, .pt, .bin or .safetensors beside config.json)");
  if (found.size() > 1) {
    std::string names;
    for (const auto& n : found) names += (names.empty() ? "" : ", ") + n;
    fail(dir, "holds several weights files (" + names + "): name the one to read as [model].graph_encoder, with "
              "[model].graph_encoder_prefix");
  }
  return join_path(dir, found[0]);
}

// A weights file has no config.json: the widths and the layer count are read off its tensors
// (an encoder of another feature width than GraphGPT's 128, as grounding on such a graph writes
// it). The head count leaves no trace in any shape: it stays GraphGPT's 8.
GraphEncoderConfig config_of_weights(const std::map<std::string, torch::Tensor>& w, const std::string& prefix) {
  GraphEncoderConfig c;
  auto find = [&](const std::string& name) -> const torch::Tensor* {
    auto it = w.find(prefix + name);
    return it == w.end() || it->second.dim() != 2 ? nullptr : &it->second;
  };
  if (const torch::Tensor* first = find("vars.0")) {  // GraphGPT's GCN (clip_gcn_arxiv)
    c.gnn_type = "gcn";
    c.gnn_hid = first->size(0), c.gnn_input = first->size(1);
    if (const torch::Tensor* t = find("vars.2")) c.gnn_output = t->size(0);
    return c;
  }
  if (const torch::Tensor* t = find("W_P.weight")) c.gnn_input = t->size(1), c.att_d_model = t->size(0);
  if (const torch::Tensor* t = find("inverW_P.weight")) c.gnn_output = t->size(0);
  const std::regex layer("gtLayers\\.([0-9]+)\\.qTrans");
  int64_t layers = 0;
  for (const auto& [name, t] : w) {
    std::smatch m;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    if (std::regex_match(rest, m, layer)) layers = std::max<int64_t>(layers, std::stoll(m[1].str()) + 1);
  }
  if (layers > 0) c.gt_layers = layers;
  c.att_norm = w.count(prefix + "gtLayers.0.norm.weight") > 0 || layers == 0;
  return c;
}

// A template encoder's file (llaga, hop_field): its kind and shape are in the safetensors
// metadata graphtune writes (model/graph_encoder.hpp); the tensor alone cannot tell the feature
// width.
GraphEncoderConfig template_config_of_metadata(const std::map<std::string, std::string>& meta, const std::string& path) {
  const std::string kind = meta.at("graph_encoder_type");
  auto number = [&](const char* key) -> int64_t {
    auto it = meta.find(key);
    if (it == meta.end()) fail(path, "a " + kind + " encoder file without '" + key + "' in its metadata");
    try {
      size_t used = 0;
      const int64_t v = std::stoll(it->second, &used);
      if (used == it->second.size() && v > 0) return v;
    } catch (const std::exception&) {
    }
    fail(path, std::string("metadata '") + key + "' must be a positive whole number, got \"" + it->second + "\"");
  };
  GraphEncoderConfig c;
  if (kind == "llaga") {
    c = llaga_encoder_config(number("gnn_input"), number("llaga_hops"), number("llaga_fanout"));
  } else {
    const int64_t hops = number("hop_field_hops"), width = number("gnn_input");
    // Absent in the files written before they were choices: what those files ran with.
    auto rows = meta.find("hop_field_rows"), projector = meta.find("hop_field_projector");
    c = hop_field_encoder_config(width / (hops + 1), hops, rows == meta.end() ? "as_is" : rows->second,
                                 projector == meta.end() ? "shared" : projector->second);
    c.gnn_input = width;  // as written, so a width that is no multiple of the hops is named below
  }
  if (const std::string p = c.problem(); !p.empty()) fail(path, p);
  return c;
}

}  // namespace

GraphEncoderConfig read_graph_encoder_config(const std::string& path) {
  const json j = read_json_object(path);
  GraphEncoderConfig c;
  if (j.contains("gnn_type") && j["gnn_type"] != "gt") {
    if (j["gnn_type"] != "gcn")
      fail(path, "key 'gnn_type' is " + j["gnn_type"].dump() + ": GraphGPT's encoders are \"gt\" and \"gcn\"");
    c.gnn_type = "gcn";
    c.gnn_input = positive(j, path, "gnn_input");
    c.gnn_hid = positive(j, path, "gnn_hid");
    c.gnn_output = positive(j, path, "gnn_output");
    return c;
  }
  c.gnn_input = positive(j, path, "gnn_input");
  c.att_d_model = positive(j, path, "att_d_model");
  c.gnn_output = positive(j, path, "gnn_output");
  c.gt_layers = positive(j, path, "gt_layers");
  c.head = positive(j, path, "head");
  c.att_norm = flag(j, path, "att_norm", c.att_norm);
  c.if_pos = flag(j, path, "if_pos", c.if_pos);
  if (const std::string p = c.problem(); !p.empty()) fail(path, p);
  return c;
}

std::string write_graphgpt_graph_tower(const GraphEncoderImpl& encoder, const std::string& parent) {
  const GraphEncoderConfig& c = encoder.config();
  if (c.is_template()) fail(parent, "a " + c.gnn_type + " encoder is not one of GraphGPT's graph towers");
  const std::string name = c.is_gcn() ? "clip_gcn_arxiv" : "clip_gt_arxiv_pub";
  const std::string dir = join_path(parent, name);
  make_dirs(dir);
  // GraphGPT's CLIP(args) reads these; the tower's fields are graphtune's encoder's.
  constexpr int64_t kTextWidth = 8;
  json j = {{"gnn_type", c.gnn_type}, {"gnn_input", c.gnn_input}, {"gnn_hid", c.gnn_hid}, {"gnn_output", c.gnn_output},
            {"gt_layers", c.gt_layers}, {"att_d_model", c.att_d_model}, {"head", c.head}, {"att_norm", c.att_norm},
            {"if_pos", c.if_pos}, {"dropout", c.dropout}, {"edge_coef", 0.1}, {"lr", 1e-5},
            {"transformer_layers", 0}, {"transformer_width", kTextWidth}, {"transformer_heads", 1},
            {"vocab_size", 1}, {"context_length", 1}, {"embed_dim", c.gnn_output}};
  std::vector<std::pair<std::string, torch::Tensor>> state;
  for (const auto& [n, t] : encoder.named_weights()) state.emplace_back("gnn." + n, t.detach().to(torch::kFloat32).cpu());
  state.emplace_back("token_embedding.weight", torch::zeros({1, kTextWidth}));
  state.emplace_back("positional_embedding", torch::zeros({1, kTextWidth}));
  state.emplace_back("ln_final.weight", torch::ones({kTextWidth}));
  state.emplace_back("ln_final.bias", torch::zeros({kTextWidth}));
  state.emplace_back("text_projection", torch::zeros({kTextWidth, c.gnn_output}));
  save_torch_state_dict(join_path(dir, name + ".pkl"), state);
  write_file_atomic(join_path(dir, "config.json"), j.dump(4) + "\n");
  return dir;
}

GraphEncoder open_graph_encoder(const std::string& path, const std::string& prefix) {
  if (!is_directory(path)) {
    std::map<std::string, torch::Tensor> weights;
    std::map<std::string, std::string> meta;
    if (ends_with(path, ".safetensors")) {  // one mapping for the tensors and the metadata
      const SafetensorsFile file = SafetensorsFile::open(path);
      for (const std::string& name : file.names()) weights.emplace(name, file.get(name));
      meta = file.metadata();
    } else {
      weights = load_torch_state_dict(path);
    }
    if (auto it = meta.find("graph_encoder_type"); it != meta.end() && (it->second == "llaga" || it->second == "hop_field")) {
      const GraphEncoderConfig c = template_config_of_metadata(meta, path);
      if (meta.count("hop_field_base")) {  // its base: GraphGPT's kind its "base." tensors say
        const GraphEncoderConfig b = config_of_weights(weights, prefix + "base.");
        if (const std::string p = b.problem(); !p.empty() || b.gnn_type != meta.at("hop_field_base"))
          fail(path, "its hop field's base (\"" + meta.at("hop_field_base") + "\") is not in its base. tensors" +
                         (p.empty() ? std::string() : ": " + p));
        auto base = std::make_shared<GraphEncoderImpl>(b);
        GraphEncoder encoder(std::make_shared<GraphEncoderImpl>(c, base));
        encoder->load_weights(weights, path, prefix);
        return encoder;
      }
      GraphEncoder encoder(c);
      encoder->load_weights(weights, path, prefix);
      return encoder;
    }
    if (weights.count(prefix + "structure_embedding"))
      fail(path, "holds a llaga encoder's structure_embedding without graphtune's metadata (graph_encoder_type, gnn_input, "
                 "llaga_hops, llaga_fanout): give the .safetensors file graphtune wrote");
    if (weights.count(prefix + "hop_embedding"))
      fail(path, "holds a hop_field encoder's hop_embedding without graphtune's metadata (graph_encoder_type, gnn_input, "
                 "hop_field_hops): give the .safetensors file graphtune wrote");
    GraphEncoderConfig c = config_of_weights(weights, prefix);
    if (!c.problem().empty()) c = GraphEncoderConfig();  // load_weights names what does not fit
    GraphEncoder encoder(c);
    encoder->load_weights(weights, path, prefix);
    return encoder;
  }
  const std::string config = join_path(path, "config.json");
  if (!path_exists(config)) fail(path, "an encoder folder without config.json");
  GraphEncoder encoder(read_graph_encoder_config(config));
  // GraphGPT's CLIP file holds the encoder under "gnn." beside the text tower.
  encoder->load_file(weights_file(path), prefix.empty() ? "gnn." : prefix);
  return encoder;
}

}  // namespace gt
