// graphtune train --config FILE [--section.key VALUE ...]: runs the stage the config names.
// The stages live beside it: lm (worker/lm_stage.hpp), grounding (worker/grounding_stage.hpp),
// graph_matching and task (worker/graph_trainer.hpp).
#include <torch/torch.h>


#include "common/config.hpp"
#include "common/error.hpp"
#include "common/train_config.hpp"
#include "parallel/world.hpp"
#include "worker/commands.hpp"
#include "worker/graph_trainer.hpp"
#include "worker/grounding_stage.hpp"
#include "worker/lm_stage.hpp"

namespace gt {

namespace {

int run_train(const std::string& config_path, const std::vector<std::string>& extra) {
  std::vector<std::string> rest;
  auto overrides = take_overrides(extra, rest);
  if (!rest.empty()) fail("command line", "unexpected argument '" + rest[0] + "' (overrides are --section.key VALUE)");
  TrainConfig cfg = read_train_config(config_path, overrides);

  int argc = 0;
  char** argv = nullptr;
  World world(&argc, &argv);
  if (world.size() > 1)
    fail("mpirun", "not supported yet: training on " + std::to_string(world.size()) +
                       " ranks (data and pipeline parallelism come with the parallel runtime); run one rank");
  if (cfg.dp * cfg.pp * cfg.tp > 1)
    fail(cfg.path + ": [parallelism]", "not supported yet: dp " + std::to_string(cfg.dp) + " x pp " + std::to_string(cfg.pp) +
                                           " x tp " + std::to_string(cfg.tp) +
                                           " (the parallel runtime is being built; use dp = pp = tp = 1)");
  if (cfg.threads > 0) torch::set_num_threads(static_cast<int>(cfg.threads));
  if (cfg.stage == "graph_matching" || cfg.stage == "task") return run_graph_stage(cfg);
  if (cfg.stage == "grounding") return run_grounding_stage(cfg);
  return run_lm_stage(cfg);
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto config = std::make_shared<std::string>();
  auto skip = std::make_shared<bool>(false);
  CLI::App* sub = app.add_subcommand("train", "train from a TOML config; any key overridable as --section.key VALUE");
  sub->add_option("--config", *config, "TOML job config (configs/)");
  sub->add_flag("--skip-invalid", *skip, "drop bad instruction records and report how many (= --data.skip_invalid true)");
  sub->allow_extras();
  sub->callback([sub, config, skip, &exit_code] {
    auto extra = sub->remaining();
    if (*skip) extra.insert(extra.end(), {"--data.skip_invalid", "true"});
    exit_code = run_train(*config, extra);
  });
}

}  // namespace gt
