// What the launcher shows and records (launcher/tensorboard_writer, metrics_log, progress_view,
// summary_table): crc32c against published vectors, Event bytes derived by hand from the
// protobuf wire format, the progress output under a fake clock, exact tables, metrics.jsonl
// read back, and a full disk (RLIMIT_FSIZE in a child process) that must not stop a run.
// tests/test_tensorboard_events.py reads the event files with TensorBoard itself.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "launcher/metrics_log.hpp"
#include "launcher/progress_view.hpp"
#include "launcher/summary_table.hpp"
#include "launcher/tensorboard_writer.hpp"
#include "tests/input_error.hpp"
#include "tests/temp_dir.hpp"

namespace {

using gt::control::StepMetrics;

std::string bytes(std::initializer_list<int> values) {
  std::string s;
  for (int v : values) s.push_back(static_cast<char>(v));
  return s;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Everything a std::FILE* received, for the progress view's output.
struct Capture {
  std::FILE* file = std::tmpfile();
  ~Capture() { std::fclose(file); }
  std::string text() {
    std::fflush(file);
    std::rewind(file);
    std::string s;
    for (int c; (c = std::fgetc(file)) != EOF;) s.push_back(static_cast<char>(c));
    std::fseek(file, 0, SEEK_END);
    return s;
  }
};

struct FakeClock {
  double now = 0;
  gt::ProgressView::Clock fn() {
    return [this] { return now; };
  }
};

StepMetrics metrics(int64_t step, int64_t steps) {
  StepMetrics m;
  m.step = step;
  m.steps = steps;
  m.loss = 2.34123;
  m.lr = 2e-3;
  m.grad_norm = 0.81234;
  m.tokens_per_s = 1234.4;
  m.rss_mib = 845.3;
  m.peak_rss_mib = 900;
  return m;
}

// Runs body in a child whose files may not grow past limit bytes (a full disk, for this
// process only); returns what the child wrote on stderr. The child must exit 0.
std::string with_file_size_limit(rlim_t limit, const std::string& stderr_path, const std::function<void()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::freopen(stderr_path.c_str(), "w", stderr);
    ::signal(SIGXFSZ, SIG_IGN);  // the write then fails with EFBIG instead of killing us
    rlimit r{limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &r);
    try {
      body();
    } catch (...) {
      ::_exit(3);
    }
    std::fflush(stderr);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  return read_file(stderr_path);
}

int count_of(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

// ------------------------------------------------------------------------------------------
TEST(Crc32c, PublishedVectors) {
  using gt::tfevents::crc32c;
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);  // the check value of CRC-32C
  EXPECT_EQ(crc32c("", 0), 0u);
  // RFC 3720 (iSCSI) appendix B.4.
  const std::string zeros(32, '\0'), ones(32, '\xff');
  std::string ascending;
  for (int i = 0; i < 32; ++i) ascending.push_back(static_cast<char>(i));
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
  // mask(c) = rotate right by 15, plus 0xa282ead8: worked out by hand for 0xE3069283.
  EXPECT_EQ(gt::tfevents::masked_crc32c("123456789", 9), 0xC78AB0E5u);
}

TEST(EventBytes, ScalarEventByHand) {
  // wall_time 1.5 = 0x3FF8000000000000, step 300 = varint AC 02, 0.25f = 0x3E800000.
  const std::string value = bytes({0x0A, 4, 'l', 'o', 's', 's', 0x15, 0x00, 0x00, 0x80, 0x3E});
  const std::string summary = bytes({0x0A, 11}) + value;
  const std::string expected = bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x10, 0xAC, 0x02, 0x2A, 13}) + summary;
  EXPECT_EQ(gt::tfevents::scalar_event(1.5, 300, "loss", 0.25f), expected);
}

TEST(EventBytes, NegativeStepIsTenByteVarint) {
  const std::string event = gt::tfevents::scalar_event(0.0, -1, "t", 1.0f);
  const std::string step = bytes({0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01});
  EXPECT_EQ(event.substr(9, step.size()), step);
}

