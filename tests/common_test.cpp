// Config reading (typed values, overrides, unknown keys), the portable generator, atomic files,
// the POSIX file-system helpers and staged (all-or-nothing) folders.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sys/stat.h>

#include "common/atomic_file.hpp"
#include "common/config.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/rng.hpp"
#include "common/staged_folder.hpp"
#include "config/job_config.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"

namespace {

std::string write_tmp(const std::string& name, const std::string& text) {
  std::string p = ::testing::TempDir() + "/" + name;
  std::ofstream(p) << text;
  return p;
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
  auto msg = gt::test::input_error_of([&] { r.get_int("training", "steps", 1); });
  EXPECT_NE(msg.find("b.toml: [training].steps: expected an integer, got string"), std::string::npos) << msg;

  auto q = write_tmp("c.toml", "[training]\nsteps = 3\nstpes = 4\n");
  gt::ConfigReader r2(q);
  r2.get_int("training", "steps", 1);
  msg = gt::test::input_error_of([&] { r2.finish(); });
  EXPECT_NE(msg.find("c.toml: [training].stpes: unknown key"), std::string::npos) << msg;

  auto bad = write_tmp("d.toml", "[training\nsteps = 3\n");
  msg = gt::test::input_error_of([&] { gt::ConfigReader r3(bad); });
  EXPECT_NE(msg.find("d.toml: not valid TOML"), std::string::npos) << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;

  msg = gt::test::input_error_of([&] { gt::ConfigReader r4(::testing::TempDir() + "/missing.toml"); });
  EXPECT_NE(msg.find("missing.toml: cannot open"), std::string::npos) << msg;
}

TEST(Config, TrainConfigValidatesWholeBeforeUse) {
  auto p = write_tmp("t.toml", "[training]\nsteps = 5\n[optimizer]\nlr = 0.001\n");
  auto c = gt::read_job_config(p, {{"training.batch_size", "3"}});
  EXPECT_EQ(c.training.steps, 5);
  EXPECT_EQ(c.training.batch_size, 3);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 0.001);
  EXPECT_EQ(c.job.out_dir, "runs/graphtune");
  auto msg = gt::test::input_error_of([&] { gt::read_job_config(p, {{"training.steps", "-1"}}); });
  EXPECT_NE(msg.find("command line --training.steps: must be positive"), std::string::npos) << msg;
  msg = gt::test::input_error_of([&] { gt::read_job_config(p, {{"model.n_kv_heads", "3"}}); });
  EXPECT_NE(msg.find("n_kv_heads: must divide n_heads"), std::string::npos) << msg;
  msg = gt::test::input_error_of([&] { gt::read_job_config(p, {{"training.stage", "pretrain"}}); });
  EXPECT_NE(msg.find("command line --training.stage: 'pretrain' is not one of: lm, grounding, graph_matching, task"),
            std::string::npos) << msg;
  msg = gt::test::input_error_of(
      [&] { gt::read_job_config(p, {{"model.tokenizer", "train"}, {"training.stage", "grounding"}}); });
  EXPECT_NE(msg.find("is for stage 'lm' only"), std::string::npos) << msg;
  EXPECT_EQ(gt::read_job_config(p, {{"training.stage", "grounding"}}).training.stage, gt::Phase::kGrounding);
  EXPECT_TRUE(gt::read_job_config(p, {{"data.skip_invalid", "true"}}).data.skip_invalid);
  EXPECT_TRUE(gt::read_job_config(p, {{"eval.text_only", "true"}}).eval.text_only);
  msg = gt::test::input_error_of([&] { gt::read_job_config(p, {{"trainin.steps", "3"}}); });
  EXPECT_NE(msg.find("[trainin]: unknown section"), std::string::npos) << msg;
}

