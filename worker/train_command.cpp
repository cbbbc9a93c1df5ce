// graphtune train --config FILE [--section.key VALUE ...]: runs the phase the config names.
// The phases live in train/: lm (train/lm_phase.hpp), grounding (train/grounding_phase.hpp),
// graph_matching and task (train/graph_phase.hpp).
#include <torch/torch.h>

#include <cstdio>
#include <memory>

#include "checkpoint/run_folder.hpp"
#include "comm/world.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "config/job_config.hpp"
#include "control/control_client.hpp"
#include "layout/process_grid.hpp"
#include "parallel/parallel_runtime.hpp"
#include "train/device_memory.hpp"
#include "train/graph_phase.hpp"
#include "train/grounding_phase.hpp"
#include "train/lm_phase.hpp"
#include "train/train_checkpoint.hpp"
#include "train/train_loop.hpp"
#include "weights/load_model.hpp"
#include "worker/commands.hpp"
#include "worker/rank_errors.hpp"
#include "worker/device_choice.hpp"
#include "worker/template_warning.hpp"

namespace gt {

namespace {

// Everything that can be wrong with the job itself, before any weight is read: the same on every
// rank (same files, same flags), so only rank 0 says it.
void check_job(const JobConfig& cfg, int world_size) {
  // Phase grounding trains the graph encoder alone: its steps split over dp ranks only.
  const bool grounding = cfg.training.stage == Phase::kGrounding;
  if (grounding && cfg.parallelism.pp > 1)
    fail(cfg.where("parallelism", "pp"), std::to_string(cfg.parallelism.pp) +
                                             ": stage grounding has no LLM layers to cut into pipeline stages (use dp)");
  if (grounding && cfg.parallelism.tp > 1)
    fail(cfg.where("parallelism", "tp"), std::to_string(cfg.parallelism.tp) +
                                             ": stage grounding has no projector to split over tensor-parallel ranks (use dp)");
  int64_t n_layers = cfg.model.n_layers, dim = cfg.model.dim;
  if (!cfg.model.path.empty()) {
    const LlamaConfig mc = read_model_config(cfg.model.path);  // the config only, no weights
    n_layers = mc.n_layers;
    dim = mc.dim;
  }
  check_parallel_layout(cfg, world_size, static_cast<int>(n_layers));
  const bool graph_phase = is_graph_phase(cfg.training.stage);
  if (cfg.parallelism.tp > 1 && !graph_phase)
    fail(cfg.where("parallelism", "tp"), std::to_string(cfg.parallelism.tp) + ": tensor parallelism splits GraphGPT's projector, "
                                          "which stage " + std::string(name_of(cfg.training.stage)) + " does not have (use dp or pp)");
  if (cfg.parallelism.tp > 1 && dim % cfg.parallelism.tp)
    fail(cfg.where("parallelism", "tp"), std::to_string(cfg.parallelism.tp) + " does not divide the projector's output, the LLM "
                                          "hidden size " + std::to_string(dim));
  find_resume_point(cfg);  // the checkpoint to resume from exists, is committed, and is this run's
}

int run_phase(const JobConfig& cfg, const World& world, const c10::Device& device) {
  if (cfg.training.threads > 0) torch::set_num_threads(static_cast<int>(cfg.training.threads));
  switch (cfg.training.stage) {
    case Phase::kLm: return run_lm_phase(cfg, world, device);
    case Phase::kGrounding: return run_grounding_phase(cfg, world, device);
    case Phase::kGraphMatching:
    case Phase::kTask: return run_graph_phase(cfg, world, device);
  }
  return 1;
}

// Without the launcher (mpirun started the worker itself), rank 0 takes the run folder as the
// launcher would: refused while it holds an earlier run's committed work (checked on every rank
// alike), locked for this job, cleared with [job].overwrite. The lock's holder is rank 0's alone:
// when another job holds it, rank 0 ends the others too. The others wait for it, so that nothing
// they write goes with the earlier run.
std::unique_ptr<RunFolderLock> take_run_folder(const JobConfig& cfg, const World& world) {
  if (control::connected()) return nullptr;  // the launcher holds it
  const bool resume = !cfg.checkpoint.resume.empty();
  check_run_folder(cfg.job.out_dir, cfg.checkpoint.dir, resume, cfg.job.overwrite);
  std::unique_ptr<RunFolderLock> lock;
  if (world.rank() == 0) {
    try {
      lock = std::make_unique<RunFolderLock>(cfg.job.out_dir, "graphtune-worker train");
      lock->say_taken_over(stderr);
      if (cfg.job.overwrite && !resume) clear_run_folder(cfg.job.out_dir, cfg.checkpoint.dir);
    } catch (const InputError& e) {
      if (world.size() == 1) throw;
      std::fprintf(stderr, "graphtune: error: rank 0: %s\n", e.what());
      std::fflush(stderr);
      world.abort(kExitInputError);
    }
  }
  world.barrier();
  return lock;
}

JobConfig read_job(const std::string& config_path, const std::vector<std::string>& extra) {
  std::vector<std::string> rest;
  auto overrides = take_overrides(extra, rest);
  if (!rest.empty()) fail("command line", "unexpected argument '" + rest[0] + "' (overrides are --section.key VALUE)");
  return read_job_config(config_path, overrides);
}

// The phases that render conversations: the graph phases, and lm on instruction records.
void warn_on_template(const JobConfig& cfg) {
  if (is_graph_phase(cfg.training.stage) || (cfg.training.stage == Phase::kLm && !cfg.data.instructions.empty()))
    warn_if_template_differs(cfg, cfg.data.chat_template, "data");
}

int run_train(const std::string& config_path, const std::vector<std::string>& extra) {
  // Ranks learn who they are from MPI (mpirun, or the launcher, which runs mpirun): the same
  // program runs one rank or many.
  int argc = 0;
  char** argv = nullptr;
  World world(&argc, &argv);
  c10::Device device = c10::kCPU;
  return run_on_rank(world, device, [&] {
    control::connect(world.rank(), world.size());  // when the launcher started this job
    JobConfig cfg = read_job(config_path, extra);
    // Before any communicator forms: NCCL's go to the device current when they are made.
    device = use_job_device(cfg);  // a device this host has, or one line saying why not
    check_job(cfg, world.size());
    if (!control::connected() && world.rank() == 0) warn_on_template(cfg);  // else the launcher's preflight said it
    control::report_device(describe_device(device));
    const std::unique_ptr<RunFolderLock> lock = take_run_folder(cfg, world);
    const int rc = run_phase(cfg, world, device);
    control::report_done();
    return rc;
  });
}

// The launcher's preflight: the config and the layout for `world_size` ranks checked in one
// process, without MPI, before anything is started.
int check_train(const std::string& config_path, const std::vector<std::string>& extra, int world_size) {
  JobConfig cfg = read_job(config_path, extra);
  check_job(cfg, world_size);
  choose_job_device(cfg);  // a device this host has, or one line saying why not
  warn_on_template(cfg);
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, int& exit_code) {
  auto config = std::make_shared<std::string>();
  auto skip = std::make_shared<bool>(false);
  auto resume = std::make_shared<std::string>();
  auto check_world = std::make_shared<int>(0);
  auto overwrite = std::make_shared<bool>(false);
  auto device = std::make_shared<std::string>();
  CLI::App* sub = app.add_subcommand("train", "train from a TOML config; any key overridable as --section.key VALUE");
  sub->add_option("-c,--config", *config, "TOML job config (configs/)");
  sub->add_flag("--skip-invalid", *skip, "drop bad instruction records and report how many (= --data.skip_invalid true)");
  sub->add_option("--resume", *resume,
                  "continue from a checkpoint: \"latest\" (the newest committed one) or its folder "
                  "(= --checkpoint.resume)");
  sub->add_flag("--overwrite", *overwrite,
                "replace the run folder's earlier run, checkpoints and outputs (= --job.overwrite true)");
  sub->add_option("--check-world", *check_world,
                  "check the config and the layout for this many ranks, then exit (the launcher's preflight)")
      ->group("");
  sub->add_option("--device", *device, "auto | cpu | cuda (= --training.device)");
  sub->allow_extras();
  sub->callback([sub, config, skip, resume, check_world, overwrite, device, &exit_code] {
    auto extra = sub->remaining();
    if (!device->empty()) extra.insert(extra.end(), {"--training.device", *device});
    if (*skip) extra.insert(extra.end(), {"--data.skip_invalid", "true"});
    if (*overwrite) extra.insert(extra.end(), {"--job.overwrite", "true"});
    if (!resume->empty()) extra.insert(extra.end(), {"--checkpoint.resume", *resume});
    exit_code = *check_world > 0 ? check_train(*config, extra, *check_world) : run_train(*config, extra);
  });
}

}  // namespace gt
