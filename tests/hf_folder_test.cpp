// Hugging Face model folders: config.json in transformers 4.x and 5.x spellings, bit-exact
// single-file and sharded round trips, the all-or-nothing folder write, and one-line errors
// naming the file and the key or tensor for each kind of broken folder.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <set>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "tests/temp_dir.hpp"
#include "weights/hf_folder.hpp"
#include "weights/safetensors.hpp"

using json = nlohmann::json;

namespace {

using gt::test::TempDir;

gt::LlamaConfig small_config(bool tied = false) {
  gt::LlamaConfig c;
  c.dim = 16;
  c.hidden_dim = 40;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = 50;
  c.max_seq_len = 64;
  c.norm_eps = 1e-5;
  c.rope_theta = 500000.0;
  c.rope_scaling_factor = 4.0;
  c.tie_embeddings = tied;
  c.pad_id = 0;
  return c;
}

std::map<std::string, torch::Tensor> random_weights(const gt::LlamaConfig& c, uint64_t seed = 1) {
  torch::manual_seed(seed);
  std::map<std::string, torch::Tensor> w;
  for (const auto& spec : gt::expected_llama_tensors(c)) w[spec.name] = torch::randn(spec.shape);
  return w;
}

bool same_bytes(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  auto ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// A transformers 4.31-style config.json (as Vicuna v1.5 16k ships), for edits.
json base_config() {
  return json::parse(R"({
    "_name_or_path": "vicuna", "architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 16, "intermediate_size": 40, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 50,
    "max_position_embeddings": 64, "max_sequence_length": 256, "rms_norm_eps": 1e-05,
    "rope_scaling": {"factor": 4.0, "type": "linear"}, "rope_theta": 500000.0,
    "tie_word_embeddings": false, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
    "hidden_act": "silu", "initializer_range": 0.02, "pretraining_tp": 1,
    "torch_dtype": "float16", "transformers_version": "4.31.0", "use_cache": true})");
}

void write_config(const std::string& dir, const json& j) {
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/config.json") << j.dump(2);
}

// Expects f() to throw an InputError whose one-line message contains each of wants.
template <class F>
void expect_error(F f, std::vector<std::string> wants) {
  try {
    f();
    ADD_FAILURE() << "no error (wanted: " << wants.back() << ")";
  } catch (const gt::InputError& e) {
    std::string msg = e.what();
    for (const auto& w : wants) EXPECT_NE(msg.find(w), std::string::npos) << "want '" << w << "' in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

void expect_config_error(const json& j, const std::string& want) {
  TempDir dir;
  write_config(dir.path, j);
  expect_error([&] { gt::read_hf_config(dir.path); }, {dir.file("config.json"), want});
}

}  // namespace

TEST(HfConfig, ExpectedTensorsFollowTheConfig) {
  auto specs = gt::expected_llama_tensors(small_config());
  ASSERT_EQ(specs.size(), 1u + 2 * 9 + 1 + 1);
  EXPECT_EQ(specs.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(specs[2].name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(specs[2].shape, (std::vector<int64_t>{8, 16}));  // 2 kv heads of 4
  EXPECT_EQ(specs.back().name, "lm_head.weight");
  EXPECT_EQ(gt::expected_llama_tensors(small_config(true)).size(), specs.size() - 1);
}

TEST(HfConfig, ReadsTransformers4Spelling) {
  TempDir dir;
  write_config(dir.path, base_config());
  gt::LlamaConfig c = gt::read_hf_config(dir.path);
  EXPECT_EQ(c.dim, 16);
  EXPECT_EQ(c.hidden_dim, 40);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.vocab_size, 50);
  EXPECT_EQ(c.max_seq_len, 64);
  EXPECT_DOUBLE_EQ(c.norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling_factor, 4.0);
  EXPECT_FALSE(c.tie_embeddings);
}

TEST(HfConfig, ReadsTransformers5Spelling) {
  // What transformers 5.24 save_pretrained writes.
  json j = base_config();
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j.erase("torch_dtype");
  j["dtype"] = "float32";
  j["head_dim"] = 4;
  j["pad_token_id"] = nullptr;
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["mlp_bias"] = false;
  j["rope_parameters"] = {{"factor", 4.0}, {"rope_theta", 10000.0}, {"rope_type", "linear"}, {"type", "linear"}};
  TempDir dir;
  write_config(dir.path, j);
  gt::LlamaConfig c = gt::read_hf_config(dir.path);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling_factor, 4.0);

  j["rope_parameters"] = {{"rope_theta", 10000.0}, {"rope_type", "default"}};
  write_config(dir.path, j);
  EXPECT_DOUBLE_EQ(gt::read_hf_config(dir.path).rope_scaling_factor, 1.0);
}

TEST(HfConfig, DefaultsLikeTransformers) {
  json j = base_config();
  for (const char* k : {"num_key_value_heads", "rope_scaling", "rope_theta", "tie_word_embeddings"}) j.erase(k);
  TempDir dir;
  write_config(dir.path, j);
  gt::LlamaConfig c = gt::read_hf_config(dir.path);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling_factor, 1.0);
  EXPECT_FALSE(c.tie_embeddings);
}

TEST(HfConfigErrors, MissingFolderOrConfig) {
  TempDir dir;
  expect_error([&] { gt::read_hf_config(dir.file("nope")); }, {dir.file("nope"), "not a model folder"});
  expect_error([&] { gt::read_hf_config(dir.path); }, {dir.file("config.json"), "cannot open"});
  std::ofstream(dir.file("config.json")) << "{\"hidden_size\": 16,";
  expect_error([&] { gt::read_hf_config(dir.path); }, {dir.file("config.json"), "not valid JSON"});
}

TEST(HfConfigErrors, KeysThatMatterButCannotBeHonoured) {
  json j = base_config();
  j["quantization_config"] = {{"load_in_4bit", true}};
  expect_config_error(j, "key 'quantization_config': quantized checkpoints are not supported");
  j = base_config();
  j["some_new_flag"] = 3;
  expect_config_error(j, "key 'some_new_flag': not supported");
  j = base_config();
  j["mlp_bias"] = true;
  expect_config_error(j, "key 'mlp_bias': graphtune has no MLP biases");
  j = base_config();
  j["hidden_act"] = "gelu";
  expect_config_error(j, "key 'hidden_act': must be \"silu\"");
  j = base_config();
  j["head_dim"] = 8;
  expect_config_error(j, "key 'head_dim': head_dim * num_attention_heads must equal hidden_size");
  j = base_config();
  j["pretraining_tp"] = 2;
  expect_config_error(j, "key 'pretraining_tp'");
  j = base_config();
  j["model_type"] = "gemma";
  expect_config_error(j, "key 'model_type': must be \"llama\", \"qwen2\", \"mistral\"");
  j["model_type"] = "mistral";
  expect_config_error(j, "key 'architectures': must be [\"MistralForCausalLM\"]");
  j = base_config();
  j["model_type"] = "qwen2";
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["use_sliding_window"] = true;
  expect_config_error(j, "not supported yet: key 'use_sliding_window' true");
  j = base_config();
  j["architectures"] = {"LlamaForSequenceClassification"};
  expect_config_error(j, "key 'architectures'");
  j = base_config();
  j.erase("hidden_size");
  expect_config_error(j, "key 'hidden_size' is missing");
  j = base_config();
  j["num_key_value_heads"] = 3;
  expect_config_error(j, "n_kv_heads (3) does not divide n_heads (4)");
  j = base_config();
  j["bos_token_id"] = {1, 3};
  expect_config_error(j, "key 'bos_token_id': lists several ids");
}

TEST(HfConfigErrors, RopeScalingTypes) {
  json j = base_config();
  j["rope_scaling"] = {{"type", "dynamic"}, {"factor", 2.0}};
  expect_config_error(j, "not supported yet: rope_scaling type 'dynamic'");
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  expect_config_error(j, "key 'rope_scaling': llama3 scaling needs a numeric 'low_freq_factor'");
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 4.0}, {"high_freq_factor", 1.0},
                       {"original_max_position_embeddings", 8192}};
  expect_config_error(j, "llama3 scaling needs factor >= 1, high_freq_factor > low_freq_factor > 0");
  j["rope_scaling"] = {{"type", "linear"}};
  expect_config_error(j, "key 'rope_scaling': linear scaling needs a numeric 'factor'");
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}, {"original_max_position_embeddings", 8}};
  expect_config_error(j, "key 'rope_scaling.original_max_position_embeddings': not supported yet");
  j = base_config();
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
  expect_config_error(j, "not supported yet: rope_parameters type 'yarn'");
}