// [data].template: vicuna_v1_1 (GraphGPT's) unless chatml is asked for; nothing else.
// toml11 saturates an integer literal beyond int64 to the limit: the reader refuses it instead,
// from the file or an override, in any base; the limits themselves, written so, are integers.
TEST(Config, IntegersBeyondInt64AreRefused) {
  auto error = [](const std::string& text, const std::vector<std::pair<std::string, std::string>>& overrides) {
    return gt::test::input_error_of([&] { gt::read_job_config_text(text, "big.toml", overrides); });
  };
  const std::string range = "is out of range: an integer from -9223372036854775808 to 9223372036854775807";
  EXPECT_EQ(error("[training]\nsteps = 99999999999999999999\n", {}),
            "big.toml: [training].steps: 99999999999999999999 " + range);
  EXPECT_EQ(error("[training]\nseed = -9_223_372_036_854_775_809\n", {}),
            "big.toml: [training].seed: -9_223_372_036_854_775_809 " + range);
  EXPECT_EQ(error("[training]\nseed = 0x1_0000_0000_0000_0000\n", {}),
            "big.toml: [training].seed: 0x1_0000_0000_0000_0000 " + range);
  EXPECT_EQ(error("", {{"training.steps", "99999999999999999999"}}),
            "command line --training.steps: 99999999999999999999 " + range);
  EXPECT_EQ(gt::read_job_config_text("[training]\nseed = 9223372036854775807\n", "big.toml", {}).training.seed,
            INT64_MAX);
  EXPECT_EQ(gt::read_job_config_text("[training]\nseed = -9223372036854775808\n", "big.toml", {}).training.seed,
            INT64_MIN);
  // What the code keeps in fewer bits is bounded where it is read.
  EXPECT_EQ(error("[data]\nnum_workers = 3000000000\n", {}), "big.toml: [data].num_workers: must be at most 4096, got 3000000000");
  EXPECT_EQ(error("[checkpoint]\nkeep_latest = 3000000000\n", {}),
            "big.toml: [checkpoint].keep_latest: must be at most 2147483647, got 3000000000");
}

// graphgpt+encoder trains the token rows and the encoder; the encoder's lr and weight decay
// default to the optimizer's and are read and range-checked as theirs.
TEST(Config, EncoderTrainingAndItsOwnRate) {
  auto p = write_tmp("enc.toml", "[training]\ntrainable = \"graphgpt+encoder\"\n[optimizer]\nlr = 2e-5\nweight_decay = 0.1\n");
  auto c = gt::read_job_config(p, {});
  EXPECT_TRUE(c.training.trains_encoder());
  EXPECT_TRUE(c.training.trains_token_rows());
  EXPECT_DOUBLE_EQ(c.optimizer.encoder_lr, 2e-5);
  EXPECT_DOUBLE_EQ(c.optimizer.encoder_weight_decay, 0.1);
  c = gt::read_job_config(p, {{"optimizer.encoder_lr", "1e-3"}, {"optimizer.encoder_weight_decay", "0"}});
  EXPECT_DOUBLE_EQ(c.optimizer.encoder_lr, 1e-3);
  EXPECT_DOUBLE_EQ(c.optimizer.encoder_weight_decay, 0.0);
  EXPECT_FALSE(gt::read_job_config("", {}).training.trains_encoder());
  auto msg = gt::test::input_error_of([&] { gt::read_job_config(p, {{"optimizer.encoder_lr", "-1"}}); });
  EXPECT_NE(msg.find("--optimizer.encoder_lr"), std::string::npos) << msg;
}

