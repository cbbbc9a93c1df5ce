// graphtune's side of tests/test_torch_files.py: reads a torch.save'd state dict with
// gt::load_torch_state_dict (weights/torch_file.hpp) and writes what it read as safetensors, each
// tensor made contiguous, in its dtype, for the Python test to compare with torch.load. Also
// `views FILE`: prints, per tensor, whether its bytes lie in a mapping of FILE (zero-copy, as
// /proc/self/maps shows it) or were copied.
// Usage: torch_file_driver IN OUT.safetensors | torch_file_driver views IN; an InputError is one
// line on stderr and exit code 2.
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "weights/safetensors.hpp"
#include "weights/torch_file.hpp"

namespace {

// The address ranges at which this process maps `path` (/proc/self/maps names the file).
std::vector<std::pair<uintptr_t, uintptr_t>> mappings_of(const std::string& path) {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  const std::string real = std::filesystem::canonical(path).string();
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    if (line.size() < real.size() || line.compare(line.size() - real.size(), real.size(), real) != 0) continue;
    unsigned long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx", &begin, &end) == 2) out.emplace_back(begin, end);
  }
  return out;
}

int body(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN OUT.safetensors | %s views IN\n", argv[0], argv[0]);
    return 2;
  }
  if (std::string(argv[1]) == "views") {
    const auto tensors = gt::load_torch_state_dict(argv[2]);
    const auto maps = mappings_of(argv[2]);
    for (const auto& [name, t] : tensors) {
      const auto at = reinterpret_cast<uintptr_t>(t.data_ptr());
      bool mapped = false;
      for (const auto& [begin, end] : maps) mapped = mapped || (t.numel() > 0 && at >= begin && at < end);
      std::printf("%s %s\n", name.c_str(), mapped ? "mapped" : "copied");
    }
    return 0;
  }
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [name, t] : gt::load_torch_state_dict(argv[1])) out.emplace_back(name, t.contiguous());
  gt::save_safetensors(argv[2], out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gt::run_main("torch_file_driver", body, argc, argv); }
