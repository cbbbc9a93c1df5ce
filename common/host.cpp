#include "common/host.hpp"

#include <unistd.h>

#include <cstdlib>

namespace gt {

std::string this_host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "this host";
  return name;
}

std::string cuda_visible_devices_note() {
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  return env ? std::string(", CUDA_VISIBLE_DEVICES=") + env : "";
}

}  // namespace gt
