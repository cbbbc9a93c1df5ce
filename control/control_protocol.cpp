#include "control/control_protocol.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <utility>

#include <nlohmann/json.hpp>

namespace gt::control {
namespace {

using nlohmann::json;

// The peer is untrusted: every field is checked for presence and type, and the first problem
// found is the answer. A Reader collects it so the per-type parsers read like the protocol.
class Reader {
 public:
  explicit Reader(const json& object) : object_(object) {}

  bool ok() const { return problem_.empty(); }
  const std::string& problem() const { return problem_; }

  std::string string(const char* key) {
    const json* v = field(key);
    if (!v) return {};
    if (!v->is_string()) return complain(key, "is not a string"), std::string();
    return v->get<std::string>();
  }

  // Integers in [lo, hi]; a JSON number with a fraction or exponent, or one past int64, is no
  // integer (nlohmann parses 1e3 and 2^64 as doubles).
  int64_t integer(const char* key, int64_t lo, int64_t hi) {
    const json* v = field(key);
    if (!v) return 0;
    if (v->is_number_unsigned()) {
      const uint64_t u = v->get<uint64_t>();
      if (u > static_cast<uint64_t>(hi) || static_cast<int64_t>(u) < lo) return complain(key, "is out of range"), 0;
      return static_cast<int64_t>(u);
    }
    if (!v->is_number_integer()) return complain(key, "is not an integer"), 0;
    const int64_t i = v->get<int64_t>();
    if (i < lo || i > hi) return complain(key, "is out of range"), 0;
    return i;
  }

  // Numbers, or null for a value JSON cannot carry (a diverged loss is NaN; nlohmann writes
  // NaN and infinities as null, so null reads back as NaN).
  double number(const char* key) {
    const json* v = field(key);
    if (!v) return 0;
    if (v->is_null()) return std::numeric_limits<double>::quiet_NaN();
    if (!v->is_number()) return complain(key, "is not a number"), 0.0;
    return v->get<double>();
  }

  // An optional number: 0 when absent.
  double optional_number(const char* key) { return object_.contains(key) ? number(key) : 0.0; }

  const json* object(const char* key) {
    const json* v = field(key);
    if (v && !v->is_object()) return complain(key, "is not an object"), nullptr;
    return v;
  }

 private:
  const json* field(const char* key) {
    if (!ok()) return nullptr;
    auto it = object_.find(key);
    if (it == object_.end()) return complain(key, "is missing"), nullptr;
    return &*it;
  }
  void complain(const char* key, const char* what) {
    if (ok()) problem_ = std::string("\"") + key + "\" " + what;
  }

