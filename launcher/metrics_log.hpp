#pragma once
// metrics.jsonl in the run folder: one JSON object per line, each line written whole with one
// write(2) and on disk as soon as it is written, so `tail -f` follows a run live and a reader
// never sees half a record.
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace gt {

class MetricsLog {
 public:
  // append=false starts the file afresh (a new run); true continues it (a resumed run).
  // InputError naming the path when it cannot be opened.
  MetricsLog(const std::string& path, bool append);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  // A failed write (a full disk) leaves no partial line behind, is said once on stderr and is
  // not thrown: training must not die because its log disk filled.
  void write(const nlohmann::json& record);

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  bool failed_ = false;
};

}  // namespace gt