TEST(EventBytes, FileVersionEventByHand) {
  EXPECT_EQ(gt::tfevents::file_version_event(1.5),
            bytes({0x09, 0, 0, 0, 0, 0, 0, 0xF8, 0x3F, 0x1A, 13}) + "brain.Event:2");
}

TEST(EventBytes, RecordFraming) {
  const std::string data = "123456789";
  const std::string record = gt::tfevents::frame_record(data);
  ASSERT_EQ(record.size(), 8u + 4 + 9 + 4);
  EXPECT_EQ(record.substr(0, 8), bytes({9, 0, 0, 0, 0, 0, 0, 0}));
  const std::string length = record.substr(0, 8);
  const uint32_t length_crc = gt::tfevents::masked_crc32c(length.data(), 8);
  EXPECT_EQ(record.substr(8, 4), bytes({static_cast<int>(length_crc & 0xFF), static_cast<int>(length_crc >> 8 & 0xFF),
                                        static_cast<int>(length_crc >> 16 & 0xFF), static_cast<int>(length_crc >> 24)}));
  EXPECT_EQ(record.substr(12, 9), data);
  EXPECT_EQ(record.substr(21, 4), bytes({0xE5, 0xB0, 0x8A, 0xC7}));  // 0xC78AB0E5 little-endian
}

// ------------------------------------------------------------------------------------------
TEST(TensorBoardWriter, FileNameFolderAndRecords) {
  gt::test::TempDir tmp("gt_tb");
  const std::string dir = tmp.file("a/b/tb");  // created with its parents
  std::string first, second;
  {
    gt::TensorBoardWriter writer(dir);
    gt::TensorBoardWriter other(dir);  // same second, same process: its own file
    first = writer.path();
    second = other.path();
    writer.add_scalar("loss", 300, 0.25, 1.5);
    writer.add_scalar("lr", 301, 1e-3, 2.5);
    writer.flush();
  }
  EXPECT_NE(first, second);
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::string name = first.substr(dir.size() + 1);
  const std::string suffix = "." + std::string(host) + "." + std::to_string(::getpid()) + ".";
  EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
  EXPECT_NE(name.find(suffix), std::string::npos) << name;
  const std::string seconds = name.substr(20, name.find('.', 20) - 20);
  EXPECT_EQ(seconds.size(), 10u);
  EXPECT_NEAR(std::stod(seconds), static_cast<double>(::time(nullptr)), 60);

  const std::string file = read_file(first);
  const std::string scalars = gt::tfevents::frame_record(gt::tfevents::scalar_event(1.5, 300, "loss", 0.25f)) +
                              gt::tfevents::frame_record(gt::tfevents::scalar_event(2.5, 301, "lr", 1e-3f));
  const std::size_t version_size = 8 + 4 + 24 + 4;  // key+double, key+len+"brain.Event:2"
  ASSERT_EQ(file.size(), version_size + scalars.size());
  EXPECT_EQ(file.substr(version_size), scalars);
  EXPECT_EQ(file.substr(12 + 9, 15), bytes({0x1A, 13}) + "brain.Event:2");
}

