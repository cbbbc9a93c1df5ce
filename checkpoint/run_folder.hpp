#pragma once
// A run folder belongs to one job, and what a run committed there is never removed by a failure.
// Torch-free: the launcher takes the folder and judges it before anything starts; the worker does
// the same when mpirun starts it without the launcher.
#include <cstdio>
#include <string>
#include <vector>

namespace gt {

// What a run folder holds of a run's committed work, by name: its committed checkpoints (in
// `checkpoint_dir`, which may lie elsewhere; "" for none) and the outputs a finished phase or an
// evaluation writes (model/, graph_projector.bin, graph_encoder.safetensors, eval/metrics.json).
// Logs, train_log.jsonl and uncommitted checkpoint folders are not: nothing is lost with them.
std::vector<std::string> committed_work(const std::string& run_dir, const std::string& checkpoint_dir);

// An exclusive lock on RUN_DIR/graphtune.lock (flock), held while the object lives: the folder
// (created when absent) is this job's. The file names its holder ("host H, pid P, started T:
// WHAT") and goes when the holder lets go. A live holder is an InputError naming it. The file of a
// holder that died (flock is released when its process ends) is taken over, and say_taken_over()
// says whose it was.
class RunFolderLock {
 public:
  RunFolderLock(const std::string& run_dir, const std::string& what);
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

  // "graphtune: RUN/graphtune.lock was left by a job that no longer runs (WHOSE): taken over" on
  // `out`, when it was; nothing otherwise.
  void say_taken_over(std::FILE* out) const;
  static constexpr const char* kFile = "graphtune.lock";

 private:
  std::string path_;
  int fd_ = -1;
  std::string previous_;
};

// A new job into `run_dir`: refused while it holds another run's committed work, unless the job
// resumes that run (`resume`) or replaces it (`overwrite`, as Hugging Face's Trainer asks for
// overwrite_output_dir). InputError naming the folder and what it holds.
void check_run_folder(const std::string& run_dir, const std::string& checkpoint_dir, bool resume, bool overwrite);

// The InputError for `folder` holding `work` (a few of its names), saying `how` to go on.
[[noreturn]] void refuse_committed_work(const std::string& folder, const std::vector<std::string>& work,
                                        const std::string& how);

// With overwrite, under the folder's lock: the earlier run's files go (the lock file stays).
void clear_run_folder(const std::string& run_dir, const std::string& checkpoint_dir);

// After a job whose workers rejected their input: the folder this job made goes, unless something
// in it was committed; when any step ran, logs/ stays to explain what happened.
void remove_uncommitted_run(const std::string& run_dir, const std::string& checkpoint_dir, bool steps_ran);

}  // namespace gt
