#include "train/grounding_phase.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "comm/world.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "data/cora_ml.hpp"
#include "data/instructions.hpp"
#include "data/metrics.hpp"
#include "model/graph_encoder.hpp"
#include "model/graph_encoder_folder.hpp"
#include "parallel/parallel_runtime.hpp"
#include "train/grounding.hpp"
#include "train/rank_report.hpp"

namespace gt {
namespace {

// The centre nodes of node-classification records of `graph`, whose labels the grounding
// learns, each with its record's subgraph (the graph stages encode it in that). Each record must
// be one: of this graph (its id's dataset), answered with its centre node's class name; anything
// else is named in one line.
void labelled_nodes(const std::string& path, const TextGraph& graph, GroundingOptions& opts) {
  std::vector<int32_t>& out = opts.labelled;
  for (const InstructionRecord& r : read_instructions(path)) {
    const std::string where = path + ": record " + r.id;
    if (r.dataset != graph.name)
      fail(where, "is of dataset '" + r.dataset + "', the graph is '" + graph.name + "'");
    if (r.graphs.size() != 1) fail(where, "is not a node-classification record (it has " + std::to_string(r.graphs.size()) + " graphs)");
    check_node_ids(r, graph.num_nodes(), where);
    const auto v = static_cast<int32_t>(r.graphs[0].node_idx);
    const std::string& cls = graph.class_names[graph.nodes[v].label];
    if (normalise_answer(r.conversations.back().value) != normalise_answer(cls))
      fail(where, "is not a node-classification record: its answer is not node " + std::to_string(v) + "'s class '" +
                      cls + "'");
    out.push_back(v);
    opts.subgraphs.push_back({r.graphs[0].node_list, r.graphs[0].edge_index});
  }
}

// The run's first line (world rank 0): what is grounded in what, and on how many ranks.
void report_start(const JobConfig& cfg, const TextGraph& graph, const GroundingOptions& opts, const GraphEncoder& encoder,
                  const ParallelRuntime& rt) {
  const std::string in = has_node_texts(graph) ? opts.labelled.empty() ? "their texts" : "their texts and the classes of "
                                                : "the classes of ";
  std::string ranks;
  if (rt.shape.dp > 1)
    ranks = ", on " + std::to_string(rt.shape.dp) + " data-parallel ranks (each a share of the graph's edges" +
            (opts.labelled.empty() ? "" : " and of each batch's records") + ")";
  std::fprintf(stderr,
               "graphtune: stage grounding: graph '%s' (%d nodes), encoder %s (dropout %g), %lld steps of %lld nodes, "
               "grounded in %s%s%s\n",
               graph.name.c_str(), graph.num_nodes(), cfg.model.graph_encoder.empty() ? "fresh" : cfg.model.graph_encoder.c_str(),
               encoder->config().dropout, static_cast<long long>(opts.steps), static_cast<long long>(opts.batch_nodes),
               in.c_str(),
               opts.labelled.empty() ? "" : (std::to_string(opts.labelled.size()) + " labelled nodes, each on its record's subgraph (" +
                                             cfg.data.instructions + ")").c_str(),
               ranks.c_str());
}

// graph_encoder.safetensors and the last line: the checks train_grounding made after training.
void save_outputs(const JobConfig& cfg, const GraphEncoder& encoder, const GroundingResult& r,
                  const GroundingOptions& opts, std::chrono::steady_clock::time_point t0) {
  make_dirs(cfg.job.out_dir);
  const std::string out = cfg.job.out_dir + "/graph_encoder.safetensors";
  encoder->save_safetensors(out);
  write_graphgpt_graph_tower(*encoder, cfg.job.out_dir + "/graph_tower");  // as GraphGPT's code loads it
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string checks;
  if (!std::isnan(r.retrieval_accuracy)) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "held-out text->graph retrieval top-1 %.4f (chance %.4f, %lld nodes)",
                  r.retrieval_accuracy, r.chance, static_cast<long long>(r.heldout_nodes));
    checks = buf;
  }
  if (!opts.labelled.empty()) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "%snearest class text = label on %.4f of the labelled nodes", checks.empty() ? "" : ", ",
                  r.labelled_accuracy);
    checks += buf;
  }
  std::fprintf(stderr, "graphtune: stage grounding done in %.1f s: %s; wrote %s\n", secs, checks.c_str(), out.c_str());
}

}  // namespace

