// Config reading (typed values, overrides, unknown keys), the portable generator, atomic files.
#include <gtest/gtest.h>

#include <fstream>
#include <sys/stat.h>

#include "common/atomic_file.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "common/rng.hpp"
#include "common/train_config.hpp"

namespace {

std::string write_tmp(const std::string& name, const std::string& text) {
  std::string p = ::testing::TempDir() + "/" + name;
  std::ofstream(p) << text;
  return p;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const gt::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(Config, TypedValuesDefaultsAndOverrides) {
  auto p = write_tmp("a.toml", "[training]\nsteps = 10\nlr_scale = 0.5\n[job]\nname = \"x\"\n");
  gt::ConfigReader r(p);
  r.apply_override("training.steps", "25");
  r.apply_override("job.name", "demo");
  EXPECT_EQ(r.get_int("training", "steps", 1), 25);
  EXPECT_DOUBLE_EQ(r.get_float("training", "lr_scale", 1), 0.5);
  EXPECT_EQ(r.get_string("job", "name", ""), "demo");
  EXPECT_EQ(r.get_int("training", "absent", 7), 7);
  EXPECT_NO_THROW(r.finish());
}

TEST(Config, ErrorsNameFileKeyAndExpectedType) {
  auto p = write_tmp("b.toml", "[training]\nsteps = \"ten\"\n");
  gt::ConfigReader r(p);
  auto msg = error_of([&] { r.get_int("training", "steps", 1); });
  EXPECT_NE(msg.find("b.toml: [training].steps: expected an integer, got string"), std::string::npos) << msg;

  auto q = write_tmp("c.toml", "[training]\nsteps = 3\nstpes = 4\n");
  gt::ConfigReader r2(q);
  r2.get_int("training", "steps", 1);
  msg = error_of([&] { r2.finish(); });
  EXPECT_NE(msg.find("c.toml: [training].stpes: unknown key"), std::string::npos) << msg;

  auto bad = write_tmp("d.toml", "[training\nsteps = 3\n");
  msg = error_of([&] { gt::ConfigReader r3(bad); });
  EXPECT_NE(msg.find("d.toml: not valid TOML"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;

  msg = error_of([&] { gt::ConfigReader r4(::testing::TempDir() + "/missing.toml"); });
  EXPECT_NE(msg.find("missing.toml: cannot open"), std::string::npos) << msg;
}

TEST(Config, TrainConfigValidatesWholeBeforeUse) {
  auto p = write_tmp("t.toml", "[training]\nsteps = 5\n[optimizer]\nlr = 0.001\n");
  auto c = gt::read_train_config(p, {{"training.batch_size", "3"}});
  EXPECT_EQ(c.steps, 5);
  EXPECT_EQ(c.batch_size, 3);
  EXPECT_DOUBLE_EQ(c.lr, 0.001);
  EXPECT_EQ(c.out_dir, "runs/graphtune");
  auto msg = error_of([&] { gt::read_train_config(p, {{"training.steps", "-1"}}); });
  EXPECT_NE(msg.find("command line --training.steps: must be positive"), std::string::npos) << msg;
  msg = error_of([&] { gt::read_train_config(p, {{"model.n_kv_heads", "3"}}); });
  EXPECT_NE(msg.find("n_kv_heads: must divide n_heads"), std::string::npos) << msg;
  msg = error_of([&] { gt::read_train_config(p, {{"training.stage", "graph_matching"}}); });
  EXPECT_NE(msg.find("not supported yet"), std::string::npos) << msg;
  msg = error_of([&] { gt::read_train_config(p, {{"trainin.steps", "3"}}); });
  EXPECT_NE(msg.find("[trainin]: unknown section"), std::string::npos) << msg;
}

TEST(Rng, SameSeedSameSequenceAcrossCopies) {
  gt::Rng a(123), b(123), c(124);
  for (int i = 0; i < 100; ++i) {
    auto x = a.next_u64();
    EXPECT_EQ(x, b.next_u64());
    EXPECT_NE(x, c.next_u64());
  }
  // Pinned values: the generator is part of the file format of everything seeded.
  gt::Rng d(0);
  EXPECT_EQ(d.next_u64(), 0x99ec5f36cb75f2b4ULL);
  gt::Rng e(5);
  double mean = 0;
  for (int i = 0; i < 10000; ++i) {
    uint32_t v = e.below(10);
    ASSERT_LT(v, 10u);
    mean += v;
  }
  EXPECT_NEAR(mean / 10000, 4.5, 0.1);
}

TEST(AtomicFile, AppearsWholeOrNotAtAll) {
  const std::string p = ::testing::TempDir() + "/atomic.txt";
  std::remove(p.c_str());
  {
    gt::AtomicFile f(p);
    f.write("partial");
    struct stat st;
    EXPECT_NE(::stat(p.c_str(), &st), 0);  // not visible before commit
  }  // abandoned: nothing left behind
  struct stat st;
  EXPECT_NE(::stat(p.c_str(), &st), 0);
  gt::write_file_atomic(p, "whole");
  EXPECT_EQ(gt::read_file(p), "whole");
}
