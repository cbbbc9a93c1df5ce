#include "worker/rank_errors.hpp"

#include <cstdio>
#include <string>

#include <c10/util/Exception.h>

#include "comm/world.hpp"
#include "common/error.hpp"
#include "control/control_client.hpp"
#include "parallel/parallel_runtime.hpp"
#include "train/device_memory.hpp"
#include "train/train_loop.hpp"

namespace gt {

namespace {

// The run does not fit this GPU: not bad input and not a bug. The rank that ran out says so with
// its figures; the others may wait for it in a collective, so it ends the job.
int out_of_memory(const DeviceOutOfMemory& e, const c10::Device& device, const World& world) {
  const std::string line = out_of_memory_line(e, device);
  control::report_error(line);
  std::fprintf(stderr, "graphtune: error: rank %d: %s\n", world.rank(), line.c_str());
  std::fflush(stderr);
  if (world.size() == 1) return kExitRunFailed;
  world.abort(kExitRunFailed);
}

}  // namespace

int run_on_rank(const World& world, const c10::Device& device, const std::function<int()>& body) {
  try {
    return body();
  } catch (const DeviceOutOfMemory& e) {
    return out_of_memory(e, device, world);
  } catch (const c10::OutOfMemoryError& e) {
    return out_of_memory(DeviceOutOfMemory(0, e.what()), device, world);  // outside the steps: loading, saving
  } catch (const TrainingStopped& s) {
    control::report_stopped(s.step);
    control::report_done();
    return 0;
  } catch (const InputError& e) {
    if (world.size() == 1 || (!parallel_runtime_formed() && world.rank() == 0)) {
      control::report_error(e.what());
      throw;
    }
    if (!parallel_runtime_formed()) return kExitInputError;
    control::report_error(e.what());
    std::fprintf(stderr, "graphtune: error: rank %d: %s\n", world.rank(), e.what());
    std::fflush(stderr);
    world.abort(kExitInputError);
  } catch (const TrainingDiverged& e) {
    // Every rank stops at the same step: each says so and leaves; exit 1, not "internal".
    control::report_error(e.what());
    std::fprintf(stderr, "graphtune: error: rank %d: %s\n", world.rank(), e.what());
    return kExitRunFailed;
  } catch (const EnvironmentError& e) {
    // A write the machine refused (a full disk): the run failed, its input did not.
    control::report_error(e.what());
    if (world.size() == 1) throw;
    std::fprintf(stderr, "graphtune: error: rank %d: %s\n", world.rank(), e.what());
    std::fflush(stderr);
    world.abort(kExitRunFailed);
  } catch (const std::exception& e) {
    control::report_error(std::string("internal error: ") + e.what());
    if (world.size() == 1) throw;
    std::fprintf(stderr, "graphtune: internal error: rank %d: %s\n", world.rank(), e.what());
    std::fflush(stderr);
    world.abort(1);
  }
}

}  // namespace gt
