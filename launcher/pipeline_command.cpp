#include "launcher/pipeline_command.hpp"

#include <chrono>
#include <cstdio>

#include "checkpoint/checkpoint_dir.hpp"
#include "checkpoint/run_folder.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "launcher/mpirun_command.hpp"
#include "launcher/run_job.hpp"
#include "launcher/summary_table.hpp"

namespace gt {

namespace {

struct PipelineFile {
  std::string stage1, stage2, out_dir, eval_instructions;
  bool eval_text_only = false;
};

std::string folder_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string stem_of(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  return name.substr(0, name.rfind('.'));
}

PipelineFile read_pipeline(const std::string& path, const Overrides& overrides) {
  if (path.empty()) fail("-c", "pipeline needs its pipeline file (configs/demo/pipeline.toml)");
  ConfigReader r(path);
  for (const auto& [k, v] : overrides) r.apply_override(k, v);
  PipelineFile p;
  auto beside = [&](const std::string& key) {
    std::string v = r.get_string("pipeline", key, "");
    if (v.empty()) r.reject("pipeline", key, "is required: the stage's job config");
    if (v[0] != '/') v = folder_of(path) + "/" + v;
    if (!path_exists(v)) r.reject("pipeline", key, "'" + v + "' does not exist");
    return v;
  };
  p.stage1 = beside("stage1");
  p.stage2 = beside("stage2");
  p.out_dir = r.get_string("pipeline", "out_dir", "runs/" + stem_of(path));
  p.eval_instructions = r.get_string("pipeline", "eval_instructions", "");
  p.eval_text_only = r.get_bool("pipeline", "eval_text_only", false);
  r.finish();
  return p;
}

// A stage is finished when its outputs are there (a resumed pipeline skips it).
bool finished(const std::string& dir, const char* output) { return path_exists(dir + "/" + output); }

}  // namespace

int run_pipeline(LaunchFlags& f, const std::vector<std::string>& extra, bool resume, int argc, char** argv) {
  std::vector<std::string> rest;
  const Overrides all = take_overrides(extra, rest);
  if (!rest.empty()) fail("command line", "unexpected argument '" + rest[0] + "' (overrides are --section.key VALUE)");
  Overrides common, mine, stage1, stage2, eval;
  for (const auto& [k, v] : all) {
    auto route = [&](const char* prefix, Overrides& to) {
      const std::string p = std::string(prefix) + ".";
      if (k.rfind(p, 0) != 0) return false;
      to.emplace_back(k.substr(p.size()), v);
      return true;
    };
    if (k.rfind("pipeline.", 0) == 0) {
      mine.emplace_back(k, v);
      continue;
    }
    if (!route("stage1", stage1) && !route("stage2", stage2) && !route("eval", eval))
      common.emplace_back(k, v);
  }
  if (f.overwrite) set_override(common, "job.overwrite", "true");
  // "eval." is also a section of the job config ([eval].batch_size ...): --eval.batch_size 4
  // stays a common override; --eval.SECTION.KEY goes to the evaluation alone.
  for (auto it = eval.begin(); it != eval.end();)
    if (it->first.find('.') == std::string::npos) {
      common.emplace_back("eval." + it->first, it->second);
      it = eval.erase(it);
    } else {
      ++it;
    }
  const PipelineFile p = read_pipeline(f.config, mine);
  const std::string worker = worker_binary();
  const std::string s1_dir = p.out_dir + "/stage1", s2_dir = p.out_dir + "/stage2";
  const std::string resume_cmd = resume_command(argc, argv, {"--resume"});

  auto with = [](Overrides base, const Overrides& more) {
    for (const auto& [k, v] : more) set_override(base, k, v);
    return base;
  };
  // The evaluations run on the job's ranks, in the layout the stages train in: a model trained
  // over pipeline stages because it fits no one rank is evaluated over the same stages.
  LaunchFlags eval_flags = f;
  eval_flags.config = p.stage2;

  // Every stage's job, resolved and checked before the first one starts.
  struct Step {
    JobSpec spec;
    LaunchFlags flags;
    bool train = true;
    const char* output = "";
  };
  std::vector<Step> steps;
  auto add_training = [&](const std::string& title, const std::string& config, const Overrides& overrides,
                          const std::string& dir) {
    Step s;
    s.flags = f;
    s.flags.config = config;
    s.spec.title = title;
    s.spec.worker = worker;
    s.spec.worker_args = {"train", "--config", config};
    s.spec.layout = resolve_layout(s.flags, with(overrides, {{"job.out_dir", dir}}), ConfigUse::kTrain);
    s.spec.run_dir = dir;
    s.spec.checkpointed = true;
    s.spec.resume_command = resume_cmd;
    s.output = "graph_projector.bin";
    steps.push_back(s);
  };
  add_training("stage1", p.stage1, with(common, stage1), s1_dir);
  // LoRA adapters a stage trains go on with the model: into stage 2 (trained further there with
  // projector+lora, else frozen), and into the graph evaluation (not the text-only baseline,
  // which is the LLM as it was).
  auto trains_lora = [](const Step& s) { return s.spec.layout.cfg.training.trains_lora(); };
  Overrides into_stage2 = {{"model.projector", s1_dir + "/graph_projector.bin"}};
  if (trains_lora(steps.back())) into_stage2.emplace_back("model.adapter", s1_dir + "/adapter");
  add_training("stage2", p.stage2, with(with(common, stage2), into_stage2), s2_dir);
  const std::string adapter = trains_lora(steps.back()) ? s2_dir + "/adapter"
                              : trains_lora(steps.front()) ? s1_dir + "/adapter"
                                                           : std::string();
  if (!p.eval_instructions.empty()) {
    for (int text_only = 0; text_only <= (p.eval_text_only ? 1 : 0); ++text_only) {
      Step s;
      s.flags = eval_flags;
      s.train = false;
      s.spec.title = text_only ? "eval (text only)" : "eval";
      s.spec.worker = worker;
      s.spec.run_dir = p.out_dir + (text_only ? "/eval_text_only" : "/eval");
      s.spec.worker_args = {"eval", "--config", p.stage2};
      Overrides o = with(with(common, eval), {{"model.projector", s2_dir + "/graph_projector.bin"},
                                              {"data.instructions", p.eval_instructions},
                                              {"job.out_dir", s2_dir},
                                              {"eval.out_dir", s.spec.run_dir}});
      if (text_only) set_override(o, "eval.text_only", "true");
      if (!text_only && !adapter.empty()) set_override(o, "model.adapter", adapter);
      s.spec.layout = resolve_layout(eval_flags, o, ConfigUse::kEval);
      s.spec.resume_command = resume_cmd;
      s.spec.answers = true;
      s.output = "metrics.json";
      steps.push_back(s);
    }
  }
  for (const Step& s : steps)
    if (s.train || s.spec.layout.np > 1) {
      const int rc = preflight(worker, s.spec.worker_args[2], s.spec.layout, s.train ? "train" : "eval");
      if (rc != 0) return rc;
    }
  // An earlier pipeline's work in the stages' folders is continued (--resume) or replaced
  // (--overwrite), never silently mixed with this one's. Only the stages' own folders count:
  // the pipeline's folder may hold other things (a demo keeps its warm-up runs there).
  const bool overwrite = steps.front().spec.layout.cfg.job.overwrite;
  auto checkpoint_dir = [](const Step& s) { return s.train ? s.spec.layout.cfg.checkpoint.dir : std::string(); };
  if (!resume && !overwrite) {
    std::vector<std::string> work;
    for (const Step& s : steps)
      for (const std::string& w : committed_work(s.spec.run_dir, checkpoint_dir(s)))
        work.push_back(w.front() == '/' ? w : s.spec.run_dir.substr(p.out_dir.size() + 1) + "/" + w);
    if (!work.empty()) refuse_committed_work(p.out_dir, work, "--resume continues it, --overwrite replaces it");
  }
  if (f.dry_run) {
    for (const Step& s : steps) std::fputs(dry_run_text(s.spec, s.flags).c_str(), stdout);
    return 0;
  }
  const RunFolderLock lock(p.out_dir, "graphtune pipeline");
  lock.say_taken_over(stdout);
  if (overwrite && !resume)
    for (const Step& s : steps)
      if (is_directory(s.spec.run_dir)) clear_run_folder(s.spec.run_dir, checkpoint_dir(s));

  std::vector<std::vector<std::string>> rows;
  for (Step& s : steps) {
    if (resume && finished(s.spec.run_dir, s.output)) {
      std::printf("graphtune: pipeline: %s is finished (%s/%s), skipped\n", s.spec.title.c_str(),
                  s.spec.run_dir.c_str(), s.output);
      rows.push_back({s.spec.title, "skipped", "", s.spec.run_dir});
      continue;
    }
    if (resume && s.train && !ckpt::committed_checkpoints(s.spec.layout.cfg.checkpoint.dir).empty()) {
      set_override(s.spec.layout.overrides, "checkpoint.resume", "latest");
      s.spec.layout.cfg.checkpoint.resume = "latest";
    }
    if (resume && !s.train) {  // an evaluation that was stopped keeps the answers it committed
      set_override(s.spec.layout.overrides, "eval.resume", "true");
      s.spec.layout.cfg.eval.resume = true;
    }
    std::printf("graphtune: pipeline: %s\n", s.spec.title.c_str());
    std::fflush(stdout);
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = run_job(s.spec, s.flags);
    if (rc != 0) return rc;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.1f", secs);
    rows.push_back({s.spec.title, "done", buf, s.spec.run_dir});
  }
  std::printf("graphtune: pipeline finished: %s\n%s", p.out_dir.c_str(),
              format_table({"stage", "status", "seconds", "folder"}, rows).c_str());
  return 0;
}

}  // namespace gt
