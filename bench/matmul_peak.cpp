// The machine's fp32 matmul peak, the denominator of MFU (model FLOPs per training step / step
// time / peak). Measured through libtorch's own matmul, the kernel training runs on, so MFU
// says how much of what this libtorch can do a step uses, not a vendor's paper number.
//
//   matmul_peak [--threads 1,2] [--runs 9]
// prints, per thread count, one line per shape ("gflops THREADS M N K VALUE") and then
// "peak_gflops THREADS VALUE": the best shape's median.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Shape {
  int64_t m, n, k;
};

// Median of `runs` timed products after two warm-up runs (the first pays for page faults and
// thread-pool start); the median, not the best, so one lucky run on a shared machine does not
// set the peak.
double median_gflops(const Shape& s, int runs) {
  auto a = torch::randn({s.m, s.k});
  auto b = torch::randn({s.k, s.n});
  auto c = torch::empty({s.m, s.n});
  for (int i = 0; i < 2; ++i) torch::mm_out(c, a, b);
  std::vector<double> g;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    torch::mm_out(c, a, b);
    double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    g.push_back(2.0 * s.m * s.n * s.k / sec / 1e9);
  }
  std::sort(g.begin(), g.end());
  return g[g.size() / 2];
}

std::vector<int> parse_threads(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    int t = std::atoi(item.c_str());
    if (t < 1) {
      std::fprintf(stderr, "matmul_peak: --threads: '%s' is not a positive count\n", item.c_str());
      std::exit(2);
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2};
  int runs = 9;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--threads" && i + 1 < argc) {
      threads = parse_threads(argv[++i]);
    } else if (arg == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: matmul_peak [--threads 1,2] [--runs 9]\n");
      return 2;
    }
  }
  torch::NoGradGuard no_grad;
  torch::manual_seed(0);
  // Square, and the tall-skinny shape of a projection on a batch of tokens (2048 tokens x 2048
  // features, 512 wide).
  const std::vector<Shape> shapes = {{1024, 1024, 1024}, {2048, 512, 2048}, {2048, 2048, 512}};
  for (int t : threads) {
    torch::set_num_threads(t);
    double best = 0;
    for (const auto& s : shapes) {
      double g = median_gflops(s, runs);
      std::printf("gflops %d %lld %lld %lld %.1f\n", t, static_cast<long long>(s.m), static_cast<long long>(s.n),
                  static_cast<long long>(s.k), g);
      best = std::max(best, g);
    }
    std::printf("peak_gflops %d %.1f\n", t, best);
    std::fflush(stdout);
  }
  return 0;
}
