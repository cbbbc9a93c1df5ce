#include "train/train_checkpoint.hpp"

#include <sys/stat.h>

#include <torch/torch.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint_dir.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/sha256.hpp"
#include "control/control_client.hpp"
#include "control/control_protocol.hpp"
#include "parallel/parallel_runtime.hpp"
#include "weights/checkpoint_shards.hpp"

namespace gt {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::vector<int64_t> global_shape(const CheckpointedTensor& t, int tp) {
  std::vector<int64_t> s = t.tensor.sizes().vec();
  if (t.tp_dim >= 0) s[static_cast<size_t>(t.tp_dim)] *= tp;
  return s;
}

// Every rank's string, in rank order (the shards' descriptions travel to the rank that commits).
std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine) {
  auto len = torch::tensor({static_cast<int64_t>(mine.size())}, torch::kInt64);
  auto lens = comm.all_gather(len);
  const int64_t longest = lens.max().item<int64_t>();
  auto buf = torch::zeros({longest}, torch::kUInt8);
  std::memcpy(buf.data_ptr(), mine.data(), mine.size());
  auto all = comm.all_gather(buf);
  std::vector<std::string> out;
  for (int r = 0; r < comm.size(); ++r)
    out.emplace_back(reinterpret_cast<const char*>(all.data_ptr<uint8_t>()) + r * longest,
                     static_cast<size_t>(lens[r].item<int64_t>()));
  return out;
}

nlohmann::json shard_json(const ckpt::WrittenShard& w, const std::string& file) {
  nlohmann::json j;
  j["file"] = file;
  j["rank"] = w.file.rank;
  j["bytes"] = w.file.bytes;
  j["crc32"] = w.file.crc32;
  for (const auto& [key, e] : w.tensors) {
    const ckpt::Chunk& c = e.chunks.at(0);
    j["tensors"][key] = {{"dtype", e.dtype}, {"shape", e.shape}, {"begin", c.begin},
                         {"end", c.end}, {"offset", c.offset}, {"box", c.shape}};
  }
  return j;
}

// Adds one rank's shard (as shard_json wrote it) to the index.
void add_shard(ckpt::Index& index, const nlohmann::json& j) {
  if (j.value("bytes", uint64_t{0}) == 0) return;  // a rank that had nothing to write
  const std::string file = j.at("file");
  index.files[file] = ckpt::FileEntry{j.at("rank").get<int>(), j.at("bytes").get<uint64_t>(), j.at("crc32").get<uint32_t>()};
  for (const auto& [key, t] : j.at("tensors").items()) {
    ckpt::TensorEntry& e = index.tensors[key];
    e.dtype = t.at("dtype");
    e.shape = t.at("shape").get<std::vector<int64_t>>();
    e.chunks.push_back({file, t.at("begin").get<uint64_t>(), t.at("end").get<uint64_t>(),
                        t.at("offset").get<std::vector<int64_t>>(), t.at("box").get<std::vector<int64_t>>()});
  }
}

// Fault injection for the tests: GRAPHTUNE_TEST_KILL_IN_SAVE=RANK:STEP kills that rank after it
// has written its shard of that step's checkpoint, before the commit. Only in a run that did not
// resume: a job restarted by the launcher inherits the variable, and must get past that step.
bool killed_in_save(int rank, int64_t step) {
  const char* v = std::getenv("GRAPHTUNE_TEST_KILL_IN_SAVE");
  if (!v) return false;
  return std::to_string(rank) + ":" + std::to_string(step) == v;
}

// Fault injection for the tests: GRAPHTUNE_TEST_DISK_FULL_IN_SAVE=RANK:STEP fails that rank's
// shard write of that step's checkpoint as a full disk does (ENOSPC), in a run that did not
// resume: what a failed write leaves behind, and a resume after it, are then testable without a
// small file system.
bool disk_full_in_save(int rank, int64_t step) {
  const char* v = std::getenv("GRAPHTUNE_TEST_DISK_FULL_IN_SAVE");
  if (!v) return false;
  return std::to_string(rank) + ":" + std::to_string(step) == v;
}

