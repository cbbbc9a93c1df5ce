#include "train/grounding_phase.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cstdio>

#include "common/error.hpp"
#include "common/fs.hpp"
#include "data/cora_ml.hpp"
#include "model/graph_encoder.hpp"
#include "model/graph_encoder_folder.hpp"
#include "train/grounding.hpp"

namespace gt {

int run_grounding_phase(const JobConfig& cfg, const c10::Device& device) {
  auto t0 = std::chrono::steady_clock::now();
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

  GraphEncoder encoder{nullptr};
  if (cfg.model.graph_encoder.empty()) {
    encoder = GraphEncoder();
    encoder->init_weights(static_cast<uint64_t>(cfg.training.seed));
  } else {
    encoder = open_graph_encoder(cfg.model.graph_encoder, cfg.model.graph_encoder_prefix);
  }
  encoder->to(device);  // the graph's features and the text encoder follow it
  std::fprintf(stderr, "graphtune: stage grounding: graph '%s' (%d nodes), encoder %s, %lld steps of %lld nodes\n",
               graph.name.c_str(), graph.num_nodes(), cfg.model.graph_encoder.empty() ? "fresh" : cfg.model.graph_encoder.c_str(),
               static_cast<long long>(opts.steps), static_cast<long long>(opts.batch_nodes));
  double window = 0;
  int64_t in_window = 0;
  GroundingResult r = train_grounding(encoder, graph, opts, [&](int64_t step, double loss, double scale) {
    window += loss;
    ++in_window;
    if (step % cfg.training.log_every == 0 || step == opts.steps) {
      std::fprintf(stderr, "step %5lld/%lld | contrastive loss %.4f | logit scale %.2f\n", static_cast<long long>(step),
                   static_cast<long long>(opts.steps), window / static_cast<double>(in_window), std::exp(scale));
      window = 0;
      in_window = 0;
    }
  });

  make_dirs(cfg.job.out_dir);
  const std::string out = cfg.job.out_dir + "/graph_encoder.safetensors";
  encoder->save_safetensors(out);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::fprintf(stderr,
               "graphtune: stage grounding done in %.1f s: held-out text->graph retrieval top-1 %.4f (chance %.4f, %lld "
               "nodes); wrote %s\n",
               secs, r.retrieval_accuracy, r.chance, static_cast<long long>(r.heldout_nodes), out.c_str());
  return 0;
}

}  // namespace gt