int run_grounding_phase(const JobConfig& cfg, const World& world, const c10::Device& device) {
  const auto t0 = std::chrono::steady_clock::now();
  if (!cfg.model.graph_encoder.empty() && !path_exists(cfg.model.graph_encoder))
    fail(cfg.model.graph_encoder, "cannot open (missing or unreadable)");
  const TextGraph graph = load_graph(cfg.data.graph);
  GroundingOptions opts;
  opts.steps = cfg.training.steps;
  opts.batch_nodes = cfg.training.batch_size;
  opts.lr = cfg.optimizer.lr;
  opts.weight_decay = cfg.optimizer.weight_decay;
  opts.seed = static_cast<uint64_t>(cfg.training.seed);
  if (auto p = opts.problem(); !p.empty()) fail(cfg.where("training", ""), p);
  if (!cfg.data.instructions.empty()) labelled_nodes(cfg.data.instructions, graph, opts);
  if (opts.labelled.empty() && !has_node_texts(graph))
    fail(cfg.data.graph, "the graph '" + graph.name +
                             "' has no node titles or texts to ground the encoder in; give it labelled records "
                             "([data].instructions, node classification)");

  auto no_template = [&](const std::string& kind) {
    fail(cfg.where("model", cfg.model.graph_encoder.empty() ? "graph_encoder_type" : "graph_encoder"),
         "the " + kind + " encoder has no weights to ground (LLaGA trains only its projector, in the task stage)");
  };
  const std::string& fresh_kind = cfg.model.graph_encoder_type;
  if (cfg.model.graph_encoder.empty() && (fresh_kind == "llaga" || fresh_kind == "hop_field")) no_template(fresh_kind);
  GraphEncoder encoder{nullptr};
  if (cfg.model.graph_encoder.empty()) {
    GraphEncoderConfig fresh;  // GraphGPT's shape, taking the graph's features as they are
    fresh.gnn_type = cfg.model.graph_encoder_type;
    fresh.gnn_input = graph.feature_dim;
    encoder = GraphEncoder(fresh);
    encoder->init_weights(static_cast<uint64_t>(cfg.training.seed));
  } else {
    encoder = open_graph_encoder(cfg.model.graph_encoder, cfg.model.graph_encoder_prefix);
  }
  if (encoder->config().is_template()) no_template(encoder->config().gnn_type);
  encoder->to(device);  // the graph's features and the text encoder follow it
  // In training mode throughout, the grounding takes [model].encoder_dropout where it is set,
  // else the encoder's own (0.1 for a fresh one, as GraphGPT's).
  if (cfg.model.encoder_dropout > 0) encoder->set_dropout(cfg.model.encoder_dropout, cfg.where("model", "encoder_dropout"));
  check_grounding(encoder, graph, opts);  // on every rank alike, before the groups form
  // No decoder layers to cut into stages: one empty one for the partition's arithmetic.
  const ParallelRuntime rt = make_parallel_runtime(cfg.parallelism, world, StageWeights{{0}});
  if (rt.reports()) report_start(cfg, graph, opts, encoder, rt);
  TrainLogFile log_file(rt.reports() ? cfg.job.out_dir : "");
  // Each line the means over the steps since the last, as the other phases log them.
  double loss_sum = 0, norm_sum = 0;
  int64_t in_window = 0;
  GroundingResult r = train_grounding(encoder, graph, opts, [&](const GroundingStep& s) {
    loss_sum += s.loss;
    norm_sum += s.grad_norm;
    ++in_window;
    if (s.step % cfg.training.log_every == 0 || s.step == opts.steps) {
      StepLog line;
      line.step = s.step;
      line.loss = loss_sum / static_cast<double>(in_window);
      line.lr = opts.lr;
      line.grad_norm = norm_sum / static_cast<double>(in_window);
      line.tokens_per_s = std::nan("");  // it reads nodes, not tokens
      log_file.write(line);
      if (rt.reports())
        std::fprintf(stderr, "step %5lld/%lld | contrastive loss %.4f | logit scale %.2f | grad norm %.3f\n",
                     static_cast<long long>(s.step), static_cast<long long>(opts.steps), line.loss,
                     std::exp(s.logit_scale), line.grad_norm);
      loss_sum = norm_sum = 0;
      in_window = 0;
    }
  }, rt.dp.get());

  if (rt.reports()) save_outputs(cfg, encoder, r, opts, t0);
  rt.host.world->barrier();  // nobody exits (finalising MPI) while rank 0 still writes
  return 0;
}

}  // namespace gt