TEST(HfFolder, RoundTripIsBitExact) {
  TempDir tmp;
  const std::string dir = tmp.file("model");
  auto cfg = small_config();
  auto w = random_weights(cfg);
  gt::save_hf_folder(dir, cfg, w);
  EXPECT_EQ(gt::list_dir(dir), (std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors"}));
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"model"});  // no temporary left behind

  gt::LlamaConfig c = gt::read_hf_config(dir);
  EXPECT_EQ(c.dim, cfg.dim);
  EXPECT_EQ(c.n_kv_heads, cfg.n_kv_heads);
  EXPECT_EQ(c.hidden_dim, cfg.hidden_dim);
  EXPECT_DOUBLE_EQ(c.rope_theta, cfg.rope_theta);
  EXPECT_DOUBLE_EQ(c.rope_scaling_factor, cfg.rope_scaling_factor);
  EXPECT_DOUBLE_EQ(c.norm_eps, cfg.norm_eps);
  auto back = gt::read_hf_weights(dir);
  ASSERT_EQ(back.size(), w.size());
  for (const auto& [name, t] : w) EXPECT_TRUE(same_bytes(back.at(name), t)) << name;
  EXPECT_EQ(gt::SafetensorsFile::open(dir + "/model.safetensors").metadata().at("format"), "pt");
  json j = json::parse(gt::read_file(dir + "/config.json"));
  EXPECT_EQ(j["torch_dtype"], "float32");
  EXPECT_EQ(j["rope_scaling"]["type"], "linear");
}