TEST(TensorBoardWriter, UncreatableFolderIsOneLineNamingIt) {
  gt::test::TempDir tmp("gt_tb");
  const std::string blocker = tmp.write("plain_file", "x");
  const std::string message = gt::test::input_error_of([&] { gt::TensorBoardWriter w(blocker + "/tb"); });
  EXPECT_NE(message.find(blocker), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

TEST(TensorBoardWriter, FullDiskIsSaidOnceAndDoesNotStopTheRun) {
  gt::test::TempDir tmp("gt_tb");
  const std::string dir = tmp.file("tb");
  std::string path_file = tmp.file("path");
  const std::string err = with_file_size_limit(300, tmp.file("stderr"), [&] {
    gt::TensorBoardWriter writer(dir);
    std::ofstream(path_file) << writer.path();  // small: under the limit
    for (int i = 0; i < 40; ++i) {
      writer.add_scalar("loss", i, 1.0 / (i + 1), 100 + i);
      writer.flush();
    }
  });
  EXPECT_EQ(count_of(err, "warning"), 1) << err;
  EXPECT_NE(err.find("File too large"), std::string::npos) << err;
  // Whole records only: the file is the version record plus k scalar records.
  const std::size_t size = read_file(read_file(path_file)).size();
  const std::size_t scalar_size = gt::tfevents::frame_record(gt::tfevents::scalar_event(0, 1, "loss", 1)).size();
  EXPECT_LE(size, 300u);
  EXPECT_GT(size, 40u);
  EXPECT_EQ((size - 40) % scalar_size, 0u) << size;
}

// ------------------------------------------------------------------------------------------
TEST(MetricsLog, LinesParseBackAndAppendContinues) {
  gt::test::TempDir tmp("gt_metrics");
  const std::string path = tmp.file("metrics.jsonl");
  {
    gt::MetricsLog log(path, false);
    log.write({{"step", 1}, {"loss", 2.5}});
    log.write({{"step", 2}, {"loss", std::numeric_limits<double>::quiet_NaN()}, {"host", "n\x01"}});
    EXPECT_EQ(read_file(path), "{\"loss\":2.5,\"step\":1}\n{\"host\":\"n\\u0001\",\"loss\":null,\"step\":2}\n");
  }
  {
    gt::MetricsLog log(path, true);
    log.write({{"step", 3}, {"text", "bad \xff byte"}});
  }
  std::ifstream in(path);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0]["step"], 1);
  EXPECT_TRUE(records[1]["loss"].is_null());
  EXPECT_EQ(records[2]["step"], 3);
  {
    gt::MetricsLog log(path, false);  // a new run starts the file afresh
    log.write({{"step", 1}});
  }
  EXPECT_EQ(read_file(path), "{\"step\":1}\n");
}

TEST(MetricsLog, UnopenablePathIsOneLine) {
  const std::string message = gt::test::input_error_of([] { gt::MetricsLog log("/nonexistent_dir/m.jsonl", false); });
  EXPECT_NE(message.find("/nonexistent_dir/m.jsonl: No such file or directory"), std::string::npos) << message;
}

TEST(MetricsLog, FullDiskLeavesWholeLinesOnly) {
  gt::test::TempDir tmp("gt_metrics");
  const std::string path = tmp.file("metrics.jsonl");
  const std::string err = with_file_size_limit(100, tmp.file("stderr"), [&] {
    gt::MetricsLog log(path, false);
    for (int i = 0; i < 10; ++i) log.write({{"step", i}, {"padding", "0123456789"}});  // 34 bytes a line
  });
  EXPECT_EQ(count_of(err, "warning"), 1) << err;
  const std::string line = "{\"padding\":\"0123456789\",\"step\":0}\n";
  EXPECT_EQ(read_file(path).size(), 2 * line.size());  // the third line would cross 100 bytes
  EXPECT_EQ(read_file(path).substr(0, line.size()), line);
}

// ------------------------------------------------------------------------------------------
TEST(ProgressView, PlainLinesEveryLogEveryStepsAndAtTheLast) {
  Capture out;
  FakeClock clock;
  clock.now = 100;
  gt::ProgressView view(out.file, false, 10, 5, clock.fn());
  for (int step = 1; step <= 10; ++step) {
    clock.now = 110 + 2 * (step - 1);  // the first step took 10 s (start-up), then 2 s each
    view.on_step(metrics(step, 10));
  }
  view.finish();
  // Step 5: 8 s over 4 steps since step 1 = 2 s a step, 5 steps left.
  EXPECT_EQ(out.text(),
            "step 5/10  loss 2.3412  lr 2.00e-03  grad_norm 0.812  tokens/s 1,234  rss 845 MiB  eta 10.0s\n"
            "step 10/10  loss 2.3412  lr 2.00e-03  grad_norm 0.812  tokens/s 1,234  rss 845 MiB  eta 0.0s\n");
}