TEST(Config, DataTemplateIsOneOfTheKnown) {
  auto p = write_tmp("tmpl.toml", "[data]\ntemplate = \"chatml\"\n");
  EXPECT_EQ(gt::read_job_config(p, {}).data.chat_template, "chatml");
  EXPECT_EQ(gt::read_job_config(p, {{"data.template", "vicuna_v1_1"}}).data.chat_template, "vicuna_v1_1");
  EXPECT_EQ(gt::read_job_config("", {}).data.chat_template, "vicuna_v1_1");
  auto msg = gt::test::input_error_of([&] { gt::read_job_config(p, {{"data.template", "llama2"}}); });
  EXPECT_NE(msg.find("command line --data.template: 'llama2' is not one of: vicuna_v1_1, graphchat_v1, chatml, qwen2.5, llama3, llama3.1"), std::string::npos)
      << msg;
  auto bad = write_tmp("tmpl_bad.toml", "[data]\ntemplate = \"ChatML\"\n");
  msg = gt::test::input_error_of([&] { gt::read_job_config(bad, {}); });
  EXPECT_NE(msg.find("tmpl_bad.toml: [data].template: 'ChatML' is not one of: vicuna_v1_1, graphchat_v1, chatml, qwen2.5, llama3"), std::string::npos)
      << msg;
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line: " << msg;
}

// [data].group_by_length: off unless asked for; only true or false.
TEST(Config, GroupByLengthIsABool) {
  EXPECT_FALSE(gt::read_job_config("", {}).data.group_by_length);
  auto p = write_tmp("group.toml", "[data]\ngroup_by_length = true\n");
  EXPECT_TRUE(gt::read_job_config(p, {}).data.group_by_length);
  EXPECT_FALSE(gt::read_job_config(p, {{"data.group_by_length", "false"}}).data.group_by_length);
  auto bad = write_tmp("group_bad.toml", "[data]\ngroup_by_length = 1\n");
  auto msg = gt::test::input_error_of([&] { gt::read_job_config(bad, {}); });
  EXPECT_EQ(msg, bad + ": [data].group_by_length: expected true or false, got integer");
}

