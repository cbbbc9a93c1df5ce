#include "launcher/job_layout.hpp"

#include <unistd.h>

#include <algorithm>
#include <thread>

#include "common/config.hpp"
#include "common/error.hpp"
#include "common/host.hpp"
#include "formats/model_config.hpp"
#include "launcher/cuda_devices.hpp"
#include "launcher/hostfile.hpp"
#include "launcher/memory_plan.hpp"

namespace gt {

namespace {

const std::string* find_override(const Overrides& o, const std::string& key) {
  const std::string* found = nullptr;
  for (const auto& [k, v] : o)
    if (k == key) found = &v;
  return found;
}

// A flag is the same setting as its --parallelism.KEY override: both given and different is a
// contradiction the user must resolve, not one for us to pick a winner in.
void apply_flag(Overrides& o, const std::string& flag, const std::string& key, const std::string& value) {
  if (const std::string* v = find_override(o, key); v && *v != value)
    fail(flag + " " + value, "contradicts --" + key + " " + *v);
  set_override(o, key, value);
}

// Without a hostfile every rank runs on this host: its cores are its slots, and mpirun
// oversubscribes them (a test's 4 ranks on 2 cores) as far as memory holds the ranks' baseline
// (the planner's, before any model). Beyond that `ranks` is a typo or wants other hosts.
void check_local_ranks(int64_t ranks, const std::string& where) {
  const int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
  const double per_rank = cpu_baseline_bytes(2);
  const int64_t fit = std::max<int64_t>(cores, static_cast<int64_t>(memory / per_rank));
  if (ranks <= fit) return;
  fail(where, "this host has " + std::to_string(cores) + " slot" + (cores == 1 ? "" : "s") + " (cores) and memory for " +
                  std::to_string(fit) + " ranks at most (" + gib(memory) + ", about " + gib(per_rank) +
                  " a rank before its model); more ranks need more hosts (--hostfile)");
}

// The layout against the model (formats/: its config alone) and the ranks, as the worker will
// check it: here, before anything starts, whatever the number of ranks.
void check_layout_against_model(const JobConfig& cfg, int ranks, ConfigUse use) {
  const int64_t n_layers = cfg.model.path.empty() ? cfg.model.n_layers : read_model_config(cfg.model.path).n_layers;
  check_parallel_layout(cfg, ranks, static_cast<int>(n_layers), use);
}

// cuda asked for, on this host: it must show a GPU, and one a rank. Other hosts' GPUs are seen
// by their ranks, which check the same before any weight is read.
void check_cuda_here(const JobConfig& cfg, int ranks_here) {
  if (cfg.training.device != DeviceKind::kCuda || ranks_here == 0) return;
  const CudaDevices gpus = visible_cuda_devices();
  const std::string shown = cuda_visible_devices_note();
  if (gpus.count == 0)
    fail(cfg.origin("training", "device"), "cuda: no CUDA device on " + this_host_name() + " (" + gpus.why_none + shown + ")");
  if (ranks_here > gpus.count)
    fail(cfg.origin("training", "device"), "cuda: " + std::to_string(ranks_here) + " ranks on " + this_host_name() +
                                               " but it shows " + std::to_string(gpus.count) + " GPU" +
                                               (gpus.count == 1 ? "" : "s") + shown + ": one rank a GPU");
}

}  // namespace

void set_override(Overrides& overrides, const std::string& key, const std::string& value) {
  for (auto& [k, v] : overrides)
    if (k == key) {
      v = value;
      return;
    }
  overrides.emplace_back(key, value);
}

std::vector<std::string> override_args(const Overrides& overrides) {
  std::vector<std::string> a;
  for (const auto& [k, v] : overrides) {
    a.push_back("--" + k);
    a.push_back(v);
  }
  return a;
}

JobLayout resolve_layout(const LaunchFlags& f, const Overrides& user, ConfigUse use) {
  JobLayout L;
  L.overrides = user;
  if (f.dp) apply_flag(L.overrides, "--dp", "parallelism.dp", std::to_string(f.dp));
  if (f.pp) apply_flag(L.overrides, "--pp", "parallelism.pp", std::to_string(f.pp));
  if (f.tp) apply_flag(L.overrides, "--tp", "parallelism.tp", std::to_string(f.tp));
  if (!f.schedule.empty()) apply_flag(L.overrides, "--schedule", "parallelism.schedule", f.schedule);
  if (f.microbatches) apply_flag(L.overrides, "--microbatches", "parallelism.microbatches", std::to_string(f.microbatches));
  if (!f.device.empty()) apply_flag(L.overrides, "--device", "training.device", f.device);

  // The hosts first: a job that cannot have its ranks is refused before its config is judged.
  Hostfile hosts;
  if (!f.hostfile.empty()) {
    hosts = filter_hosts(read_hostfile(f.hostfile), f.include, f.exclude);
    if (f.np) check_fits(hosts, f.np, "--np");
  } else if (f.np) {
    check_local_ranks(f.np, "--np " + std::to_string(f.np));
  }
  JobConfig cfg = read_job_config(f.config, L.overrides, use);
  // --np alone sets the data-parallel degree (the torchrun habit): np = dp x pp x tp.
  const int64_t model_ranks = cfg.parallelism.pp * cfg.parallelism.tp;
  if (f.np && !f.dp && cfg.parallelism.dp * model_ranks != f.np) {
    if (f.np % model_ranks)
      fail("--np " + std::to_string(f.np), "is not a multiple of pp x tp = " + std::to_string(model_ranks));
    if (cfg.parallelism.dp != 1 && !find_override(user, "parallelism.dp"))
      fail("--np " + std::to_string(f.np), "contradicts " + (f.config.empty() ? std::string("the config") : f.config) +
                                              ": [parallelism].dp = " + std::to_string(cfg.parallelism.dp) + " with pp x tp = " +
                                              std::to_string(model_ranks));
    set_override(L.overrides, "parallelism.dp", std::to_string(f.np / model_ranks));
    cfg = read_job_config(f.config, L.overrides, use);
  }
  L.np = static_cast<int>(cfg.parallelism.dp * cfg.parallelism.pp * cfg.parallelism.tp);
  if (f.np && f.np != L.np)
    fail("--np " + std::to_string(f.np), "contradicts dp x pp x tp = " + std::to_string(cfg.parallelism.dp) + " x " +
                                             std::to_string(cfg.parallelism.pp) + " x " + std::to_string(cfg.parallelism.tp) + " = " +
                                             std::to_string(L.np));

  const int cores = std::max(1u, std::thread::hardware_concurrency());
  if (!f.hostfile.empty()) {
    const Hostfile& h = hosts;
    check_fits(h, L.np, "--np");
    L.hostfile = f.hostfile;
    L.hostfile_text = openmpi_hostfile_text(h);
    // mpirun fills hosts in order, each up to its slots: the busiest host sets the threads.
    L.ranks_per_host = 1;
    for (size_t k = 0, left = static_cast<size_t>(L.np); k < h.hosts.size() && left > 0; ++k) {
      const size_t n = std::min(left, static_cast<size_t>(h.hosts[k].slots));
      L.ranks_per_host = std::max(L.ranks_per_host, static_cast<int>(n));
      left -= n;
    }
    bool chosen_devices = false;
    for (const Host& host : h.hosts) chosen_devices = chosen_devices || !host.slot_ids.empty();
    int left = chosen_devices ? L.np : 0;  // check_fits: the hosts have room for them all
    for (size_t k = 0; k < h.hosts.size() && left > 0; ++k) {
      const int n = std::min(left, h.hosts[k].slots);
      const std::vector<int> ids = device_ids(h.hosts[k]);
      std::string visible;
      for (int i = 0; i < n; ++i) visible += (i ? "," : "") + std::to_string(ids[static_cast<size_t>(i)]);
      L.per_host.push_back({h.hosts[k].name, n, visible});
      left -= n;
    }
  } else {
    if (!f.include.empty() || !f.exclude.empty())
      fail(f.include.empty() ? "--exclude" : "--include", "needs --hostfile (it selects hosts of the hostfile)");
    check_local_ranks(L.np, "dp x pp x tp = " + std::to_string(L.np) + " ranks");
    L.ranks_per_host = L.np;
    L.oversubscribe = L.np > cores;
  }
  check_cuda_here(cfg, f.hostfile.empty() ? L.np : 0);
  check_layout_against_model(cfg, L.np, use);
  // Each rank gets its share of the cores unless the config says otherwise: OpenMP threads of
  // ranks on one host that add up to more than its cores slow every rank down.
  if (cfg.training.threads == 0 && !find_override(L.overrides, "training.threads")) {
    set_override(L.overrides, "training.threads", std::to_string(std::max(1, cores / std::max(1, L.ranks_per_host))));
    cfg.training.threads = std::max(1, cores / std::max(1, L.ranks_per_host));
  }
  L.cfg = cfg;
  return L;
}

}  // namespace gt
