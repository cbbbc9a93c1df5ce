#include "comm/comm_backend.hpp"

#include <dlfcn.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "comm/mpi_communicator.hpp"
#include "comm/nccl/nccl_communicator.hpp"
#include "common/error.hpp"

#ifndef GRAPHTUNE_NCCL_LIBRARY
#define GRAPHTUNE_NCCL_LIBRARY ""  // not built: CMake found no CUDA or NCCL
#endif

namespace gt {
namespace {

constexpr const char* kWhere = "[parallelism].backend";

std::string executable_dir() {
  std::vector<char> path(4096);
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) return "";
  std::string exe(path.data(), static_cast<size_t>(n));
  return exe.substr(0, exe.rfind('/'));
}

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

// The library's handle, never closed: the Communicator's code lives in it. A candidate that
// exists but does not load (a missing libcudart, a broken file) is the answer, not a reason
// to try the next one: its loader error says what to install.
void* load_nccl_library() {
  if (const char* forced = std::getenv("GRAPHTUNE_NCCL_LIBRARY")) {
    if (!exists(forced)) fail(kWhere, std::string("nccl: GRAPHTUNE_NCCL_LIBRARY=") + forced + " does not exist");
    if (void* handle = dlopen(forced, RTLD_NOW | RTLD_LOCAL)) return handle;
    fail(kWhere, std::string("nccl: cannot load ") + forced + ": " + dlerror());
  }
  std::vector<std::string> candidates;
  if (std::string dir = executable_dir(); !dir.empty()) candidates.push_back(dir + "/" + kNcclLibraryName);
  if (*GRAPHTUNE_NCCL_LIBRARY) candidates.push_back(GRAPHTUNE_NCCL_LIBRARY);
  std::string tried;
  for (const std::string& path : candidates) {
    if (!exists(path)) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    if (void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return handle;
    fail(kWhere, std::string("nccl: cannot load ") + path + ": " + dlerror());
  }
  if (void* handle = dlopen(kNcclLibraryName, RTLD_NOW | RTLD_LOCAL)) return handle;
  tried += std::string(tried.empty() ? "" : ", ") + "the loader's path (" + dlerror() + ")";
  fail(kWhere, std::string("nccl: ") + kNcclLibraryName +
                   " not found (graphtune was built without CUDA and NCCL, or the library was not installed); tried " +
                   tried);
}

std::unique_ptr<Communicator> nccl_world(double timeout_seconds) {
  void* library = load_nccl_library();
  auto factory = reinterpret_cast<NcclWorldFactory>(dlsym(library, kNcclWorldSymbol));
  if (!factory) fail(kWhere, std::string("nccl: the library has no ") + kNcclWorldSymbol + ": " + dlerror());
  char error[1024] = "";
  const MPI_Comm world = MPI_COMM_WORLD;
  Communicator* comm = factory(&world, timeout_seconds, error, sizeof error);
  if (!comm) fail(kWhere, std::string("nccl: ") + error);
  return std::unique_ptr<Communicator>(comm);
}

}  // namespace

std::unique_ptr<Communicator> make_world_communicator(Backend backend, double timeout_seconds) {
  switch (backend) {
    case Backend::kMpi: {
      std::unique_ptr<Communicator> comm = MpiCommunicator::world();
      comm->set_timeout_seconds(timeout_seconds);
      return comm;
    }
    case Backend::kNccl: return nccl_world(timeout_seconds);
  }
  throw std::logic_error("make_world_communicator: unknown backend");
}

}  // namespace gt