// [model].encoder_dropout: 0 unless set; a probability in [0, 1), refused in one line otherwise.
TEST(Config, EncoderDropoutIsAProbabilityBelowOne) {
  EXPECT_EQ(gt::read_job_config("", {}).model.encoder_dropout, 0.0);
  auto p = write_tmp("dropout.toml", "[model]\nencoder_dropout = 0.1\n");
  EXPECT_DOUBLE_EQ(gt::read_job_config(p, {}).model.encoder_dropout, 0.1);
  EXPECT_EQ(gt::read_job_config(p, {{"model.encoder_dropout", "0"}}).model.encoder_dropout, 0.0);
  for (const char* bad : {"1.5", "1", "-0.1", "nan"}) {
    auto msg = gt::test::input_error_of([&] { gt::read_job_config(p, {{"model.encoder_dropout", bad}}); });
    EXPECT_EQ(msg.rfind("command line --model.encoder_dropout: must be in [0, 1) (0 = no dropout), got ", 0), 0u) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  auto text = write_tmp("dropout_bad.toml", "[model]\nencoder_dropout = \"high\"\n");
  EXPECT_EQ(gt::test::input_error_of([&] { gt::read_job_config(text, {}); }),
            text + ": [model].encoder_dropout: expected a number, got string");
}

// The text entry points (tests/fuzz/config_fuzz.cpp) read as the file ones do, naming `name`.
TEST(Config, TextReadsAsTheFileDoesNamingTheGivenName) {
  auto c = gt::read_job_config_text("[training]\nsteps = 5\n", "given.toml", {{"training.batch_size", "4"}});
  EXPECT_EQ(c.training.steps, 5);
  EXPECT_EQ(c.training.batch_size, 4);
  EXPECT_EQ(c.file, "given.toml");
  auto msg = gt::test::input_error_of([] { gt::read_job_config_text("[training]\nstpes = 5\n", "given.toml", {}); });
  EXPECT_EQ(msg, "given.toml: [training].stpes: unknown key");
  msg = gt::test::input_error_of([] { gt::ConfigReader::from_text("[training\n", "given.toml"); });
  EXPECT_EQ(msg.rfind("given.toml: not valid TOML at line 1", 0), 0u) << msg;
  msg = gt::test::input_error_of([] { gt::ConfigReader::from_text("steps = 1\n", "given.toml"); });
  EXPECT_EQ(msg, "given.toml: top-level key 'steps' must be a [section]");
  // Found by tests/fuzz/config_fuzz.cpp: a quoted key or a value holding a newline made the error
  // two lines; control characters are shown escaped.
  msg = gt::test::input_error_of([] { gt::read_job_config_text("[training]\n\"a\\nb\" = 1\n", "given.toml", {}); });
  EXPECT_EQ(msg, "given.toml: [training].a\\x0ab: unknown key");
  msg = gt::test::input_error_of([] { gt::read_job_config_text("[training]\nstage = \"x\\ny\"\n", "given.toml", {}); });
  EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  // Found by tests/fuzz/config_fuzz.cpp: toml11 3.7 reads past its buffer on invalid UTF-8 in a
  // string, so such text is refused before it gets there (and an override is a plain string).
  msg = gt::test::input_error_of([] { gt::ConfigReader::from_text("[job]\nname = 'a\xff'\n", "given.toml"); });
  EXPECT_EQ(msg, "given.toml: not valid TOML at line 2: not UTF-8 (byte 15)");
  auto over = gt::read_job_config_text("", "given.toml", {{"job.name", "a\xff"}});
  EXPECT_EQ(over.job.name, "a\xff");
}

// Found by tests/bad_inputs/config/: toml11 recurses once per nesting level and runs out of
// stack near 10,000 levels; an empty file is a truncated one, not a wish for the defaults.
TEST(Config, DeepNestingAndAnEmptyFileAreInputErrors) {
  const std::string deep = "[training]\nx = " + std::string(65, '[') + std::string(65, ']') + "\n";
  auto msg = gt::test::input_error_of([&] { gt::ConfigReader::from_text(deep, "deep.toml"); });
  EXPECT_EQ(msg, "deep.toml: not valid TOML at line 2: arrays or inline tables nested deeper than 64");
  // Brackets inside strings and comments are not nesting.
  const std::string quoted = "[job]\nname = \"" + std::string(100, '[') + "\" # " + std::string(100, '{') + "\n" +
                             "out_dir = '" + std::string(100, '[') + "'\n";
  EXPECT_EQ(gt::ConfigReader::from_text(quoted, "q.toml").get_string("job", "name", ""), std::string(100, '['));
  const std::string empty = write_tmp("empty.toml", " \n\n");
  msg = gt::test::input_error_of([&] { gt::ConfigReader r(empty); });
  EXPECT_EQ(msg, empty + ": the file is empty (a config names at least [training].stage or a key to change)");
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

TEST(Fs, RemoveTreeDeletesANestedNonEmptyTreeButNotWhatLinksPointTo) {
  gt::test::TempDir tmp;
  gt::make_dirs(tmp.file("a/b/c"));
  gt::make_dirs(tmp.file("a/b/c"));  // existing: fine
  gt::write_file_atomic(tmp.file("a/top.txt"), "1");
  gt::write_file_atomic(tmp.file("a/b/c/deep.txt"), "2");
  gt::make_dirs(tmp.file("a/b/empty"));
  gt::write_file_atomic(tmp.file("outside.txt"), "keep");
  ASSERT_EQ(::symlink(tmp.file("outside.txt").c_str(), tmp.file("a/b/link").c_str()), 0);
  ASSERT_EQ(::symlink(tmp.path.c_str(), tmp.file("a/loop").c_str()), 0);  // not followed
  EXPECT_EQ(gt::list_dir(tmp.file("a/b")), (std::vector<std::string>{"c", "empty", "link"}));
  EXPECT_TRUE(gt::is_empty_directory(tmp.file("a/b/empty")));
  EXPECT_FALSE(gt::is_empty_directory(tmp.file("a/b")));
  EXPECT_FALSE(gt::is_empty_directory(tmp.file("a/top.txt")));

  gt::remove_tree(tmp.file("a"));
  EXPECT_FALSE(gt::path_exists(tmp.file("a")));
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"outside.txt"});
  EXPECT_EQ(gt::read_file(tmp.file("outside.txt")), "keep");
  gt::remove_tree(tmp.file("a"));  // absent: no error
}