  const json& object_;
  std::string problem_;
};

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

void read_hello(Reader& r, Hello& h) {
  h.token = r.string("token");
  h.rank = static_cast<int>(r.integer("rank", 0, kMaxInt));
  h.world = static_cast<int>(r.integer("world", 1, kMaxInt));
  h.host = r.string("host");
  h.local_rank = static_cast<int>(r.integer("local_rank", 0, kMaxInt));
  h.device = r.string("device");
  h.pid = r.integer("pid", 1, kMaxInt64);
}

void read_rss(Reader& r, StepMetrics& m) {
  m.rss_mib = r.number("rss_mib");
  m.peak_rss_mib = r.number("peak_rss_mib");
  m.gpu_peak_allocated_mib = r.optional_number("gpu_peak_allocated_mib");
  m.gpu_peak_reserved_mib = r.optional_number("gpu_peak_reserved_mib");
}

void read_step(Reader& r, StepMetrics& m) {
  m.step = r.integer("step", 0, kMaxInt64);
  m.steps = r.integer("steps", 0, kMaxInt64);
  m.loss = r.number("loss");
  m.lr = r.number("lr");
  m.grad_norm = r.number("grad_norm");
  m.tokens_per_s = r.number("tokens_per_s");
  read_rss(r, m);
}

// Strings a worker sends may hold anything (an exception's text quoting a file name): invalid
// UTF-8 becomes U+FFFD instead of an exception, because reporting must never throw.
std::string line_of(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json number_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

}  // namespace

ParseResult parse_worker_message(const std::string& line) {
  ParseResult result;
  if (line.empty()) return result.problem = "empty line", result;
  // nlohmann would end the text at a NUL byte and accept what came before; JSON text never
  // holds one (inside strings it is escaped), so the whole line is refused.
  if (line.find('\0') != std::string::npos) return result.problem = "not JSON (a NUL byte)", result;
  // nlohmann rejects invalid UTF-8 inside strings and numbers that overflow a double.
  const json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return result.problem = "not JSON", result;
  if (!j.is_object()) return result.problem = "not a JSON object", result;
  auto type_it = j.find("type");
  if (type_it == j.end()) return result.problem = "\"type\" is missing", result;
  if (!type_it->is_string()) return result.problem = "\"type\" is not a string", result;
  const std::string type = type_it->get<std::string>();

  WorkerMessage m;
  Reader r(j);
  if (type == "hello") {
    m.kind = Kind::kHello;
    read_hello(r, m.hello);
    if (r.ok() && m.hello.rank >= m.hello.world) return result.problem = "\"rank\" is not below \"world\"", result;
  } else if (type == "device") {
    m.kind = Kind::kDevice;
    m.text = r.string("device");
  } else if (type == "heartbeat") {
    m.kind = Kind::kHeartbeat;
    read_rss(r, m.metrics);
  } else if (type == "step") {
    m.kind = Kind::kStep;
    read_step(r, m.metrics);
  } else if (type == "checkpoint") {
    m.kind = Kind::kCheckpoint;
    m.step = r.integer("step", 0, kMaxInt64);
    m.text = r.string("path");
  } else if (type == "eval_progress") {
    m.kind = Kind::kEvalProgress;
    m.eval.answered = r.integer("answered", 0, kMaxInt64);
    m.eval.resumed = r.integer("resumed", 0, kMaxInt64);
    m.eval.records = r.integer("records", 0, kMaxInt64);
    read_rss(r, m.metrics);
  } else if (type == "eval") {
    m.kind = Kind::kEval;
    if (const json* metrics = r.object("metrics")) m.text = line_of(*metrics);
  } else if (type == "error") {
    m.kind = Kind::kError;
    m.text = r.string("message");
  } else if (type == "done") {
    m.kind = Kind::kDone;
  } else if (type == "stopped") {
    m.kind = Kind::kStopped;
    m.step = r.integer("step", 0, kMaxInt64);
  } else {
    return result.problem = "unknown type " + line_of(json(type)), result;  // quoted and escaped
  }
  if (!r.ok()) return result.problem = type + ": " + r.problem(), result;
  result.message = std::move(m);
  return result;
}

std::string encode_hello(const Hello& h) {
  return line_of({{"type", "hello"}, {"token", h.token}, {"rank", h.rank}, {"world", h.world}, {"host", h.host},
                  {"local_rank", h.local_rank}, {"device", h.device}, {"pid", h.pid}});
}

std::string encode_device(const std::string& device) { return line_of({{"type", "device"}, {"device", device}}); }

namespace {
// A rank on the CPU sends no GPU fields.
void add_gpu_fields(json& j, const StepMetrics& m) {
  if (m.gpu_peak_allocated_mib <= 0 && m.gpu_peak_reserved_mib <= 0) return;
  j["gpu_peak_allocated_mib"] = number_or_null(m.gpu_peak_allocated_mib);
  j["gpu_peak_reserved_mib"] = number_or_null(m.gpu_peak_reserved_mib);
}
}  // namespace

std::string encode_heartbeat(const StepMetrics& m) {
  json j = {{"type", "heartbeat"}, {"rss_mib", number_or_null(m.rss_mib)}, {"peak_rss_mib", number_or_null(m.peak_rss_mib)}};
  add_gpu_fields(j, m);
  return line_of(j);
}

std::string encode_step(const StepMetrics& m) {
  json j = {{"type", "step"},
            {"step", m.step},
            {"steps", m.steps},
            {"loss", number_or_null(m.loss)},
            {"lr", number_or_null(m.lr)},
            {"grad_norm", number_or_null(m.grad_norm)},
            {"tokens_per_s", number_or_null(m.tokens_per_s)},
            {"rss_mib", number_or_null(m.rss_mib)},
            {"peak_rss_mib", number_or_null(m.peak_rss_mib)}};
  add_gpu_fields(j, m);
  return line_of(j);
}

std::string encode_checkpoint(int64_t step, const std::string& path) {
  return line_of({{"type", "checkpoint"}, {"step", step}, {"path", path}});
}

std::string encode_eval_progress(const EvalCounts& counts, const StepMetrics& m) {
  json j = {{"type", "eval_progress"},
            {"answered", counts.answered},
            {"resumed", counts.resumed},
            {"records", counts.records},
            {"rss_mib", number_or_null(m.rss_mib)},
            {"peak_rss_mib", number_or_null(m.peak_rss_mib)}};
  add_gpu_fields(j, m);
  return line_of(j);
}

std::string encode_eval(const std::string& metrics_json) {
  // Text that is not an object is the caller's bug; it still must not throw out of a report,
  // so it travels as a string under "metrics" and the launcher sees a malformed message.
  json metrics = json::parse(metrics_json, nullptr, false);
  if (metrics.is_discarded()) metrics = metrics_json;
  // Moved in, not copied through an initializer list: nlohmann copies recursively, one frame per
  // nesting level, and a 64 KiB message of nested lists overflowed the stack of the fuzzer's
  // AddressSanitizer build (tests/fuzz/corpus/control_protocol/crash-deep-eval.jsonl).
  json message = json::object();
  message["type"] = "eval";
  message["metrics"] = std::move(metrics);
  return line_of(message);
}

std::string encode_error(const std::string& message) { return line_of({{"type", "error"}, {"message", message}}); }

std::string encode_done() { return line_of({{"type", "done"}}); }

std::string encode_stopped(int64_t step) { return line_of({{"type", "stopped"}, {"step", step}}); }

std::string encode_stop(const std::string& reason) { return line_of({{"type", "stop"}, {"reason", reason}}); }

bool is_stop_message(const std::string& line) {
  const json j = json::parse(line, nullptr, false);
  if (!j.is_object()) return false;  // a discarded value is not an object either
  auto it = j.find("type");
  return it != j.end() && *it == "stop";
}

std::string random_token() {
  unsigned char bytes[16];
  std::FILE* f = std::fopen("/dev/urandom", "rb");
  const bool read = f && std::fread(bytes, 1, sizeof bytes, f) == sizeof bytes;
  if (f) std::fclose(f);
  if (!read) throw std::runtime_error("cannot read /dev/urandom for the job token");
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

bool tokens_equal(const std::string& a, const std::string& b) {
  // Every byte of the longer string is looked at whatever the contents, so the time says only
  // the lengths. An empty token never matches: a server without a token must not let anyone in.
  const std::size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned diff = a.size() != b.size() || n == 0;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace gt::control
