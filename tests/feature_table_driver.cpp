// graphtune's side of tests/test_feature_tables.py: loads a node-feature file with
// gt::load_feature_table and writes what it read as safetensors ("<name>.x" float32,
// "<name>.y" int64) for the Python test to compare with what it saved. A separate program (not a
// gtest) so that ctest lists no test that only ever skips. Usage: feature_table_driver IN OUT;
// an InputError is one line on stderr and exit code 2.
#include <torch/torch.h>

#include <cstdio>

#include "common/error.hpp"
#include "loader/feature_table_io.hpp"
#include "weights/safetensors.hpp"

namespace {

int body(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s IN OUT.safetensors\n", argv[0]);
    return 2;
  }
  std::map<std::string, torch::Tensor> labels;
  const gt::FeatureTable table = gt::load_feature_table(argv[1], &labels);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const auto& [name, x] : table.x) {
    if (x.scalar_type() != torch::kFloat32 || !x.is_contiguous()) {
      std::fprintf(stderr, "FAIL: %s: x is not contiguous float32\n", name.c_str());
      return 1;
    }
    out.emplace_back(name + ".x", x);
  }
  for (const auto& [name, y] : labels) out.emplace_back(name + ".y", y);
  gt::save_safetensors(argv[2], out);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gt::run_main("feature_table_driver", body, argc, argv); }