TEST(Fs, MakeDirsOnAFileIsAnInputErrorNamingIt) {
  gt::test::TempDir tmp;
  gt::write_file_atomic(tmp.file("f"), "x");
  std::string msg = gt::test::input_error_of([&] { gt::make_dirs(tmp.file("f")); });
  EXPECT_NE(msg.find(tmp.file("f") + ": exists and is not a folder"), std::string::npos) << msg;
  msg = gt::test::input_error_of([&] { gt::make_dirs(tmp.file("f/sub")); });
  EXPECT_NE(msg.find(tmp.file("f")), std::string::npos) << msg;
  EXPECT_EQ(gt::read_file(tmp.file("f")), "x");
}

TEST(Fs, PathPieces) {
  EXPECT_EQ(gt::join_path("a", "b"), "a/b");
  EXPECT_EQ(gt::join_path("a/", "b"), "a/b");
  EXPECT_EQ(gt::parent_path("a/b/c"), "a/b");
  EXPECT_EQ(gt::parent_path("c"), ".");
  EXPECT_EQ(gt::parent_path("/c"), "/");
  EXPECT_EQ(gt::strip_trailing_slashes("out//"), "out");
  EXPECT_EQ(gt::strip_trailing_slashes("/"), "/");
}

namespace {

gt::ReplaceRule replace(bool overwrite) {
  gt::ReplaceRule r;
  r.overwrite = overwrite;
  return r;
}

// A staged folder holding one file with `text`, committed.
void write_folder(const std::string& dir, const gt::ReplaceRule& rule, const std::string& text) {
  gt::StagedFolder f(dir, rule);
  gt::write_file_atomic(gt::join_path(f.path(), "data.txt"), text);
  f.commit();
}

}  // namespace

TEST(StagedFolder, CommitReplacesAnOldFolderOnlyWhenAllowed) {
  gt::test::TempDir tmp;
  const std::string dir = tmp.file("out");
  write_folder(dir, replace(false), "one");
  EXPECT_EQ(gt::list_dir(dir), std::vector<std::string>{"data.txt"});

  std::string msg = gt::test::input_error_of([&] { write_folder(dir, replace(false), "two"); });
  EXPECT_NE(msg.find(dir + ": already exists and is not empty (pass --overwrite"), std::string::npos) << msg;
  EXPECT_EQ(gt::read_file(dir + "/data.txt"), "one");
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"out"});

  write_folder(dir + "/", replace(true), "two");
  EXPECT_EQ(gt::read_file(dir + "/data.txt"), "two");
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"out"});  // no .tmp or .old left

  // An empty folder is taken over without overwrite, unless the rule says otherwise.
  gt::make_dirs(tmp.file("empty"));
  write_folder(tmp.file("empty"), replace(false), "x");
  EXPECT_EQ(gt::read_file(tmp.file("empty/data.txt")), "x");
  gt::make_dirs(tmp.file("empty2"));
  gt::ReplaceRule strict = replace(false);
  strict.empty_needs_overwrite = true;
  msg = gt::test::input_error_of([&] { write_folder(tmp.file("empty2"), strict, "x"); });
  EXPECT_NE(msg.find("empty2: already exists (pass --overwrite to replace it)"), std::string::npos) << msg;

  // With a marker file, overwrite never replaces a folder without it.
  gt::ReplaceRule marked = replace(true);
  marked.marker_file = "config.json";
  marked.kind = "model folder";
  msg = gt::test::input_error_of([&] { write_folder(dir, marked, "three"); });
  EXPECT_NE(msg.find(dir + ": exists and is not a model folder (no config.json); not replacing it"), std::string::npos)
      << msg;
  EXPECT_EQ(gt::read_file(dir + "/data.txt"), "two");
  gt::write_file_atomic(dir + "/config.json", "{}");
  write_folder(dir, marked, "three");
  EXPECT_EQ(gt::list_dir(dir), std::vector<std::string>{"data.txt"});
  EXPECT_EQ(gt::read_file(dir + "/data.txt"), "three");

  // Never a file, even with overwrite; never under a missing parent.
  gt::write_file_atomic(tmp.file("file"), "f");
  msg = gt::test::input_error_of([&] { write_folder(tmp.file("file"), replace(true), "x"); });
  EXPECT_NE(msg.find("file: exists and is not a folder"), std::string::npos) << msg;
  EXPECT_EQ(gt::read_file(tmp.file("file")), "f");
  msg = gt::test::input_error_of([&] { write_folder(tmp.file("no/such/dir"), replace(true), "x"); });
  EXPECT_NE(msg.find("no/such/dir: parent folder does not exist"), std::string::npos) << msg;
  EXPECT_EQ(tmp.list(), (std::vector<std::string>{"empty", "empty2", "file", "out"}));
}

