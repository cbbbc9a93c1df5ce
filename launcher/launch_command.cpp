// graphtune train | eval | pipeline: the launcher's own subcommands. Each validates the job
// (config, layout, hosts) before anything starts, then runs the workers under mpirun (one rank
// on this host: the worker alone) and supervises them through the control plane
// (launcher/run_job.hpp). --dry-run prints the commands instead.
#include <cstdio>
#include <memory>

#include "checkpoint/checkpoint_dir.hpp"
#include "checkpoint/run_folder.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "launcher/commands.hpp"
#include "launcher/job_layout.hpp"
#include "launcher/mpirun_command.hpp"
#include "launcher/pipeline_command.hpp"
#include "launcher/run_job.hpp"

namespace gt {

namespace {

void add_parallel_flags(CLI::App* sub, LaunchFlags& f) {
  sub->add_option("--np", f.np, "ranks in all (default dp x pp x tp; alone, it sets dp)");
  sub->add_option("--dp", f.dp, "data-parallel replicas (= --parallelism.dp)");
  sub->add_option("--pp", f.pp, "pipeline stages (= --parallelism.pp)");
  sub->add_option("--tp", f.tp, "tensor-parallel ranks of the projector (= --parallelism.tp)");
  sub->add_option("--schedule", f.schedule, "pipeline schedule: gpipe | 1f1b (= --parallelism.schedule)");
  sub->add_option("--microbatches", f.microbatches, "micro-batches per step (= --parallelism.microbatches)");
  sub->add_option("--hostfile", f.hostfile, "OpenMPI or DeepSpeed hostfile (`host slots=N` lines; hostfiles/)");
  sub->add_option("--include", f.include, "DeepSpeed-style host selection: host1@host2:0,1");
  sub->add_option("--exclude", f.exclude, "DeepSpeed-style hosts or slots to leave out");
  sub->add_option("--max-restarts", f.max_restarts, "after a failure, restart from the newest committed checkpoint up to K times");
}

void add_common_flags(CLI::App* sub, LaunchFlags& f) {
  sub->add_option("-c,--config", f.config, "TOML job config (configs/)");
  sub->add_option("--device", f.device, "auto | cpu | cuda: where the ranks compute (= --training.device)");
  sub->add_flag("--dry-run", f.dry_run, "check everything and print the commands, start nothing");
  sub->add_option("--control-host", f.control_host,
                  "address the launcher listens on for its workers (default 127.0.0.1; on a cluster, this "
                  "host's address the other nodes reach)");
  sub->add_option("--control-port", f.control_port, "its port (default: any free one)");
  sub->add_option("--heartbeat-timeout", f.heartbeat_timeout_s, "seconds of silence after which a rank counts as stalled");
  sub->add_option("--mpirun-args", f.mpirun_args, "more mpirun arguments, e.g. \"--mca plm_rsh_agent ssh\"");
}

// A count flag given as 0 would read as not given, and a negative --max-restarts as none: both
// are refused as written.
void check_count_flags(const CLI::App* sub, const LaunchFlags& f) {
  for (const auto& [flag, v] : {std::pair{"--np", f.np}, {"--dp", f.dp}, {"--pp", f.pp}, {"--tp", f.tp},
                                {"--microbatches", f.microbatches}})
    if (sub->count(flag) > 0 && v < 1) fail(std::string(flag) + " " + std::to_string(v), "must be at least 1");
  if (f.max_restarts < 0) fail("--max-restarts " + std::to_string(f.max_restarts), "must be at least 0");
}

Overrides user_overrides(const std::vector<std::string>& extra) {
  std::vector<std::string> rest;
  Overrides o = take_overrides(extra, rest);
  if (!rest.empty()) fail("command line", "unexpected argument '" + rest[0] + "' (overrides are --section.key VALUE)");
  return o;
}

// A job of the worker's `subcommand` on this config, its layout not yet resolved.
JobSpec worker_job(const std::string& subcommand, const std::string& config) {
  JobSpec spec;
  spec.title = subcommand;
  spec.worker = worker_binary();
  spec.worker_args = {subcommand};
  if (!config.empty()) spec.worker_args.insert(spec.worker_args.end(), {"--config", config});
  return spec;
}

// --dry-run prints the command; otherwise the job runs.
int run_or_print(const JobSpec& spec, const LaunchFlags& f) {
  if (!f.dry_run) return run_job(spec, f);
  std::fputs(dry_run_text(spec, f).c_str(), stdout);
  return 0;
}

int run_train(LaunchFlags& f, const std::vector<std::string>& extra, const std::string& resume, bool skip, int argc,
              char** argv) {
  Overrides user = user_overrides(extra);
  if (!resume.empty()) set_override(user, "checkpoint.resume", resume);
  if (f.overwrite) set_override(user, "job.overwrite", "true");
  if (skip) set_override(user, "data.skip_invalid", "true");
  JobSpec spec = worker_job("train", f.config);
  spec.layout = resolve_layout(f, user, ConfigUse::kTrain);
  // A resume needs a committed checkpoint to resume from: found now, not after the ranks start.
  const JobConfig& cfg = spec.layout.cfg;
  if (!cfg.checkpoint.resume.empty()) ckpt::resolve_checkpoint(cfg.checkpoint.dir, cfg.checkpoint.resume);
  // The run folder too, so that --dry-run refuses it; run_job judges it again under its lock.
  check_run_folder(cfg.job.out_dir, cfg.checkpoint.dir, !cfg.checkpoint.resume.empty(), cfg.job.overwrite);
  spec.run_dir = spec.layout.cfg.job.out_dir;
  spec.checkpointed = true;
  spec.resume_command = resume_command(argc, argv, {"--resume", "latest"});
  if (spec.layout.np > 1 || f.dry_run) {
    const int rc = preflight(spec.worker, f.config, spec.layout);
    if (rc != 0) return rc;
  }
  return run_or_print(spec, f);
}

int run_eval(LaunchFlags& f, const std::vector<std::string>& extra, const std::string& out, bool skip, bool resume,
             int argc, char** argv) {
  Overrides user = user_overrides(extra);
  if (skip) set_override(user, "data.skip_invalid", "true");
  if (resume) set_override(user, "eval.resume", "true");
  if (f.overwrite) set_override(user, "eval.overwrite", "true");
  if (!out.empty()) set_override(user, "eval.out_dir", out);  // = the worker's --out, seen by the preflight too
  JobSpec spec = worker_job("eval", f.config);
  spec.layout = resolve_layout(f, user, ConfigUse::kEval);
  spec.run_dir = spec.layout.cfg.eval.out_dir;
  spec.answers = true;
  spec.resume_command = resume_command(argc, argv, {"--resume"});
  if (spec.layout.np > 1 || f.dry_run) {
    const int rc = preflight(spec.worker, f.config, spec.layout, "eval");
    if (rc != 0) return rc;
  }
  return run_or_print(spec, f);
}

}  // namespace

void add_launch_commands(CLI::App& app, int& exit_code, int argc, char** argv) {
  {
    auto f = std::make_shared<LaunchFlags>();
    auto resume = std::make_shared<std::string>();
    auto skip = std::make_shared<bool>(false);
    CLI::App* sub = app.add_subcommand(
        "train", "train from a TOML config on 1..N ranks; any key overridable as --section.key VALUE");
    add_common_flags(sub, *f);
    add_parallel_flags(sub, *f);
    sub->add_option("--resume", *resume,
                    "continue from a checkpoint: \"latest\" or its folder (= --checkpoint.resume)");
    sub->add_flag("--overwrite", f->overwrite,
                  "replace the run folder's earlier run, checkpoints and outputs (= --job.overwrite true)");
    sub->add_flag("--skip-invalid", *skip, "drop bad instruction records and report how many");
    sub->allow_extras();
    sub->callback([sub, f, resume, skip, argc, argv, &exit_code] {
      check_count_flags(sub, *f);
      exit_code = run_train(*f, sub->remaining(), *resume, *skip, argc, argv);
    });
  }
  {
    auto f = std::make_shared<LaunchFlags>();
    auto out = std::make_shared<std::string>();
    auto skip = std::make_shared<bool>(false);
    auto resume = std::make_shared<bool>(false);
    CLI::App* sub = app.add_subcommand(
        "eval", "answer instruction records with GraphGPT and score them on 1..N ranks (predictions.jsonl, metrics.json)");
    add_common_flags(sub, *f);
    add_parallel_flags(sub, *f);
    sub->add_option("--out", *out, "output folder (default [eval].out_dir, i.e. [job].out_dir/eval)");
    sub->add_flag("--skip-invalid", *skip, "drop bad instruction records and report how many");
    sub->add_flag("--resume", *resume,
                  "continue an interrupted eval in the output folder from its committed answers (= --eval.resume true)");
    sub->add_flag("--overwrite", f->overwrite,
                  "replace an interrupted eval's committed answers and start over (= --eval.overwrite true)");
    sub->allow_extras();
    sub->callback([sub, f, out, skip, resume, argc, argv, &exit_code] {
      check_count_flags(sub, *f);
      exit_code = run_eval(*f, sub->remaining(), *out, *skip, *resume, argc, argv);
    });
  }
  {
    auto f = std::make_shared<LaunchFlags>();
    auto resume = std::make_shared<bool>(false);
    CLI::App* sub = app.add_subcommand(
        "pipeline", "GraphGPT's recipe in one run folder: stage 1 -> stage 2 -> evaluation (a pipeline TOML, "
                    "configs/demo/pipeline.toml)");
    add_common_flags(sub, *f);
    add_parallel_flags(sub, *f);
    sub->add_flag("--resume", *resume, "skip the finished stages and resume the first unfinished one from its newest checkpoint");
    sub->add_flag("--overwrite", f->overwrite, "replace the pipeline folder's earlier pipeline (= --job.overwrite true)");
    sub->allow_extras();
    sub->callback([sub, f, resume, argc, argv, &exit_code] {
      check_count_flags(sub, *f);
      exit_code = run_pipeline(*f, sub->remaining(), *resume, argc, argv);
    });
  }
}

}  // namespace gt
