#include "eval/eval_progress.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/json_file.hpp"
#include "common/sha256.hpp"

namespace gt {

namespace {

constexpr const char* kFormat = "graphtune eval progress 1";

std::string manifest_path(const std::string& dir) { return dir + "/manifest.json"; }

// Head and tail of a file, or all of it when small: see content_signature.
std::string file_digest(const std::string& path) {
  constexpr int64_t kWhole = 64ll << 20, kEnd = 1ll << 20;
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, "cannot open (missing or unreadable)");
  f.seekg(0, std::ios::end);
  const int64_t size = f.tellg();
  std::string bytes = std::to_string(size) + ":";
  auto take = [&](int64_t at, int64_t n) {
    std::string chunk(static_cast<size_t>(n), '\0');
    f.seekg(at);
    f.read(chunk.data(), n);
    bytes += chunk;
  };
  if (size <= kWhole) {
    take(0, size);
  } else {
    take(0, kEnd);
    take(size - kEnd, kEnd);
  }
  return sha256_hex(bytes);
}

}  // namespace

std::string content_signature(const std::string& path) {
  if (path.empty()) return "";
  if (!is_directory(path)) return "sha256:" + file_digest(path);
  std::string all;
  for (const std::string& name : list_dir(path)) {
    const std::string p = join_path(path, name);
    if (is_directory(p)) continue;  // a model folder's files are at its top
    all += name + "=" + file_digest(p) + "\n";
  }
  return "sha256:" + sha256_hex(all);
}

EvalProgress::EvalProgress(const std::string& out_dir) : dir_(out_dir + "/progress") {}

bool EvalProgress::interrupted() const { return path_exists(manifest_path(dir_)); }

int64_t EvalProgress::batches() const {
  const nlohmann::json m = read_json_object(manifest_path(dir_));
  if (m.value("format", "") != kFormat || !m.contains("batches") || !m["batches"].is_number_integer())
    fail(manifest_path(dir_), "is not a graphtune eval's progress manifest (remove " + dir_ + " or use --overwrite)");
  return m["batches"].get<int64_t>();
}

std::string EvalProgress::changed(const EvalFingerprint& now) const {
  const nlohmann::json m = read_json_object(manifest_path(dir_));
  const nlohmann::json& was = m.contains("fingerprint") ? m["fingerprint"] : nlohmann::json::object();
  for (const auto& [key, value] : now) {
    if (!was.contains(key) || !was[key].is_string()) return key + " (the interrupted eval did not record it)";
    const std::string before = was[key].get<std::string>();
    if (before != value) {
      // Paths and settings read well as they are; digests only as "changed".
      const bool digest = value.rfind("sha256:", 0) == 0 && before.rfind("sha256:", 0) == 0;
      return key + (digest ? " (its content differs)" : " (was \"" + before + "\", now \"" + value + "\")");
    }
  }
  return "";
}

void EvalProgress::start(const EvalFingerprint& fingerprint, int64_t batches) const {
  remove_tree(dir_);
  make_dirs(dir_);
  nlohmann::ordered_json m;
  m["format"] = kFormat;
  m["batches"] = batches;
  nlohmann::ordered_json f = nlohmann::ordered_json::object();
  for (const auto& [key, value] : fingerprint) f[key] = value;
  m["fingerprint"] = f;
  write_file_atomic(manifest_path(dir_), m.dump(2) + "\n");
}

std::string EvalProgress::batch_path(int64_t batch) const {
  char name[48];
  std::snprintf(name, sizeof(name), "/batch_%08lld.json", static_cast<long long>(batch));
  return dir_ + name;
}

std::vector<bool> EvalProgress::committed(int64_t batches) const {
  std::vector<bool> done(static_cast<size_t>(batches), false);
  for (const std::string& name : list_dir(dir_)) {
    long long k = -1;
    char tail = 0;
    // Only whole files: a temporary one (batch_N.json.tmp.PID) has more after ".json".
    if (std::sscanf(name.c_str(), "batch_%lld.jso%c", &k, &tail) == 2 && tail == 'n' && ends_with(name, ".json") &&
        k >= 0 && k < batches)
      done[static_cast<size_t>(k)] = true;
  }
  return done;
}

int64_t EvalProgress::new_attempt() const {
  int64_t n = 0;
  for (const std::string& name : list_dir(dir_)) n += name.rfind("claims_", 0) == 0 ? 1 : 0;
  make_dirs(dir_ + "/claims_" + std::to_string(n));
  return n;
}

bool EvalProgress::claim(int64_t attempt, int64_t batch) const {
  const std::string path = dir_ + "/claims_" + std::to_string(attempt) + "/batch_" + std::to_string(batch);
  const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  if (errno == EEXIST) return false;
  fail_io(path, "cannot create");
}

void EvalProgress::commit(int64_t batch, const std::vector<EvalAnswer>& answers) const {
  nlohmann::json rows = nlohmann::json::array();
  for (const EvalAnswer& a : answers) rows.push_back({{"example", a.example}, {"tokens", a.tokens}});
  write_file_atomic(batch_path(batch), nlohmann::json{{"batch", batch}, {"answers", rows}}.dump() + "\n");
}

std::vector<EvalAnswer> EvalProgress::read(int64_t batch) const {
  const std::string path = batch_path(batch);
  const nlohmann::json j = read_json_object(path);
  std::vector<EvalAnswer> out;
  try {
    if (j.at("batch").get<int64_t>() != batch) fail(path, "holds batch " + j.at("batch").dump());
    for (const auto& row : j.at("answers")) out.push_back({row.at("example").get<size_t>(), row.at("tokens").get<std::vector<int32_t>>()});
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("is not an eval batch file: ") + e.what());
  }
  return out;
}

void EvalProgress::remove() const { remove_tree(dir_); }

}  // namespace gt