// Whether two paths name the same existing folder (spelled differently, or through links).
bool same_file(const std::string& a, const std::string& b) {
  struct stat sa {}, sb {};
  return !a.empty() && !b.empty() && ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

std::map<std::string, std::string> checkpoint_config(const JobConfig& c) {
  std::map<std::string, std::string> m = {
      {"training.stage", name_of(c.training.stage)},
      {"training.batch_size", std::to_string(c.training.batch_size)},
      {"training.seed", std::to_string(c.training.seed)},
      {"training.trainable", name_of(c.training.trainable)},
      {"training.max_grad_norm", number(c.training.max_grad_norm)},
      {"model.path", c.model.path},
      {"model.dtype", name_of(c.model.dtype)},
      {"model.tokenizer", c.model.tokenizer},
      {"optimizer.lr", number(c.optimizer.lr)},
      {"optimizer.weight_decay", number(c.optimizer.weight_decay)},
      {"optimizer.beta1", number(c.optimizer.beta1)},
      {"optimizer.beta2", number(c.optimizer.beta2)},
      {"optimizer.eps", number(c.optimizer.eps)},
      {"lr_scheduler.warmup_ratio", number(c.lr_scheduler.warmup_ratio)},
      {"lr_scheduler.min_lr_ratio", number(c.lr_scheduler.min_lr_ratio)},
  };
  if (c.training.stage == Phase::kLm) {
    if (c.model.path.empty()) {  // a fresh model: its shape is the config's
      for (auto [key, v] : {std::pair{"dim", c.model.dim}, {"n_layers", c.model.n_layers}, {"n_heads", c.model.n_heads},
                            {"n_kv_heads", c.model.n_kv_heads}, {"hidden_dim", c.model.hidden_dim}, {"vocab_size", c.model.vocab_size}})
        m[std::string("model.") + key] = std::to_string(v);
    }
    m["training.seq_len"] = std::to_string(c.training.seq_len);
    m["data.source"] = c.data.source;
    m["data.instructions"] = c.data.instructions;
  } else {
    m["data.instructions"] = c.data.instructions;
    m["data.graph"] = c.data.graph;
    m["data.max_len"] = std::to_string(c.data.max_len);
    m["data.template"] = c.data.chat_template;
    m["model.graph_encoder"] = c.model.graph_encoder;
    m["model.graph_encoder_prefix"] = c.model.graph_encoder_prefix;
    m["model.graph_encoder_type"] = c.model.graph_encoder_type;
    if (c.model.graph_encoder_type == "llaga") {  // a fresh llaga encoder's tree
      m["model.llaga_hops"] = std::to_string(c.model.llaga_hops);
      m["model.llaga_fanout"] = std::to_string(c.model.llaga_fanout);
    }
    if (c.model.graph_encoder_type == "hop_field") {  // a fresh hop_field encoder's hops, rows, projector and base
      m["model.hop_field_hops"] = std::to_string(c.model.hop_field_hops);
      m["model.hop_field_rows"] = c.model.hop_field_rows;
      m["model.hop_field_projector"] = c.model.hop_field_projector;
      m["model.hop_field_base"] = c.model.hop_field_base;
    }
    m["data.features"] = c.data.features;
    // They decide which records each step reads and the encoder's masks: a resume that changed
    // them would not continue the run it names.
    m["data.group_by_length"] = c.data.group_by_length ? "true" : "false";
    m["model.encoder_dropout"] = number(c.model.encoder_dropout);
    m["model.adapter"] = c.model.adapter;
    if (c.training.trains_encoder()) {
      m["optimizer.encoder_lr"] = number(c.optimizer.encoder_lr);
      m["optimizer.encoder_weight_decay"] = number(c.optimizer.encoder_weight_decay);
    }
    if (c.training.trains_lora()) {  // the adapters' shapes and scale
      std::string targets;
      for (const auto& t : c.lora.targets) targets += (targets.empty() ? "" : ",") + t;
      m["lora.rank"] = std::to_string(c.lora.rank);
      m["lora.alpha"] = number(c.lora.alpha);
      m["lora.targets"] = targets;
    }
  }
  return m;
}

ResumePoint find_resume_point(const JobConfig& cfg) {
  ResumePoint rp;
  if (cfg.checkpoint.resume.empty()) return rp;
  rp.folder = ckpt::resolve_checkpoint(cfg.checkpoint.dir, cfg.checkpoint.resume);
  rp.index = ckpt::read_index(rp.folder);
  const std::string where = rp.folder + "/index.json";
  // Keys later versions record: a checkpoint written before them ran with what their absence means.
  const std::map<std::string, std::string> absent_means = {
      {"model.adapter", ""}, {"data.group_by_length", "false"}, {"model.encoder_dropout", number(0.0)},
      {"model.graph_encoder_type", "gt"}, {"model.hop_field_rows", "as_is"},
      {"model.hop_field_projector", "shared"}};
  for (const auto& [key, value] : checkpoint_config(cfg)) {
    auto it = rp.index.config.find(key);
    auto old = absent_means.find(key);
    const std::string saved = it != rp.index.config.end() ? it->second
                              : old != absent_means.end()   ? old->second
                                                            : "(unset)";
    if (saved != value)
      fail(where, "saved with " + key + " = \"" + saved + "\", this job has \"" + value +
                      "\" (a resume continues the same run; start a new one to change it)");
  }
  return rp;
}

std::string model_fingerprint(const std::map<std::string, std::vector<int64_t>>& shapes) {
  std::string s;
  for (const auto& [name, shape] : shapes) s += name + ckpt::shape_text(shape) + ";";
  return sha256_hex(s);
}

TrainCheckpoint::TrainCheckpoint(const ParallelRuntime& rt, const JobConfig& cfg, int64_t total_steps,
                                 std::vector<CheckpointedTensor> tensors, std::string model_fingerprint)
    : rt_(rt), cfg_(cfg), total_steps_(total_steps), tensors_(std::move(tensors)),
      fingerprint_(std::move(model_fingerprint)) {}

int64_t TrainCheckpoint::resume() {
  const ResumePoint rp = find_resume_point(cfg_);
  if (rp.folder.empty()) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string where = rp.folder + "/index.json";
  const ckpt::Index& index = rp.index;
  if (index.model_fingerprint != fingerprint_)
    fail(where, "saved from another model (its weights' names or shapes differ from this job's)");
  if (index.total_steps != total_steps_)
    fail(where, "saved by a run of " + std::to_string(index.total_steps) + " steps, this job has " +
                    std::to_string(total_steps_) + " (a resume continues the same run)");
  ckpt::CheckpointReader reader(rp.folder);
  const int tp = rt_.shape.tp;
  torch::NoGradGuard ng;
  for (const CheckpointedTensor& t : tensors_) {
    const std::string key = weight_key(t.name);
    if (!reader.contains(key)) {
      if (t.trainable) fail(rp.folder, "has no tensor \"" + key + "\", which this job trains");
      continue;  // a frozen weight the run did not save: it came from [model], as it does now
    }
    const std::vector<int64_t> shape = global_shape(t, tp);
    if (index.tensors.at(key).shape != shape)
      fail(where, "tensor \"" + key + "\" has shape " + ckpt::shape_text(index.tensors.at(key).shape) + ", this job's is " +
                      ckpt::shape_text(shape));
    const ckpt::Box box = ckpt::tp_box(shape, t.tp_dim, rt_.coord.tp, tp);
    t.tensor.copy_(reader.read(key, box));
    const std::string optim = "optim/" + t.name;
    if (t.trainable && reader.contains(optim + "/exp_avg")) {
      Moments& m = pending_[t.name];
      m.exp_avg = reader.read(optim + "/exp_avg", box).to(t.tensor.options());
      m.exp_avg_sq = reader.read(optim + "/exp_avg_sq", box).to(t.tensor.options());
      m.step = reader.read(optim + "/step").item<int64_t>();
    }
  }
  // The generator states belong to ranks of the saved layout; at another layout they mean
  // nothing (the trainers draw nothing from them: data order is a function of seed and step).
  const ckpt::Layout here{rt_.shape.dp, rt_.shape.pp, rt_.shape.tp, rt_.partition};
  const bool same_layout = index.layout == here;
  const std::string rng_key = "rng/rank_" + std::to_string(rt_.world_rank);
  if (same_layout && reader.contains(rng_key)) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();  // a handle to the process's generator
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(reader.read(rng_key));
  }
  first_step_ = index.step;
  resumed_from_ = rp.folder;
  rt_.host.world->barrier();
  if (rt_.reports())
    std::fprintf(stderr, "graphtune: resumed from %s at step %lld (saved at %s%s); rank 0 read %.1f MiB in %.2f s\n",
                 rp.folder.c_str(), static_cast<long long>(index.step), index.layout.str().c_str(),
                 same_layout ? "" : ", resharded", static_cast<double>(reader.bytes_read()) / (1 << 20),
                 seconds_since(t0));
  return first_step_;
}