TEST(HfFolder, Bf16AndTiedEmbeddings) {
  TempDir tmp;
  const std::string dir = tmp.file("m");
  auto cfg = small_config(true);
  auto w = random_weights(cfg);
  gt::save_hf_folder(dir, cfg, w, "bf16");
  auto back = gt::read_hf_weights(dir);
  EXPECT_EQ(back.count("lm_head.weight"), 0u);
  for (const auto& [name, t] : w) EXPECT_TRUE(same_bytes(back.at(name), t.to(torch::kBFloat16))) << name;
  EXPECT_EQ(json::parse(gt::read_file(dir + "/config.json"))["torch_dtype"], "bfloat16");
  EXPECT_TRUE(gt::read_hf_config(dir).tie_embeddings);
}

TEST(HfFolder, ShardedRoundTrip) {
  TempDir tmp;
  const std::string dir = tmp.file("sharded");
  auto cfg = small_config();
  auto w = random_weights(cfg);
  // Embedding and head are 50*16*4 = 3200 bytes; a layer is about 7.4 KB.
  gt::save_hf_folder(dir, cfg, w, "fp32", 4000);
  auto files = gt::list_dir(dir);
  json index = json::parse(gt::read_file(dir + "/model.safetensors.index.json"));
  int64_t total = 0;
  for (const auto& [name, t] : w) total += t.nbytes();
  EXPECT_EQ(index["metadata"]["total_size"], total);
  std::set<std::string> shards;
  for (const auto& [name, file] : index["weight_map"].items()) shards.insert(file.get<std::string>());
  EXPECT_GT(shards.size(), 3u);
  const std::string n = std::to_string(shards.size());
  EXPECT_TRUE(shards.count("model-00001-of-" + std::string(5 - n.size(), '0') + n + ".safetensors"));
  for (const auto& s : shards) EXPECT_TRUE(gt::path_exists(dir + "/" + s)) << s;
  EXPECT_FALSE(gt::path_exists(dir + "/model.safetensors"));
  auto back = gt::read_hf_weights(dir);
  ASSERT_EQ(back.size(), w.size());
  for (const auto& [name, t] : w) EXPECT_TRUE(same_bytes(back.at(name), t)) << name;
}

TEST(HfFolder, ExistingTargetIsRefusedUnlessOverwrite) {
  TempDir tmp;
  const std::string dir = tmp.file("m");
  auto cfg = small_config();
  gt::save_hf_folder(dir, cfg, random_weights(cfg, 1));
  expect_error([&] { gt::save_hf_folder(dir, cfg, random_weights(cfg, 2)); }, {dir, "already exists (pass --overwrite"});
  gt::save_hf_folder(dir + "/", cfg, random_weights(cfg, 2), "fp32", 0, true);
  EXPECT_TRUE(same_bytes(gt::read_hf_weights(dir).at("model.norm.weight"), random_weights(cfg, 2).at("model.norm.weight")));
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"m"});

  // Overwriting a folder onto itself: the source tensors view files that get replaced.
  gt::save_hf_folder(dir, cfg, gt::read_hf_weights(dir), "fp32", 3000, true);
  EXPECT_TRUE(same_bytes(gt::read_hf_weights(dir).at("model.norm.weight"), random_weights(cfg, 2).at("model.norm.weight")));

  // --overwrite never deletes a folder that is not a model folder.
  const std::string other = tmp.file("documents");
  ::mkdir(other.c_str(), 0755);
  std::ofstream(other + "/notes.txt") << "keep me";
  expect_error([&] { gt::save_hf_folder(other, cfg, random_weights(cfg), "fp32", 0, true); },
               {other, "not a model folder"});
  EXPECT_TRUE(gt::path_exists(other + "/notes.txt"));
}