TEST(ProgressView, PlainFirstStepHasNoEtaAndFinishSaysWhereItStopped) {
  Capture out;
  FakeClock clock;
  gt::ProgressView view(out.file, false, 0, 100, clock.fn());  // total from the metrics
  clock.now = 50;
  view.on_step(metrics(100, 1000));
  clock.now = 110;
  view.on_step(metrics(130, 1000));  // 60 s for 30 steps: 2 s a step, 870 left = 29m00s
  view.finish();
  view.finish();  // twice: nothing more
  EXPECT_EQ(out.text(),
            "step 100/1000  loss 2.3412  lr 2.00e-03  grad_norm 0.812  tokens/s 1,234  rss 845 MiB  eta --\n"
            "step 130/1000  loss 2.3412  lr 2.00e-03  grad_norm 0.812  tokens/s 1,234  rss 845 MiB  eta 29m00s\n");
}

TEST(ProgressView, TerminalBarRedrawnInPlaceWithMessages) {
  Capture out;
  FakeClock clock;
  gt::ProgressView view(out.file, true, 16, 1, clock.fn());
  view.set_columns(200);
  clock.now = 5.0;
  view.on_step(metrics(1, 16));
  clock.now = 5.05;
  view.on_step(metrics(2, 16));  // within 0.1 s of the last draw: held back
  clock.now = 5.2;
  view.on_step(metrics(3, 16));  // 0.2 s for 2 steps, 13 left
  clock.now = 5.3;
  view.message("saved checkpoint step_3");
  clock.now = 5.4;
  view.on_step(metrics(16, 16));  // the last step is always drawn
  view.finish();
  const std::string tail = "  loss 2.341  1,234 tok/s  845 MiB\x1b[K";
  EXPECT_EQ(out.text(), "\r[#...............] step 1/16  5.0s<?" + tail +
                            "\r[###.............] step 3/16  5.2s<1.3s" + tail +
                            "\r\x1b[Ksaved checkpoint step_3\n"
                            "\r[###.............] step 3/16  5.3s<1.2s" + tail +
                            "\r[################] step 16/16  5.4s<0.0s" + tail + "\n");
}

// An eval's reports come a batch at a time from every rank: a plain line each tenth of the
// records, the rate and the time left measured from the first report.
TEST(ProgressView, EvalRecordsEveryTenthWithAnswersPerSecond) {
  Capture out;
  FakeClock clock;
  gt::ProgressView view(out.file, false, 0, 10, clock.fn());
  clock.now = 10;
  view.on_eval(0, 100, 500);  // the attempt's first report: nothing answered yet
  for (int64_t answered = 4; answered <= 100; answered += 4) {
    clock.now = 10 + static_cast<double>(answered) / 4;  // 4 records a second
    view.on_eval(answered, 100, 512);
  }
  view.finish();
  const std::string text = out.text();
  EXPECT_EQ(count_of(text, "\n"), 11) << text;  // the first answers (4), then at 12, 20, 32, ..., 100: each tenth once
  EXPECT_NE(text.find("eval 12/100 records  answers/s 4  rss 512 MiB  eta 22.0s\n"), std::string::npos) << text;
  EXPECT_NE(text.find("eval 100/100 records  answers/s 4  rss 512 MiB  eta 0.0s\n"), std::string::npos) << text;
}

TEST(ProgressView, EvalTerminalBar) {
  Capture out;
  FakeClock clock;
  gt::ProgressView view(out.file, true, 0, 1, clock.fn());
  view.set_columns(200);
  clock.now = 1;
  view.on_eval(8, 32, 845);
  clock.now = 3;
  view.on_eval(16, 32, 845);  // 8 records in 2 s, 16 left
  view.finish();
  EXPECT_EQ(out.text(), "\r[####............] eval 8/32  1.0s<?  0 answers/s  845 MiB\x1b[K"
                        "\r[########........] eval 16/32  3.0s<4.0s  4 answers/s  845 MiB\x1b[K\n");
}

TEST(ProgressView, TerminalRedrawsAtMostTenTimesASecond) {
  Capture out;
  FakeClock clock;
  gt::ProgressView view(out.file, true, 64, 1, clock.fn());
  for (int k = 0; k < 64; ++k) {
    clock.now = k * 0.03125;  // 32 steps a second, exact in binary
    view.on_step(metrics(k + 1, 64));
  }
  // Drawn at k = 0, 4, 8, ..., 60 (0.125 s apart; 0.09375 is too soon) and at the last step.
  EXPECT_EQ(count_of(out.text(), "\r"), 17);
  view.finish();
  EXPECT_EQ(count_of(out.text(), "\n"), 1);
}