TrainLoopHooks TrainCheckpoint::hooks() {
  TrainLoopHooks h;
  h.first_step = first_step_;
  h.rank = rt_.world_rank;
  h.restore = [this](torch::optim::AdamW* opt) {
    restore_optimizer(opt);
    // A run resumed at its last step trains nothing; at another layout or into another folder,
    // it still saves what it loaded: that is how a checkpoint is resharded (and tested exact).
    if (cfg_.checkpoint.every > 0 && first_step_ > 0 && first_step_ == total_steps_) save(first_step_, opt);
  };
  if (cfg_.checkpoint.every > 0)
    h.after_step = [this](int64_t done, torch::optim::AdamW* opt) {
      if (done % cfg_.checkpoint.every == 0 || done == total_steps_) save(done, opt);
    };
  if (!control::connected()) return h;
  if (rt_.reports())
    h.on_step = [this](const StepLog& l) {
      control::StepMetrics m;
      m.step = l.step;
      m.steps = total_steps_;
      m.loss = l.loss;
      m.lr = l.lr;
      m.grad_norm = l.grad_norm;
      m.tokens_per_s = l.tokens_per_s;
      control::report_step(m);
    };
  // Every rank asks every step, so they all stop after the same one: one rank's stop request
  // is everyone's (one 8-byte all-reduce a step).
  h.should_stop = [this] {
    auto flag = torch::tensor({int64_t{control::stop_requested() ? 1 : 0}}, torch::kInt64);
    rt_.host.world->all_reduce_sum(flag);
    return flag.item<int64_t>() > 0;
  };
  h.save_now = [this](int64_t done, torch::optim::AdamW* opt) {
    if (last_saved_ != done) save(done, opt);
  };
  return h;
}