TEST(HfFolder, WriterValidatesBeforeWriting) {
  TempDir tmp;
  const std::string dir = tmp.file("m");
  auto cfg = small_config();
  auto w = random_weights(cfg);
  w.erase("model.layers.1.mlp.up_proj.weight");
  expect_error([&] { gt::save_hf_folder(dir, cfg, w); }, {"missing tensor 'model.layers.1.mlp.up_proj.weight' [40, 16]"});
  w = random_weights(cfg);
  expect_error([&] { gt::save_hf_folder(dir, cfg, w, "int8"); }, {dir, "dtype 'int8' is not one of fp32, bf16, fp16"});
  expect_error([&] { gt::save_hf_folder(tmp.file("no/such/m"), cfg, w); }, {"parent folder does not exist"});
  auto tied = small_config(true);
  auto tw = random_weights(tied);
  tw["lm_head.weight"] = torch::randn({50, 16});
  expect_error([&] { gt::save_hf_folder(dir, tied, tw); }, {"'lm_head.weight' differs from 'model.embed_tokens.weight'"});
  tw["lm_head.weight"] = tw["model.embed_tokens.weight"].clone();
  gt::save_hf_folder(dir, tied, tw);  // an identical head is the tied one
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"m"});
}

namespace {

// A saved folder whose model.safetensors is then replaced by `tensors`.
std::string folder_with(const TempDir& tmp, std::map<std::string, torch::Tensor> tensors) {
  const std::string dir = tmp.file("m");
  auto cfg = small_config();
  gt::save_hf_folder(dir, cfg, random_weights(cfg));
  std::vector<std::pair<std::string, torch::Tensor>> v(tensors.begin(), tensors.end());
  gt::save_safetensors(dir + "/model.safetensors", v, {{"format", "pt"}});
  return dir;
}

}  // namespace