TEST(ProgressView, TerminalLineCutToTheWidth) {
  Capture out;
  FakeClock clock;
  gt::ProgressView view(out.file, true, 16, 1, clock.fn());
  view.set_columns(30);
  view.on_step(metrics(8, 16));
  EXPECT_EQ(out.text(), "\r[########........] step 8/16\x1b[K");  // cut at 29 columns, blanks dropped
}

TEST(ProgressView, TerminalFinishDrawsWhatThrottlingHeldBack) {
  Capture out;
  FakeClock clock;
  gt::ProgressView view(out.file, true, 100, 1, clock.fn());
  view.set_columns(30);
  view.on_step(metrics(1, 100));
  clock.now = 0.01;
  view.on_step(metrics(2, 100));
  view.finish();
  EXPECT_EQ(out.text(), "\r[................] step 1/100\x1b[K\r[................] step 2/100\x1b[K\n");
}

// ------------------------------------------------------------------------------------------
TEST(SummaryTable, ColumnsAlignedNumbersRight) {
  const std::string table = gt::format_table({"rank", "host", "local rank", "steps", "last loss", "peak RSS MiB"},
                                             {{"0", "node-a", "0", "500", "2.3412", "845"},
                                              {"1", "node-bb", "1", "500", "2.35", "1,024"},
                                              {"total", "", "", "1,000", "", "1,869"}});
  EXPECT_EQ(table,
            "rank   host     local rank  steps  last loss  peak RSS MiB\n"
            "-----  -------  ----------  -----  ---------  ------------\n"
            "    0  node-a            0    500     2.3412           845\n"
            "    1  node-bb           1    500       2.35         1,024\n"
            "total                       1,000                    1,869\n");
}

TEST(SummaryTable, HeaderRightAlignedOverNumbersShortRowsPadded) {
  EXPECT_EQ(gt::format_table({"n", "name"}, {{"1,000", "a"}, {"7"}}),
            "    n  name\n"
            "-----  ----\n"
            "1,000  a\n"
            "    7\n");
}

TEST(SummaryTable, NumbersAndNames) {
  EXPECT_TRUE(gt::looks_numeric("-0.5"));
  EXPECT_TRUE(gt::looks_numeric("2.3e-05"));
  EXPECT_TRUE(gt::looks_numeric("12,345"));
  EXPECT_FALSE(gt::looks_numeric("nan"));
  EXPECT_FALSE(gt::looks_numeric("inf"));
  EXPECT_FALSE(gt::looks_numeric("0x10"));
  EXPECT_FALSE(gt::looks_numeric("1-2"));
  EXPECT_FALSE(gt::looks_numeric(""));
  EXPECT_FALSE(gt::looks_numeric("-"));
}

TEST(SummaryTable, Durations) {
  EXPECT_EQ(gt::format_duration(45.24), "45.2s");
  EXPECT_EQ(gt::format_duration(0), "0.0s");
  EXPECT_EQ(gt::format_duration(59.96), "1m00s");
  EXPECT_EQ(gt::format_duration(192), "3m12s");
  EXPECT_EQ(gt::format_duration(3599.4), "59m59s");
  EXPECT_EQ(gt::format_duration(3720), "1h02m");
  EXPECT_EQ(gt::format_duration(100 * 3600 + 59), "100h00m");
  EXPECT_EQ(gt::format_duration(-1), "--");
  EXPECT_EQ(gt::format_duration(std::nan("")), "--");
}

TEST(SummaryTable, Counts) {
  EXPECT_EQ(gt::format_count(1234), "1,234");
  EXPECT_EQ(gt::format_count(999.4), "999");
  EXPECT_EQ(gt::format_count(999.5), "1,000");
  EXPECT_EQ(gt::format_count(1234567.8), "1,234,568");
  EXPECT_EQ(gt::format_count(-12000), "-12,000");
  EXPECT_EQ(gt::format_count(0), "0");
  EXPECT_EQ(gt::format_count(std::numeric_limits<double>::infinity()), "--");
}