void TrainCheckpoint::restore_optimizer(torch::optim::AdamW* opt) {
  if (!opt || pending_.empty()) return;
  for (const CheckpointedTensor& t : tensors_) {
    auto it = pending_.find(t.name);
    if (!t.trainable || it == pending_.end()) continue;
    // libtorch's AdamW keeps its state by the parameter's TensorImpl and creates it on the
    // first step; one put there first is used as if it had been created by earlier steps.
    auto st = std::make_unique<torch::optim::AdamWParamState>();
    st->step(it->second.step);
    st->exp_avg(it->second.exp_avg);
    st->exp_avg_sq(it->second.exp_avg_sq);
    opt->state()[t.tensor.unsafeGetTensorImpl()] = std::move(st);
  }
  pending_.clear();
}

void TrainCheckpoint::save(int64_t step, torch::optim::AdamW* opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string folder = join_path(cfg_.checkpoint.dir, ckpt::step_folder_name(step));
  if (same_file(folder, resumed_from_)) return;  // it is already on disk, and is being read from
  if (rt_.reports()) {
    // A folder of this step from an earlier attempt (a killed save, or a run resumed from an
    // older checkpoint) is replaced: uncommitted first, so `latest` never names it half-written.
    if (path_exists(folder + "/index.json")) std::remove((folder + "/index.json").c_str());
    remove_tree(folder);
    make_dirs(folder);
  }
  rt_.host.world->barrier();

  const int dp = rt_.shape.dp, tp = rt_.shape.tp;
  std::vector<ckpt::SavedTensor> mine;
  int64_t ordinal = 0;
  for (const CheckpointedTensor& t : tensors_) {
    if (!t.save || (!t.trainable && !cfg_.checkpoint.save_frozen)) continue;
    // The ranks holding this same box: the dp replicas (and, for an unsplit tensor, the tp
    // ranks too). The i-th tensor of the list goes to holder i mod holders.
    const bool split = t.tp_dim >= 0;
    const int64_t holders = split ? dp : int64_t{dp} * tp;
    const int64_t me = split ? rt_.coord.dp : int64_t{rt_.coord.dp} * tp + rt_.coord.tp;
    if (ordinal++ % holders != me) continue;
    const std::vector<int64_t> shape = global_shape(t, tp);
    const ckpt::Box box = ckpt::tp_box(shape, t.tp_dim, rt_.coord.tp, tp);
    mine.push_back({weight_key(t.name), t.tensor.detach(), shape, box.offset});
    if (!t.trainable || !opt) continue;
    auto it = opt->state().find(t.tensor.unsafeGetTensorImpl());
    if (it == opt->state().end()) continue;  // no step taken yet
    auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
    mine.push_back({"optim/" + t.name + "/exp_avg", st.exp_avg(), shape, box.offset});
    mine.push_back({"optim/" + t.name + "/exp_avg_sq", st.exp_avg_sq(), shape, box.offset});
    if (!split || rt_.coord.tp == 0)  // one step count, however the moments are split
      mine.push_back({"optim/" + t.name + "/step", torch::tensor({st.step()}, torch::kInt64), {1}, {0}});
  }
  const auto generator = at::detail::getDefaultCPUGenerator().get_state();
  mine.push_back({"rng/rank_" + std::to_string(rt_.world_rank), generator, generator.sizes().vec(), {}});

  if (first_step_ == 0 && disk_full_in_save(rt_.world_rank, step))
    fail_io(join_path(folder, ckpt::shard_file_name(rt_.world_rank)), "write failed", ENOSPC);
  const ckpt::WrittenShard shard = ckpt::write_shard(folder, rt_.world_rank, mine);
  const double write_s = seconds_since(t0);
  if (first_step_ == 0 && killed_in_save(rt_.world_rank, step)) std::raise(SIGKILL);
  const auto shards = all_gather_strings(*rt_.host.world, shard_json(shard, ckpt::shard_file_name(rt_.world_rank)).dump());

  if (rt_.reports()) {
    ckpt::Index index;
    index.step = step;
    index.total_steps = total_steps_;
    index.stage = cfg_.training.stage;
    index.layout = {rt_.shape.dp, rt_.shape.pp, rt_.shape.tp, rt_.partition};
    index.model_fingerprint = fingerprint_;
    index.config = checkpoint_config(cfg_);
    uint64_t bytes = 0;
    for (const std::string& s : shards) add_shard(index, nlohmann::json::parse(s));
    for (const std::string& f : files_) {
      const std::string name = f.substr(f.rfind('/') + 1);
      index.files[name] = ckpt::copy_into_checkpoint(f, folder, name, rt_.world_rank);
    }
    for (const auto& [name, text] : contents_)
      index.files[name] = ckpt::write_into_checkpoint(text, folder, name, rt_.world_rank);
    for (const auto& [name, f] : index.files) bytes += f.bytes;
    ckpt::commit_index(folder, index);
    if (cfg_.checkpoint.keep_latest > 0) ckpt::prune_checkpoints(cfg_.checkpoint.dir, static_cast<int>(cfg_.checkpoint.keep_latest));
    std::fprintf(stderr,
                 "graphtune: checkpoint step %lld committed: %s (%.1f MiB in %zu shards; rank 0 wrote %.1f MiB in "
                 "%.2f s, %.2f s in all)\n",
                 static_cast<long long>(step), folder.c_str(), static_cast<double>(bytes) / (1 << 20),
                 index.files.size(), static_cast<double>(shard.file.bytes) / (1 << 20), write_s, seconds_since(t0));
  }
  if (rt_.reports()) control::report_checkpoint(step, folder);
  last_saved_ = step;
  rt_.host.world->barrier();  // the next save (or the exit) waits for this commit
}

}  // namespace gt
