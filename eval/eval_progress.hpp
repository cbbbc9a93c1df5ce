#pragma once
// An evaluation's answers, committed as they are produced, so that an eval that was stopped or
// killed continues where it stopped (--resume), at the same or another number of ranks:
//   OUT/progress/manifest.json   what is being evaluated (the fingerprint: the records' file, the
//                                model, projector, adapter, encoder and features, and every
//                                setting an answer depends on) and into how many batches;
//   OUT/progress/batch_<k>.json  batch k's answers (token ids), written whole or not at all
//                                (common/atomic_file.hpp) by the rank that generated them;
//   OUT/progress/claims_<a>/     attempt a's claims: a replica that starts batch k first
//                                creates batch_<k> here (O_CREAT | O_EXCL), so each batch is
//                                answered once while the replicas take the next one as they
//                                free up. A new attempt claims afresh: what a dead one claimed
//                                and never committed is answered again.
// The result files (predictions.jsonl, metrics.json, graphgpt/) are written only from a complete
// set, after which progress/ goes: a folder holds either a finished eval's results or an
// interrupted eval's progress, never a partial result that looks whole. Ranks on several hosts
// write into the same folder, so it must lie on a file system they share, as sharded checkpoints
// do.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace gt {

struct EvalAnswer {
  size_t example = 0;            // which prompt (the record's index)
  std::vector<int32_t> tokens;   // its answer, the end token excluded
};

// What an eval's answers depend on, entry by entry ("[data].instructions": the file's SHA-256,
// ...), in a fixed order; compared on --resume.
using EvalFingerprint = std::vector<std::pair<std::string, std::string>>;

class EvalProgress {
 public:
  explicit EvalProgress(const std::string& out_dir);
  const std::string& dir() const { return dir_; }

  // An interrupted eval is there: its manifest.
  bool interrupted() const;
  // The batches its manifest names (interrupted() must hold); InputError naming the file when
  // it is not one.
  int64_t batches() const;
  // "" when the manifest's fingerprint equals `now`; else the first entry that differs, with
  // what it was ("[data].instructions (its content differs)").
  std::string changed(const EvalFingerprint& now) const;
  // A fresh eval: any earlier progress goes, and the manifest is written.
  void start(const EvalFingerprint& fingerprint, int64_t batches) const;
  // Which of the batches are committed.
  std::vector<bool> committed(int64_t batches) const;
  void commit(int64_t batch, const std::vector<EvalAnswer>& answers) const;
  // A new attempt's claims folder (world rank 0, before the others claim); its number.
  int64_t new_attempt() const;
  // Whether this caller is the first to claim `batch` in `attempt`.
  bool claim(int64_t attempt, int64_t batch) const;
  // Batch k's answers; InputError naming the file when it is not a batch file of this eval.
  std::vector<EvalAnswer> read(int64_t batch) const;
  void remove() const;

 private:
  std::string batch_path(int64_t batch) const;
  std::string dir_;
};

// A file's or folder's content in a few bytes, cheap even for a model of many GiB: "sha256:" and
// the SHA-256 of each file's name and size, and of its first and last MiB (the whole file when it
// is smaller than 64 MiB). A retrained or re-exported model differs there; a copy of the same one
// does not.
std::string content_signature(const std::string& path);

}  // namespace gt