TEST(StagedFolder, AbandonedStagingLeavesNothing) {
  gt::test::TempDir tmp;
  const std::string dir = tmp.file("out");
  {
    gt::StagedFolder f(dir, replace(false));
    EXPECT_EQ(f.path(), dir + ".tmp." + std::to_string(::getpid()));
    gt::make_dirs(f.path() + "/sub");
    gt::write_file_atomic(f.path() + "/sub/x.txt", "x");
    EXPECT_FALSE(gt::path_exists(dir));  // nothing at DIR before commit
  }
  EXPECT_TRUE(tmp.list().empty());

  // Abandoned while an old folder exists: the old one stays as it was.
  write_folder(dir, replace(false), "old");
  {
    gt::StagedFolder f(dir, replace(true));
    gt::write_file_atomic(f.path() + "/data.txt", "new");
  }
  EXPECT_EQ(gt::read_file(dir + "/data.txt"), "old");
  EXPECT_EQ(tmp.list(), std::vector<std::string>{"out"});

  // A leftover temporary folder of a crashed run with the same pid is cleared first.
  gt::make_dirs(dir + "2.tmp." + std::to_string(::getpid()) + "/stale");
  write_folder(dir + "2", replace(false), "fresh");
  EXPECT_EQ(gt::list_dir(dir + "2"), std::vector<std::string>{"data.txt"});
  EXPECT_EQ(tmp.list(), (std::vector<std::string>{"out", "out2"}));
}

TEST(StagedFolder, CommitChecksAgainWhatAppearedMeanwhile) {
  gt::test::TempDir tmp;
  const std::string dir = tmp.file("out");
  gt::StagedFolder f(dir, replace(false));
  gt::write_file_atomic(f.path() + "/data.txt", "mine");
  gt::make_dirs(dir);
  gt::write_file_atomic(dir + "/theirs.txt", "theirs");
  std::string msg = gt::test::input_error_of([&] { f.commit(); });
  EXPECT_NE(msg.find(dir + ": already exists and is not empty"), std::string::npos) << msg;
  EXPECT_EQ(gt::list_dir(dir), std::vector<std::string>{"theirs.txt"});
}

TEST(Configs, EveryShippedConfigIsValid) {
  const char* src = std::getenv("GRAPHTUNE_SOURCE_DIR");
  if (!src) GTEST_SKIP() << "GRAPHTUNE_SOURCE_DIR not set (ctest sets it)";
  int n = 0;
  for (const std::string dir : {std::string(src) + "/configs", std::string(src) + "/configs/graphgpt"}) {
    for (const auto& name : gt::list_dir(dir)) {
      if (name.size() < 5 || name.substr(name.size() - 5) != ".toml") continue;
      EXPECT_NO_THROW(gt::read_job_config(dir + "/" + name, {})) << name;
      ++n;
    }
  }
  EXPECT_GE(n, 3);
}
