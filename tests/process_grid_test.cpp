// The process grid (rank order and the split colours that form the dp/pp/tp groups), the
// pipeline partition (exact results, optimal against brute force, explicit lists) and the
// [parallelism] config keys with their checks. Torch-free, MPI-free.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <vector>

#include "config/job_config.hpp"
#include "layout/partition.hpp"
#include "layout/process_grid.hpp"
#include "tests/input_error.hpp"

namespace {

using Groups = std::vector<std::vector<int>>;  // members of each group, ordered by key

// What Communicator::split would form on every rank: groups by colour, members by key.
Groups groups_of(const gt::GridShape& g, const std::function<gt::SplitArgs(const gt::GridShape&, int)>& split) {
  std::map<int, std::map<int, int>> by_color;  // color -> key -> rank
  for (int r = 0; r < g.world(); ++r) {
    auto a = split(g, r);
    EXPECT_TRUE(by_color[a.color].emplace(a.key, r).second) << "two ranks share a key in colour " << a.color;
  }
  Groups out;
  for (const auto& [color, members] : by_color) {
    out.emplace_back();
    for (const auto& [key, rank] : members) out.back().push_back(rank);
  }
  return out;
}

std::string one_line_error(const std::function<void()>& f) {
  std::string msg = gt::test::input_error_of(f);
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
  return msg;
}

}  // namespace

TEST(ProcessGrid, RankOrderIsTpFastestThenPpThenDp) {
  const gt::GridShape g{2, 2, 2};
  const std::vector<gt::GridCoord> table = {{0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 1},
                                            {1, 0, 0}, {1, 0, 1}, {1, 1, 0}, {1, 1, 1}};
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(gt::coord_of(g, r), table[r]) << "rank " << r;
    EXPECT_EQ(gt::rank_of(g, table[r]), r);
  }
  EXPECT_THROW(gt::coord_of(g, 8), std::logic_error);
  EXPECT_THROW(gt::rank_of(g, {0, 2, 0}), std::logic_error);
}

