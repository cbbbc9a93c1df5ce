#pragma once
// A worker's end of the control plane (control/control_protocol.hpp). When the launcher started
// this rank, GRAPHTUNE_CONTROL_ADDR and GRAPHTUNE_JOB_TOKEN are set: connect() says hello and
// starts a thread that sends a heartbeat every GRAPHTUNE_HEARTBEAT_S seconds (default 2) and
// listens for the launcher's stop request. Under a plain mpirun nothing is set and every call is
// a no-op, so the trainers call these unconditionally. Reporting never throws: a launcher that
// went away must not take a training step down with it (the launcher's death ends mpirun).
#include <cstdint>
#include <string>

namespace gt::control {

struct StepMetrics;

// Connects when the environment names a launcher; a launcher that cannot be reached or refuses
// the token is an error (InputError naming the address): the job was started wrong.
void connect(int rank, int world_size);
bool connected();

void report_device(const std::string& device);  // once chosen: the launcher's summary names it
// The CUDA caching allocator's peaks so far, MiB: heartbeats and steps carry them from now on.
void note_gpu_memory(double peak_allocated_mib, double peak_reserved_mib);
void report_step(const StepMetrics& m);  // rss and gpu fields are filled in here
void report_checkpoint(int64_t step, const std::string& path);
// An eval's progress: records this rank answered so far in this attempt, of `records`, after
// `resumed` answered before it (rss and gpu fields are filled in here).
void report_eval_progress(int64_t answered, int64_t resumed, int64_t records);
void report_eval(const std::string& metrics_json);
void report_error(const std::string& message);
void report_stopped(int64_t step);
void report_done();  // then disconnects

// The launcher asked the job to stop (Ctrl-C or SIGTERM on it). This rank's view only: the
// ranks agree on the step to stop at through World::any (comm/world.hpp).
bool stop_requested();

// This process's resident and peak resident set, MiB (/proc/self/status VmRSS and VmHWM).
double rss_mib();
double peak_rss_mib();

}  // namespace gt::control