TEST(HfFolderErrors, TensorsAgainstTheConfig) {
  auto cfg = small_config();
  {
    TempDir tmp;
    auto w = random_weights(cfg);
    w.erase("lm_head.weight");
    std::string dir = folder_with(tmp, w);
    expect_error([&] { gt::read_hf_weights(dir); }, {dir, "missing tensor 'lm_head.weight' [50, 16]"});
  }
  {
    TempDir tmp;
    auto w = random_weights(cfg);
    w["model.layers.0.self_attn.k_proj.weight"] = torch::randn({16, 16});
    std::string dir = folder_with(tmp, w);
    expect_error([&] { gt::read_hf_weights(dir); },
                 {dir + "/model.safetensors",
                  "tensor 'model.layers.0.self_attn.k_proj.weight' has shape [16, 16] but the config implies [8, 16]"});
  }
  {
    TempDir tmp;
    auto w = random_weights(cfg);
    w["model.layers.2.mlp.up_proj.weight"] = torch::randn({40, 16});
    std::string dir = folder_with(tmp, w);
    expect_error([&] { gt::read_hf_weights(dir); },
                 {dir + "/model.safetensors", "unexpected tensor 'model.layers.2.mlp.up_proj.weight'"});
  }
  {
    TempDir tmp;
    auto w = random_weights(cfg);
    w["model.norm.weight"] = torch::ones({16}, torch::kInt64);
    std::string dir = folder_with(tmp, w);
    expect_error([&] { gt::read_hf_weights(dir); },
                 {dir + "/model.safetensors", "tensor 'model.norm.weight' has dtype I64; weights must be floating point"});
  }
  {
    TempDir tmp;
    auto w = random_weights(cfg);
    w["model.rotary_emb.inv_freq"] = torch::ones({2});
    w["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch::ones({2});
    std::string dir = folder_with(tmp, w);
    auto back = gt::read_hf_weights(dir);  // old checkpoints' rotary buffers are ignored
    EXPECT_EQ(back.size(), w.size() - 2);
  }
}

TEST(HfFolderErrors, BrokenShardsAndMissingWeights) {
  auto cfg = small_config();
  {
    TempDir tmp;
    const std::string dir = tmp.file("m");
    gt::save_hf_folder(dir, cfg, random_weights(cfg), "fp32", 4000);
    json index = json::parse(gt::read_file(dir + "/model.safetensors.index.json"));
    const std::string shard = index["weight_map"]["model.layers.0.mlp.up_proj.weight"];
    ::remove((dir + "/" + shard).c_str());
    expect_error([&] { gt::read_hf_weights(dir); },
                 {dir + "/model.safetensors.index.json", "weight_map names shard '" + shard + "', which is missing"});
  }
  {
    TempDir tmp;
    const std::string dir = tmp.file("m");
    gt::save_hf_folder(dir, cfg, random_weights(cfg), "fp32", 4000);
    json index = json::parse(gt::read_file(dir + "/model.safetensors.index.json"));
    const std::string first = index["weight_map"]["model.embed_tokens.weight"];
    index["weight_map"]["model.norm.weight"] = first;
    std::ofstream(dir + "/model.safetensors.index.json") << index.dump();
    expect_error([&] { gt::read_hf_weights(dir); },
                 {dir + "/" + first,
                  "tensor 'model.norm.weight' is listed in model.safetensors.index.json but absent from this shard"});
  }
  {
    TempDir tmp;
    const std::string dir = tmp.file("m");
    gt::save_hf_folder(dir, cfg, random_weights(cfg));
    ::remove((dir + "/model.safetensors").c_str());
    expect_error([&] { gt::read_hf_weights(dir); }, {dir, "no model.safetensors, model.safetensors.index.json, pytorch_model.bin or pytorch_model.bin.index.json"});
    std::ofstream(dir + "/model.safetensors") << "garbage that is not safetensors";
    expect_error([&] { gt::read_hf_weights(dir); }, {dir + "/model.safetensors", "exceeds the file size"});
  }
}

// Vicuna's config.json as GraphGPT's FAQ has users leave it: GraphLlama's keys are read past and
// listed (the trainers name them in one line). GraphGPT's own tuned model reads as a GraphLlama.
TEST(HfConfig, ReadsPastGraphGptsKeys) {
  json j = base_config();
  j["graph_hidden_size"] = 128;
  j["pretrain_graph_model_path"] = "/home/user/Arxiv-PubMed-GraphCLIP-GT/";
  j["graph_tower"] = "clip_gt_arxiv_pub";
  j["use_graph_start_end"] = true;
  TempDir dir;
  write_config(dir.path, j);
  const gt::LlamaConfig c = gt::read_hf_config(dir.path);
  EXPECT_EQ(c.graphgpt_keys, (std::vector<std::string>{"graph_hidden_size", "graph_tower", "pretrain_graph_model_path",
                                                       "use_graph_start_end"}));
  EXPECT_EQ(c.dim, base_config()["hidden_size"].get<int64_t>());
  TempDir plain;
  write_config(plain.path, base_config());
  EXPECT_TRUE(gt::read_hf_config(plain.path).graphgpt_keys.empty());

  EXPECT_FALSE(c.graphllama);

  // GraphGPT's own tuned model is a LLaMA whose files also hold its projector.
  json graphllama = j;
  graphllama["model_type"] = "GraphLlama";
  graphllama["architectures"] = {"GraphLlamaForCausalLM"};
  TempDir gl;
  write_config(gl.path, graphllama);
  EXPECT_TRUE(gt::read_hf_config(gl.path).graphllama);
  graphllama["architectures"] = {"LlamaForCausalLM"};
  expect_config_error(graphllama, "key 'architectures': must be [\"GraphLlamaForCausalLM\"]");
  graphllama["model_type"] = "gemma";
  expect_config_error(graphllama, "or GraphGPT's \"GraphLlama\"");
  EXPECT_TRUE(gt::is_graphllama_tensor("model.graph_projector.weight"));
  EXPECT_TRUE(gt::is_graphllama_tensor("model.graph_tower.gtLayers.0.qTrans"));
  EXPECT_FALSE(gt::is_graphllama_tensor("model.embed_tokens.weight"));
}
