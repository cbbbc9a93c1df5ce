#include "train/graphgpt_setup.hpp"

#include <torch/torch.h>

#include <map>
#include <optional>
#include <string>

#include "checkpoint/checkpoint_dir.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "data/cora_ml.hpp"
#include "loader/feature_table_io.hpp"
#include "loader/hop_field.hpp"
#include "loader/job_records.hpp"
#include "model/graph_encoder.hpp"
#include "model/graph_encoder_folder.hpp"
#include "model/graph_projector.hpp"
#include "model/peft_adapter.hpp"
#include "model/special_tokens.hpp"
#include "train/mixed_precision.hpp"
#include "train/train_checkpoint.hpp"
#include "weights/checkpoint_shards.hpp"
#include "weights/load_model.hpp"
#include "weights/safetensors.hpp"

namespace gt {

namespace {

const char* const kTokenRowsFile = "graph_tokens.safetensors";
// How a graph phase's checkpoint names the trainable tensors (train/train_checkpoint.hpp).
const std::string kProjectorWeightKey = weight_key(kGraphProjectorWeight);
const std::string kProjectorBiasKey = weight_key(kGraphProjectorBias);
const std::string kTokenRowsKey = weight_key(kGraphTokenRowsName);

// [model].projector names a stage-1 checkpoint rather than a graph_projector.bin: a checkpoint
// folder (index.json) or a run's folder of step_* checkpoints (its newest committed one). Any
// folder is taken as meant to be one, so a wrong one gets a checkpoint's error, not a pickle's.
bool names_checkpoint(const std::string& projector) { return is_directory(projector); }

// The index's shapes checked against this model before any tensor is read; InputError naming
// the checkpoint's index.
void check_projector_checkpoint(const ckpt::Index& index, const std::string& folder, int64_t graph_hidden,
                                int64_t dim) {
  const std::string where = folder + "/index.json";
  if (!is_graph_phase(index.stage))
    fail(where, "a checkpoint of stage " + std::string(name_of(index.stage)) + ", which has no graph projector ([model].projector wants "
                "a graph_matching or task checkpoint)");
  const std::pair<std::string, std::vector<int64_t>> want[] = {
      {kProjectorWeightKey, {dim, graph_hidden}}, {kProjectorBiasKey, {dim}}, {kTokenRowsKey, {2, dim}}};
  for (const auto& [key, shape] : want) {
    auto it = index.tensors.find(key);
    if (it == index.tensors.end()) {
      if (key == kTokenRowsKey) continue;  // rows not trained (trainable = projector): the LLM's own
      fail(where, std::string("has no tensor \"") + key + "\"");
    }
    if (it->second.shape != shape)
      fail(where, std::string("tensor \"") + key + "\" has shape " + ckpt::shape_text(it->second.shape) +
                      ", this model's is " + ckpt::shape_text(shape) + " (graph encoder width " + std::to_string(graph_hidden) +
                      ", LLM width " + std::to_string(dim) + ")");
  }
}

// The projector and <g_start>/<g_end> rows of a checkpoint, whole, whatever layout saved them
// (tensor-parallel slices are put together by the reader, which also checks each shard's crc32).
void load_projector_checkpoint(GraphGpt& model, const std::string& folder) {
  ckpt::CheckpointReader reader(folder);
  torch::NoGradGuard ng;
  model->projector->load_weights({{kGraphProjectorWeight, reader.read(kProjectorWeightKey)},
                                  {kGraphProjectorBias, reader.read(kProjectorBiasKey)}},
                                 folder);
  if (reader.contains(kTokenRowsKey)) {
    const torch::Tensor rows = reader.read(kTokenRowsKey);
    model->load_token_rows({{"g_start", rows[0]}, {"g_end", rows[1]}}, folder);
  }
}

// A template encoder reads graphs of one size (llaga: its tree; hop_field: the centre once a hop);
// a record of any other shape is refused here, naming it, rather than at the batch that holds it.
void check_records_fit_template(const std::vector<InstructionRecord>& records, const GraphEncoderConfig& c,
                                const std::string& file) {
  const int64_t nodes = c.template_nodes();
  const std::string reads = c.template_reads();
  for (const InstructionRecord& r : records)
    for (const GraphRef& g : r.graphs) {
      if (static_cast<int64_t>(g.node_list.size()) != nodes)
        fail(file, "record id \"" + r.id + "\": graph.node_list has " + std::to_string(g.node_list.size()) + " nodes; " +
                       reads + ": " + c.template_records_hint());
      if (!c.is_hop_field()) continue;
      for (int64_t v : g.node_list)
        if (v != g.node_list[0])
          fail(file, "record id \"" + r.id + "\": graph.node_list holds node " + std::to_string(v) + " beside its centre " +
                         std::to_string(g.node_list[0]) + "; " + reads + ": " + c.template_records_hint());
    }
}

std::string sibling(const std::string& file, const std::string& name) {
  auto slash = file.rfind('/');
  return (slash == std::string::npos ? std::string(".") : file.substr(0, slash)) + "/" + name;
}

}  // namespace

GraphGptSetup build_graphgpt(const JobConfig& cfg, const torch::Device& device, const StageChoice& choose_stage,
                             std::vector<InstructionRecord>* records) {
  GraphGptSetup s;
  // Cheap checks first: the LLM's config and its tokenizer.
  LlamaConfig mc = read_model_config(cfg.model.path);
  if (cfg.data.max_len > mc.max_seq_len)
    fail(cfg.where("data", "max_len"), std::to_string(cfg.data.max_len) + " exceeds the context of " + cfg.model.path + " (" +
                                         std::to_string(mc.max_seq_len) + " positions)");
  s.tokenizer = load_tokenizer(resolve_tokenizer_path(cfg.model.tokenizer, cfg.model.path, cfg.where("model", "tokenizer")));
  check_tokenizer_vocab(*s.tokenizer, static_cast<int32_t>(mc.vocab_size));
  if (!cfg.model.projector.empty() && !path_exists(cfg.model.projector)) fail(cfg.model.projector, "cannot open (missing or unreadable)");
  const std::string projector_checkpoint =
      names_checkpoint(cfg.model.projector)
          ? ckpt::find_checkpoint(cfg.model.projector, "; [model].projector is a graph_projector.bin or a graph stage's checkpoint")
          : std::string();
  if (!cfg.model.graph_encoder.empty() && !path_exists(cfg.model.graph_encoder))
    fail(cfg.model.graph_encoder, "cannot open (missing or unreadable)");

  // A hop_field encoder's table is computed from the graph's citations once its hops are known.
  std::optional<TextGraph> graph;
  if (cfg.data.features.empty()) graph = load_graph(cfg.data.graph);
  s.features = graph ? feature_table_from_graph(*graph) : load_feature_table(cfg.data.features);
  if (records) check_records_against_features(*records, s.features, cfg.data);

  GraphEncoder encoder{nullptr};
  if (cfg.model.graph_encoder.empty()) {
    GraphEncoderConfig fresh;  // GraphGPT's shape, taking the features as they are (checked below)
    fresh.gnn_type = cfg.model.graph_encoder_type;
    if (!s.features.x.empty()) fresh.gnn_input = s.features.x.begin()->second.size(1);
    if (fresh.is_llaga()) fresh = llaga_encoder_config(fresh.gnn_input, cfg.model.llaga_hops, cfg.model.llaga_fanout);
    if (fresh.is_hop_field() && !cfg.model.hop_field_base.empty()) {
      const std::string where = cfg.where("model", "hop_field_base");
      if (!path_exists(cfg.model.hop_field_base)) fail(where, cfg.model.hop_field_base + ": cannot open (missing or unreadable)");
      GraphEncoder base = open_graph_encoder(cfg.model.hop_field_base, "");
      const GraphEncoderConfig& b = base->config();
      if (b.is_template()) fail(where, "a hop field's base is one of GraphGPT's encoders (gt or gcn), not " + b.gnn_type);
      if (b.gnn_input != fresh.gnn_input)
        fail(where, cfg.model.hop_field_base + " reads " + std::to_string(b.gnn_input) + "-wide node features, the graph's are " +
                        std::to_string(fresh.gnn_input) + " wide");
      encoder = GraphEncoder(std::make_shared<GraphEncoderImpl>(
          hop_field_encoder_config(b.gnn_input + b.gnn_output, cfg.model.hop_field_hops, cfg.model.hop_field_rows,
                                   cfg.model.hop_field_projector),
          base.ptr()));
    } else {
      if (fresh.is_hop_field())
        fresh = hop_field_encoder_config(fresh.gnn_input, cfg.model.hop_field_hops, cfg.model.hop_field_rows,
                                         cfg.model.hop_field_projector);
      encoder = GraphEncoder(fresh);
    }
    encoder->init_weights(static_cast<uint64_t>(cfg.training.seed));
  } else {
    encoder = open_graph_encoder(cfg.model.graph_encoder, cfg.model.graph_encoder_prefix);
  }
  const GraphEncoderConfig& ec = encoder->config();
  if (ec.is_template()) {
    if (cfg.training.trains_encoder())
      fail(cfg.where("training", "trainable"), "the " + ec.gnn_type + " encoder has no weights to train (its tokens are the "
                                                "node features and a fixed tensor): use graphgpt or projector+lora");
    if (records) check_records_fit_template(*records, ec, cfg.data.instructions);
  }
  if (ec.is_hop_field()) {
    if (!graph)
      fail(cfg.where("data", "features"), "not supported yet: the hop_field encoder propagates the features over the graph's "
                                          "citations, and a features file has none; give the graph as [data].graph instead");
    s.features = hop_field_table(*graph, ec.field_hops, ec.field_rows, encoder->field_base().get());
  }
  for (const auto& [name, x] : s.features.x)
    if (x.size(1) != ec.gnn_input)
      fail(cfg.data.features.empty() ? cfg.data.graph : cfg.data.features,
           "dataset '" + name + "' has " +
               (ec.is_hop_field() ? std::to_string(x.size(1) / (ec.field_hops + 1)) + "-wide node features (" +
                                        std::to_string(x.size(1)) + " over " + std::to_string(ec.field_hops + 1) + " hops)"
                                  : std::to_string(x.size(1)) + "-wide node features") +
               ", the graph encoder takes " + std::to_string(ec.gnn_input));

  // Every file is read or checked before the stage is chosen (which may form the ranks'
  // groups): a bad one is every rank's error, said once.
  GraphProjector projector(encoder->config().gnn_output, mc.dim);
  torch::Tensor file_token_rows;  // the <g_start>/<g_end> rows a graph_projector.bin may carry
  if (!projector_checkpoint.empty()) {
    check_projector_checkpoint(ckpt::read_index(projector_checkpoint), projector_checkpoint,
                               encoder->config().gnn_output, mc.dim);
  } else if (cfg.model.projector.empty()) {
    projector->init_weights(static_cast<uint64_t>(cfg.training.seed) + 1);
  } else {
    GraphProjectorFile file = read_graph_projector_bin(cfg.model.projector);
    projector = file.projector;
    file_token_rows = file.token_rows;
  }
  // The rows: graphtune's graph_tokens.safetensors beside the projector (fp32, exact), else the
  // projector file's own (GraphGPT's embedding rows).
  std::string rows_file = cfg.model.projector.empty() || !projector_checkpoint.empty()
                              ? std::string() : sibling(cfg.model.projector, kTokenRowsFile);
  std::optional<std::map<std::string, torch::Tensor>> token_rows;
  if (!rows_file.empty() && path_exists(rows_file)) {
    token_rows = load_safetensors(rows_file);
  } else if (file_token_rows.defined()) {
    token_rows = std::map<std::string, torch::Tensor>{{"g_start", file_token_rows[0]}, {"g_end", file_token_rows[1]}};
    rows_file = cfg.model.projector;
  }

  // A LoRA adapter for the LLM, checked against the model's shape before any weight is read.
  std::optional<PeftAdapter> adapter;
  if (!cfg.model.adapter.empty()) {
    adapter = read_peft_adapter(cfg.model.adapter);
    const auto shapes = LoraAdapters::shapes(adapter->settings, mc);
    for (const auto& [name, t] : adapter->weights) {
      auto it = shapes.find(name);
      if (it == shapes.end() || t.sizes().vec() != it->second)
        fail(cfg.model.adapter + "/adapter_model.safetensors",
             "tensor '" + name + "' is not an adapter of " + cfg.model.path + " with these settings (rank " +
                 std::to_string(adapter->settings.rank) + ")");
    }
    if (adapter->weights.size() != shapes.size())
      fail(cfg.model.adapter + "/adapter_model.safetensors",
           "holds " + std::to_string(adapter->weights.size()) + " tensors, the adapter's settings give " +
               std::to_string(shapes.size()) + " for " + cfg.model.path);
  }

  // The LLM: a Hugging Face folder's weights are views of its mapped files, read only when
  // copied, and checked against its config here. The tokens are added first (they set the
  // vocabulary the stages are cut by), then this rank's stage is chosen and only its weights
  // are read, each straight into its storage dtype: never the whole model in fp32.
  LoadedModel loaded = load_model(cfg.model.path);
  std::map<std::string, torch::Tensor> weights = std::move(loaded.weights);
  loaded.weights.clear();
  s.projector_from = cfg.model.projector;
  // GraphGPT's released model carries its tuned projector; a [model].projector still wins, so
  // that one can be tried on it.
  if (cfg.model.projector.empty() && loaded.graph_weights.count("model.graph_projector.weight")) {
    std::map<std::string, torch::Tensor> own;
    for (const auto& [name, t] : loaded.graph_weights)
      if (name.rfind("model.graph_projector.", 0) == 0) own[name] = t;
    projector->load_weights(own, cfg.model.path + " (GraphLlama's model.graph_projector.*)");
    s.projector_from = cfg.model.path;
  }
  loaded.graph_weights.clear();
  const auto ids = add_special_tokens(loaded, *s.tokenizer, graph_special_tokens());
  // The graph encoder and the projector weigh on stage 0, which runs them.
  StageWeights w = LlamaImpl::stage_weights(loaded.config);
  for (auto& p : encoder->parameters()) w.first_extra += p.numel();
  for (auto& p : projector->parameters()) w.first_extra += p.numel();
  LlamaStage stage = choose_stage ? choose_stage(w) : LlamaStage{};
  stage.initialise = false;
  stage.device = device;
  // bf16 training stores the frozen LLM in bf16 (half the memory); the trainable projector
  // and token rows keep fp32 master weights.
  if (cfg.model.bf16()) stage.dtype = torch::kBFloat16;
  Llama llm(loaded.config, stage);
  for (auto it = weights.begin(); it != weights.end();) it = llm->holds(it->first) ? std::next(it) : weights.erase(it);
  grow_vocab_rows(weights, loaded.config.vocab_size);
  // The graph token rows start as the file's values, not as the table's bf16 rounding of them.
  torch::Tensor file_rows;
  if (auto e = weights.find("model.embed_tokens.weight"); e != weights.end())
    file_rows = torch::stack({e->second[ids[1]], e->second[ids[2]]}).to(torch::kFloat32);
  llm->load_weights(std::move(weights), cfg.model.path);  // each tensor's pages go back once copied
  if (adapter) {
    auto lora = std::make_shared<LoraAdapters>(adapter->settings, loaded.config, stage.first,
                                               stage.last < 0 ? loaded.config.n_layers : stage.last, device, 0);
    lora->load(adapter->weights, cfg.model.adapter);
    llm->set_lora(lora);
  }

  s.model = GraphGpt(llm, encoder, projector, GraphTokenIds{ids[0], ids[1], ids[2]});
  s.model->to(device);  // the encoder, the projector and the token rows: the LLM is there already
  if (file_rows.defined()) {
    torch::NoGradGuard ng;
    s.model->graph_token_rows().copy_(file_rows);
  }
  if (!projector_checkpoint.empty()) load_projector_checkpoint(s.model, projector_checkpoint);
  if (token_rows) s.model->load_token_rows(*token_rows, rows_file);
  s.model->freeze_for_graph_tuning();
  if (cfg.training.trains_encoder()) s.model->train_encoder();  // fp32 master weights, like the projector
  // The encoder too when frozen, in bf16 for bf16 training (the LLM already is).
  if (cfg.model.bf16()) store_frozen_in_bf16(*s.model);
  return s;
}

std::string graphgpt_keys_note(const LlamaConfig& llm, const std::string& model_path) {
  std::string keys;
  for (const auto& k : llm.graphgpt_keys) keys += (keys.empty() ? "" : ", ") + k;
  if (llm.graphllama)
    return model_path + "/config.json: a GraphLlama (GraphGPT's tuned model): its projector and <g_start>/<g_end> rows "
           "come from its weights unless [model].projector names others; the graph encoder comes from "
           "[model].graph_encoder, as GraphGPT's evaluation loads it" +
           (keys.empty() ? std::string() : "; its keys " + keys + " are not used");
  if (keys.empty()) return "";
  return model_path + "/config.json: GraphGPT's keys " + keys + " are not used: graphtune takes the graph encoder from "
         "[model].graph_encoder and the projector from [model].projector";
}

void save_graph_phase_outputs(GraphGpt& model, const std::string& dir) {
  make_dirs(dir);
  const auto rows = model->token_rows();
  save_graph_projector_bin(dir + "/graph_projector.bin", model->projector, torch::stack({rows[0].second, rows[1].second}));
  save_graph_projector_safetensors(dir + "/graph_projector.safetensors", model->projector);
  save_safetensors(dir + "/" + kTokenRowsFile, model->token_rows());
  // fp32 whatever the run's precision, as the other files: a bf16 run stored the frozen encoder
  // in bf16, and writes the values it ran with, widened exactly.
  std::vector<std::pair<std::string, torch::Tensor>> encoder;
  for (auto& [name, p] : model->encoder->named_weights()) encoder.emplace_back(name, p.detach().to(torch::kFloat32));
  save_safetensors(dir + "/graph_encoder.safetensors", encoder, model->encoder->file_metadata());
  // An encoder the stage trained, also as GraphGPT's code loads a graph tower.
  if (model->encoder_trained()) write_graphgpt_graph_tower(*model->encoder, dir + "/graph_tower");
}

}  // namespace gt
