// Writes TensorBoard scalars through launcher/tensorboard_writer.hpp for
// tests/test_tensorboard_events.py, which reads them back with TensorBoard's own reader.
//   tensorboard_events_driver DIR N
// N steps of three tags; step i (0-based) is step 10*i at wall time 1.7e9 + 0.25*i with
//   train/loss = 3 / (1 + i), train/lr = 1e-3 * (i + 1) / N, perf/tokens_per_s = 1000.5 + 37 * i
// (computed in double and stored as float, as TensorBoard's simple_value is). Prints the path.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/error.hpp"
#include "launcher/tensorboard_writer.hpp"

namespace {

int body(int argc, char** argv) {
  if (argc != 3) gt::fail("", "usage: tensorboard_events_driver DIR N");
  const int n = std::atoi(argv[2]);
  gt::TensorBoardWriter writer(argv[1]);
  for (int i = 0; i < n; ++i) {
    const double wall_time = 1.7e9 + 0.25 * i;
    writer.add_scalar("train/loss", 10 * i, 3.0 / (1 + i), wall_time);
    writer.add_scalar("train/lr", 10 * i, 1e-3 * (i + 1) / n, wall_time);
    writer.add_scalar("perf/tokens_per_s", 10 * i, 1000.5 + 37 * i, wall_time);
  }
  writer.flush();
  std::printf("%s\n", writer.path().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gt::run_main("tensorboard_events_driver", body, argc, argv); }
