#pragma once
// The control protocol between the launcher and its workers (docs/launcher.md): one JSON object
// per line over TCP, each with a "type". Newline-delimited JSON because both ends already carry
// nlohmann::json, a line is trivially framed, and a person can read a capture; a binary framing
// would save nothing that matters at a few messages a second.
//
// worker -> launcher, the first message of a connection:
//   {"type":"hello","token":T,"rank":R,"world":N,"host":H,"local_rank":L,"device":D,"pid":P}
// then any of
//   {"type":"device","device":D}   where the rank computes, once chosen ("cuda:0 (NVIDIA ...)")
//   {"type":"heartbeat","rss_mib":M,"peak_rss_mib":M}
//   {"type":"step","step":S,"steps":S_total,"loss":X,"lr":X,"grad_norm":X,"tokens_per_s":X,
//    "rss_mib":M,"peak_rss_mib":M}
// A rank on a GPU adds "gpu_peak_allocated_mib":M,"gpu_peak_reserved_mib":M to its heartbeats
// and steps (the CUDA caching allocator's peaks); absent, they read as 0.
//   {"type":"checkpoint","step":S,"path":P}
//   {"type":"eval_progress","answered":A,"resumed":R,"records":N,"rss_mib":M,"peak_rss_mib":M}
//                              an eval's records this rank has answered in this attempt, of N;
//                              R were answered before it began (the same on every rank)
//   {"type":"eval","metrics":{...}}
//   {"type":"error","message":TEXT}
//   {"type":"done"}            the rank finished its work and is about to exit 0
//   {"type":"stopped","step":S} the rank saved a checkpoint at S on the launcher's request (an
//                              eval: its answers are committed; S counts the records answered)
// launcher -> worker:
//   {"type":"stop","reason":TEXT}   finish the current step, save a checkpoint, exit 0
//
// Anything else is malformed. parse_worker_message never throws: it says what is wrong.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace gt::control {

// A message longer than this (bytes, newline excluded) is dropped and its connection closed:
// a worker's largest message (an evaluation's metrics) is a few KiB.
constexpr std::size_t kMaxMessageBytes = 64 * 1024;

// Environment the launcher hands each worker (through mpirun -x).
constexpr const char* kAddressEnv = "GRAPHTUNE_CONTROL_ADDR";   // "HOST:PORT"
constexpr const char* kTokenEnv = "GRAPHTUNE_JOB_TOKEN";        // 32 hex digits
constexpr const char* kHeartbeatEnv = "GRAPHTUNE_HEARTBEAT_S";  // seconds between heartbeats

enum class Kind { kHello, kDevice, kHeartbeat, kStep, kCheckpoint, kEvalProgress, kEval, kError, kDone, kStopped };

struct Hello {
  std::string token, host, device;
  int rank = 0, world = 0, local_rank = 0;
  int64_t pid = 0;
};

struct StepMetrics {
  int64_t step = 0, steps = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0;
  double rss_mib = 0, peak_rss_mib = 0;
  double gpu_peak_allocated_mib = 0, gpu_peak_reserved_mib = 0;  // 0: not on a GPU
};

struct EvalCounts {
  int64_t answered = 0, resumed = 0, records = 0;
};

struct WorkerMessage {
  Kind kind = Kind::kHeartbeat;
  Hello hello;           // kHello
  StepMetrics metrics;   // kStep; kHeartbeat and kEvalProgress fill the rss and gpu fields
  EvalCounts eval;       // kEvalProgress
  int64_t step = 0;      // kCheckpoint, kStopped
  // kCheckpoint: the path; kError: the message; kEval: the metrics JSON text; kDevice: the device
  std::string text;
};

struct ParseResult {
  std::optional<WorkerMessage> message;  // empty: malformed
  std::string problem;                   // why it is malformed
};

// One line, without its newline.
ParseResult parse_worker_message(const std::string& line);

// Each returns one line without the newline.
std::string encode_hello(const Hello& h);
std::string encode_device(const std::string& device);
// The rss and gpu fields of m.
std::string encode_heartbeat(const StepMetrics& m);
std::string encode_step(const StepMetrics& m);
std::string encode_checkpoint(int64_t step, const std::string& path);
// The rss and gpu fields of m.
std::string encode_eval_progress(const EvalCounts& counts, const StepMetrics& m);
std::string encode_eval(const std::string& metrics_json);  // metrics_json: a JSON object's text
std::string encode_error(const std::string& message);
std::string encode_done();
std::string encode_stopped(int64_t step);
std::string encode_stop(const std::string& reason);

// True when `line` is a launcher's stop request.
bool is_stop_message(const std::string& line);

// A fresh random job token: 32 hex digits from /dev/urandom.
std::string random_token();
// Compares in time independent of where the strings differ.
bool tokens_equal(const std::string& a, const std::string& b);

}  // namespace gt::control