TEST(ProcessGrid, GroupsOf2x2x2) {
  const gt::GridShape g{2, 2, 2};
  EXPECT_EQ(groups_of(g, gt::dp_split), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(groups_of(g, gt::pp_split), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(groups_of(g, gt::tp_split), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
}

TEST(ProcessGrid, GroupsPartitionTheWorldForManyShapes) {
  struct Axis {
    std::function<gt::SplitArgs(const gt::GridShape&, int)> split;
    int gt::GridShape::*size;
    int gt::GridCoord::*coord;
  };
  const std::vector<Axis> axes = {{gt::dp_split, &gt::GridShape::dp, &gt::GridCoord::dp},
                                  {gt::pp_split, &gt::GridShape::pp, &gt::GridCoord::pp},
                                  {gt::tp_split, &gt::GridShape::tp, &gt::GridCoord::tp}};
  for (gt::GridShape g : {gt::GridShape{1, 1, 1}, {4, 1, 1}, {1, 4, 1}, {1, 1, 4}, {2, 3, 4}, {3, 1, 2}, {1, 2, 3}}) {
    SCOPED_TRACE(std::to_string(g.dp) + "x" + std::to_string(g.pp) + "x" + std::to_string(g.tp));
    for (int r = 0; r < g.world(); ++r) EXPECT_EQ(gt::rank_of(g, gt::coord_of(g, r)), r);
    for (const auto& axis : axes) {
      const int n = g.*axis.size;
      Groups groups = groups_of(g, axis.split);
      ASSERT_EQ(static_cast<int>(groups.size()), g.world() / n);
      std::vector<int> seen(g.world(), 0);
      for (const auto& members : groups) {
        ASSERT_EQ(static_cast<int>(members.size()), n);
        for (int i = 0; i < n; ++i) {
          const int r = members[i];
          ++seen[r];
          EXPECT_EQ(axis.split(g, r).key, i) << "rank in group = position on the axis";
          gt::GridCoord c = gt::coord_of(g, r), c0 = gt::coord_of(g, members[0]);
          EXPECT_EQ(c.*axis.coord, i);
          c.*axis.coord = 0;  // the other two coordinates are shared by the group
          c0.*axis.coord = 0;
          EXPECT_EQ(c, c0);
        }
      }
      EXPECT_EQ(seen, std::vector<int>(g.world(), 1)) << "every rank in exactly one group";
    }
  }
}

TEST(Partition, UniformAndSkewedExact) {
  const std::vector<int64_t> uniform(8, 10);
  EXPECT_EQ(gt::balanced_partition(uniform, 4), (std::vector<int>{0, 2, 4, 6}));
  EXPECT_EQ(gt::balanced_partition(uniform, 1), (std::vector<int>{0}));
  EXPECT_EQ(gt::balanced_partition(uniform, 8), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  // Embeddings of 30 on stage 0: {0,2} and {0,3} both peak at 60; the later stage takes more.
  EXPECT_EQ(gt::balanced_partition(uniform, 2, 30, 0), (std::vector<int>{0, 2}));
  // A head of 25 on the last stage: 8x10 + 25 over 2 stages, best peak 55 at 5 | 3 layers.
  EXPECT_EQ(gt::balanced_partition(uniform, 2, 0, 25), (std::vector<int>{0, 5}));
  EXPECT_EQ(gt::max_stage_params(uniform, {0, 5}, 0, 25), 55);
  // One heavy layer gets a stage of its own.
  const std::vector<int64_t> heavy_last = {1, 1, 1, 1, 1, 1, 1, 9};
  EXPECT_EQ(gt::balanced_partition(heavy_last, 3), (std::vector<int>{0, 1, 7}));
  EXPECT_EQ(gt::balanced_partition({4, 4, 4, 4}, 2, 8, 0), (std::vector<int>{0, 1}));
  // Peak 5: each heavy end alone, the light middle together.
  EXPECT_EQ(gt::balanced_partition({5, 1, 1, 1, 1, 5}, 3), (std::vector<int>{0, 1, 5}));

  auto msg = one_line_error([&] { gt::balanced_partition(uniform, 9); });
  EXPECT_NE(msg.find("[parallelism].pp: 9 pipeline stages, but the model has only 8 decoder layers"),
            std::string::npos) << msg;
}

TEST(Partition, OptimalAgainstBruteForce) {
  uint32_t state = 12345;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 1 + next() % 9, stages = 1 + next() % n;
    std::vector<int64_t> w(n);
    for (auto& x : w) x = next() % 50;
    const int64_t first_extra = next() % 3 ? 0 : next() % 80, last_extra = next() % 3 ? 0 : next() % 80;
    // Every set of stages-1 cut points among layers 1..n-1.
    int64_t best = INT64_MAX;
    std::vector<int> cut(n - 1, 0);
    std::fill(cut.begin(), cut.begin() + (stages - 1), 1);
    std::sort(cut.begin(), cut.end());
    do {
      std::vector<int> first = {0};
      for (int i = 0; i < n - 1; ++i)
        if (cut[i]) first.push_back(i + 1);
      best = std::min(best, gt::max_stage_params(w, first, first_extra, last_extra));
    } while (std::next_permutation(cut.begin(), cut.end()));
    auto got = gt::balanced_partition(w, stages, first_extra, last_extra);
    ASSERT_NO_THROW(gt::check_explicit_partition(got, stages, n));
    ASSERT_EQ(gt::max_stage_params(w, got, first_extra, last_extra), best) << "trial " << trial;
  }
}

TEST(Partition, ExplicitListErrors) {
  EXPECT_NO_THROW(gt::check_explicit_partition({0, 6, 12}, 3, 16));
  auto msg = one_line_error([] { gt::check_explicit_partition({0, 6}, 3, 16); });
  EXPECT_NE(msg.find("[parallelism].partition: lists 2 stages, but pp is 3"), std::string::npos) << msg;
  msg = one_line_error([] { gt::check_explicit_partition({1, 6, 12}, 3, 16); });
  EXPECT_NE(msg.find("[parallelism].partition: the first stage must start at layer 0, got 1"), std::string::npos)
      << msg;
  msg = one_line_error([] { gt::check_explicit_partition({0, 6, 6}, 3, 16); });
  EXPECT_NE(msg.find("strictly increasing (no empty stage): stage 2 starts at 6 after 6"), std::string::npos) << msg;
  msg = one_line_error([] { gt::check_explicit_partition({0, 6, 12}, 3, 12); });
  EXPECT_NE(msg.find("stage 2 starts at layer 12, but the model has only 12 decoder layers (0..11)"),
            std::string::npos) << msg;
}

TEST(GridLayout, CheckParallelLayout) {
  gt::JobConfig c;
  c.parallelism.dp = 2, c.parallelism.pp = 2, c.parallelism.tp = 1;
  c.parallelism.microbatches = 2;  // 1F1B runs no fewer than its stages
  EXPECT_NO_THROW(gt::check_parallel_layout(c, 4, 4));
  auto msg = one_line_error([&] { gt::check_parallel_layout(c, 2, 4); });
  EXPECT_EQ(msg, "[parallelism]: dp 2 x pp 2 x tp 1 = 4 ranks, but the job has 2 (start it with mpirun -np 4)");
  c.file = "job.toml";  // a config file is named
  msg = one_line_error([&] { gt::check_parallel_layout(c, 2, 4); });
  EXPECT_EQ(msg.rfind("job.toml: [parallelism]: dp 2", 0), 0u) << msg;
  c.file.clear();
  c.parallelism.dp = 1, c.parallelism.pp = 5;
  msg = one_line_error([&] { gt::check_parallel_layout(c, 5, 4); });
  EXPECT_NE(msg.find("[parallelism].pp: 5 pipeline stages, but the model has only 4 decoder layers"),
            std::string::npos) << msg;
  c.parallelism.pp = 2;
  c.parallelism.partition = {0, 4};
  msg = one_line_error([&] { gt::check_parallel_layout(c, 2, 4); });
  EXPECT_NE(msg.find("[parallelism].partition: stage 1 starts at layer 4, but the model has only 4"),
            std::string::npos) << msg;
  EXPECT_NO_THROW(gt::check_parallel_layout(c, 2, 6));
}

TEST(Config, ParallelismKeys) {
  auto c = gt::read_job_config("", {});
  EXPECT_EQ(c.parallelism.dp, 1);
  EXPECT_EQ(c.parallelism.pp, 1);
  EXPECT_EQ(c.parallelism.tp, 1);
  EXPECT_EQ(c.parallelism.schedule, gt::ScheduleKind::kOneFOneB);
  EXPECT_EQ(c.parallelism.microbatches, 1);
  EXPECT_EQ(c.parallelism.bucket_mb, 25);
  EXPECT_EQ(c.parallelism.backend, gt::Backend::kMpi);
  // Unset, micro-batches follow the stages: `--parallelism.pp 2` alone is a valid 1F1B layout.
  EXPECT_EQ(gt::read_job_config("", {{"parallelism.pp", "2"}, {"training.batch_size", "8"}}).parallelism.microbatches, 2);
  EXPECT_TRUE(c.parallelism.partition.empty());

  c = gt::read_job_config("", {{"parallelism.dp", "2"}, {"parallelism.pp", "3"}, {"parallelism.tp", "2"},
                                 {"parallelism.schedule", "gpipe"}, {"parallelism.microbatches", "4"},
                                 {"parallelism.partition", "0, 1,3"}, {"training.batch_size", "8"}});
  EXPECT_EQ(c.parallelism.dp * c.parallelism.pp * c.parallelism.tp, 12);
  EXPECT_EQ(c.parallelism.schedule, gt::ScheduleKind::kGPipe);
  EXPECT_EQ(c.parallelism.microbatches, 4);
  EXPECT_EQ(c.parallelism.partition, (std::vector<int>{0, 1, 3}));
  // A one-stage list parses as a TOML integer on the command line; still a list.
  EXPECT_EQ(gt::read_job_config("", {{"parallelism.partition", "0"}}).parallelism.partition, std::vector<int>{0});
  // GPipe has no lower bound on micro-batches.
  EXPECT_NO_THROW(gt::read_job_config("", {{"parallelism.pp", "4"}, {"parallelism.schedule", "gpipe"}}));
}

TEST(Config, DeviceAndTheBackendItImplies) {
  auto c = gt::read_job_config("", {});
  EXPECT_EQ(c.training.device, gt::DeviceKind::kAuto);
  EXPECT_EQ(c.parallelism.backend, gt::Backend::kMpi);
  EXPECT_FALSE(c.parallelism.backend_given);
  // cuda without a backend takes NCCL's; a backend given is kept.
  c = gt::read_job_config("", {{"training.device", "cuda"}});
  EXPECT_EQ(c.training.device, gt::DeviceKind::kCuda);
  EXPECT_EQ(c.parallelism.backend, gt::Backend::kNccl);
  c = gt::read_job_config("", {{"training.device", "cuda"}, {"parallelism.backend", "mpi"}});
  EXPECT_EQ(c.parallelism.backend, gt::Backend::kMpi);
  EXPECT_TRUE(c.parallelism.backend_given);
  EXPECT_EQ(gt::read_job_config("", {{"training.device", "cpu"}}).parallelism.backend, gt::Backend::kMpi);
  auto msg = one_line_error([] { gt::read_job_config("", {{"training.device", "cpu"}, {"parallelism.backend", "nccl"}}); });
  EXPECT_NE(msg.find("--parallelism.backend: nccl moves CUDA tensors, but [training].device is cpu"), std::string::npos)
      << msg;
  msg = one_line_error([] { gt::read_job_config("", {{"training.device", "gpu"}}); });
  EXPECT_NE(msg.find("--training.device: 'gpu' is not one of: auto, cpu, cuda"), std::string::npos) << msg;
}

TEST(Config, ParallelismErrors) {
  // The micro-batches are the layout's as a whole: checked with the ranks and the layers, after
  // the stages against the layers, and named as the reader names the key.
  auto layout_error = [](const std::vector<std::pair<std::string, std::string>>& overrides, int ranks) {
    return one_line_error([&] { gt::check_parallel_layout(gt::read_job_config("", overrides), ranks, 8); });
  };
  auto msg = layout_error({{"parallelism.pp", "4"}, {"parallelism.microbatches", "2"}}, 4);
  EXPECT_NE(msg.find("--parallelism.microbatches: 1f1b needs at least as many micro-batches as pipeline stages: "
                     "got 2 for pp 4"),
            std::string::npos) << msg;
  msg = layout_error({{"training.batch_size", "6"}, {"parallelism.microbatches", "4"}}, 1);
  EXPECT_NE(msg.find("--parallelism.microbatches: dp 1 x 4 micro-batches do not divide [training].batch_size 6"),
            std::string::npos) << msg;
  // The global batch is split over the replicas too.
  msg = layout_error({{"training.batch_size", "6"}, {"parallelism.dp", "4"}}, 4);
  EXPECT_NE(msg.find("[parallelism].microbatches: dp 4 x 1 micro-batches do not divide [training].batch_size 6"),
            std::string::npos) << msg;
  // More stages than the model has layers is the more basic problem, and comes first.
  msg = layout_error({{"parallelism.pp", "9"}}, 9);
  EXPECT_NE(msg.find("[parallelism].pp: 9 pipeline stages, but the model has only 8 decoder layers"), std::string::npos)
      << msg;
  EXPECT_NO_THROW(gt::read_job_config("", {{"parallelism.pp", "4"}, {"parallelism.microbatches", "2"}}));
  // Integers beyond what the layout keeps exact.
  msg = one_line_error([] { gt::read_job_config("", {{"parallelism.dp", "2000000"}}); });
  EXPECT_NE(msg.find("--parallelism.dp: must be at most 1048576, got 2000000"), std::string::npos) << msg;
  msg = one_line_error([] { gt::read_job_config("", {{"parallelism.backend", "gloo"}}); });
  EXPECT_NE(msg.find("--parallelism.backend: 'gloo' is not one of: mpi, nccl"), std::string::npos) << msg;
  msg = one_line_error([] { gt::read_job_config("", {{"parallelism.tp", "0"}}); });
  EXPECT_NE(msg.find("--parallelism.tp: must be positive, got 0"), std::string::npos) << msg;
  msg = one_line_error([] { gt::read_job_config("", {{"parallelism.schedule", "interleaved"}}); });
  EXPECT_NE(msg.find("--parallelism.schedule: 'interleaved' is not one of: gpipe, 1f1b"), std::string::npos) << msg;
  for (const char* bad : {"0,,4", "0,-4", "even", "0, 4,"}) {
    msg = one_line_error([&] { gt::read_job_config("", {{"parallelism.partition", bad}}); });
    EXPECT_NE(msg.find("--parallelism.partition: expected \"balanced\" or the first layer of each stage"),
              std::string::npos) << bad << ": " << msg;
  }
  msg = one_line_error([] { gt::read_job_config("", {{"parallelism.dimension", "2"}}); });
  EXPECT_NE(msg.find("--parallelism.dimension: unknown key"), std::string::npos) << msg;

  // In a file, the list is a string too: ConfigReader has no arrays, and the error says so.
  const std::string p = ::testing::TempDir() + "/parallelism.toml";
  std::ofstream(p) << "[parallelism]\npp = 2\nmicrobatches = 2\npartition = [0, 2]\n";
  msg = one_line_error([&] { gt::read_job_config(p, {}); });
  EXPECT_NE(msg.find("parallelism.toml: [parallelism].partition: expected a string, got array"), std::string::npos)
      << msg;
  std::ofstream(p) << "[parallelism]\npp = 2\nmicrobatches = 2\npartition = \"0,2\"\n";
  EXPECT_EQ(gt::read_job_config(p, {}).parallelism.partition, (std::vector<int>{0, 2}));
}
