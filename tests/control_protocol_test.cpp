// The control protocol's lines (control/control_protocol.hpp): every message a worker encodes
// parses back to the same values, and lines a peer could send that are not the protocol are
// rejected with a reason rather than an exception.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "control/control_protocol.hpp"

namespace gt::control {
namespace {

WorkerMessage parse_ok(const std::string& line) {
  ParseResult r = parse_worker_message(line);
  EXPECT_TRUE(r.message.has_value()) << line << ": " << r.problem;
  EXPECT_TRUE(r.problem.empty()) << line;
  return r.message.value_or(WorkerMessage{});
}

TEST(ControlProtocol, HelloRoundTrip) {
  Hello h;
  h.token = "0123456789abcdef0123456789abcdef";
  h.host = "node-7.cluster";
  h.device = "cuda:3";
  h.rank = 11;
  h.world = 16;
  h.local_rank = 3;
  h.pid = 4194304;
  const std::string line = encode_hello(h);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  WorkerMessage m = parse_ok(line);
  EXPECT_EQ(m.kind, Kind::kHello);
  EXPECT_EQ(m.hello.token, h.token);
  EXPECT_EQ(m.hello.host, h.host);
  EXPECT_EQ(m.hello.device, h.device);
  EXPECT_EQ(m.hello.rank, 11);
  EXPECT_EQ(m.hello.world, 16);
  EXPECT_EQ(m.hello.local_rank, 3);
  EXPECT_EQ(m.hello.pid, 4194304);
}

TEST(ControlProtocol, HeartbeatRoundTrip) {
  StepMetrics cpu;
  cpu.rss_mib = 123.25;
  cpu.peak_rss_mib = 456.5;
  const std::string line = encode_heartbeat(cpu);
  EXPECT_EQ(line.find("gpu"), std::string::npos) << line;  // a CPU rank sends no GPU fields
  WorkerMessage m = parse_ok(line);
  EXPECT_EQ(m.kind, Kind::kHeartbeat);
  EXPECT_EQ(m.metrics.rss_mib, 123.25);
  EXPECT_EQ(m.metrics.peak_rss_mib, 456.5);
  EXPECT_EQ(m.metrics.gpu_peak_allocated_mib, 0);

  StepMetrics gpu = cpu;
  gpu.gpu_peak_allocated_mib = 20480.5;
  gpu.gpu_peak_reserved_mib = 22528.25;
  m = parse_ok(encode_heartbeat(gpu));
  EXPECT_EQ(m.metrics.gpu_peak_allocated_mib, 20480.5);
  EXPECT_EQ(m.metrics.gpu_peak_reserved_mib, 22528.25);
  EXPECT_EQ(parse_worker_message(R"({"type":"heartbeat","rss_mib":1,"peak_rss_mib":2,"gpu_peak_reserved_mib":"x"})").problem,
            "heartbeat: \"gpu_peak_reserved_mib\" is not a number");
}

TEST(ControlProtocol, DeviceRoundTrip) {
  WorkerMessage m = parse_ok(encode_device("cuda:1 (NVIDIA GeForce RTX 3090, 23.7 GiB, sm86)"));
  EXPECT_EQ(m.kind, Kind::kDevice);
  EXPECT_EQ(m.text, "cuda:1 (NVIDIA GeForce RTX 3090, 23.7 GiB, sm86)");
  EXPECT_EQ(parse_worker_message(R"({"type":"device"})").problem, "device: \"device\" is missing");
}

TEST(ControlProtocol, StepRoundTripIsExact) {
  StepMetrics s;
  s.step = 41;
  s.steps = 5000000000;  // past int32
  s.loss = 2.718281828459045;
  s.lr = 3e-4;
  s.grad_norm = 0.1 + 0.2;  // not short in decimal: the round trip must keep every bit
  s.tokens_per_s = 12345.678;
  s.rss_mib = 1024.5;
  s.peak_rss_mib = 2048.75;
  WorkerMessage m = parse_ok(encode_step(s));
  EXPECT_EQ(m.kind, Kind::kStep);
  EXPECT_EQ(m.metrics.step, 41);
  EXPECT_EQ(m.metrics.steps, 5000000000);
  EXPECT_EQ(m.metrics.loss, s.loss);
  EXPECT_EQ(m.metrics.lr, s.lr);
  EXPECT_EQ(m.metrics.grad_norm, s.grad_norm);
  EXPECT_EQ(m.metrics.tokens_per_s, s.tokens_per_s);
  EXPECT_EQ(m.metrics.rss_mib, s.rss_mib);
  EXPECT_EQ(m.metrics.peak_rss_mib, s.peak_rss_mib);
}

// A diverged run reports a NaN loss; JSON has no NaN, so it travels as null and comes back NaN
// instead of making the step malformed.
TEST(ControlProtocol, NonFiniteLossTravelsAsNull) {
  StepMetrics s;
  s.loss = std::nan("");
  s.grad_norm = INFINITY;
  const std::string line = encode_step(s);
  EXPECT_NE(line.find("\"loss\":null"), std::string::npos) << line;
  WorkerMessage m = parse_ok(line);
  EXPECT_TRUE(std::isnan(m.metrics.loss));
  EXPECT_TRUE(std::isnan(m.metrics.grad_norm));  // infinity is not kept, only "not a number"
}

TEST(ControlProtocol, CheckpointEvalErrorDoneStoppedStopRoundTrip) {
  WorkerMessage c = parse_ok(encode_checkpoint(300, "/runs/job \"7\"/step_300"));
  EXPECT_EQ(c.kind, Kind::kCheckpoint);
  EXPECT_EQ(c.step, 300);
  EXPECT_EQ(c.text, "/runs/job \"7\"/step_300");

  WorkerMessage e = parse_ok(encode_eval(R"({"accuracy":0.75,"per_class":{"a":[1,2]}})"));
  EXPECT_EQ(e.kind, Kind::kEval);
  EXPECT_EQ(e.text, R"({"accuracy":0.75,"per_class":{"a":[1,2]}})");

  WorkerMessage err = parse_ok(encode_error("CUDA out of memory\nline two"));
  EXPECT_EQ(err.kind, Kind::kError);
  EXPECT_EQ(err.text, "CUDA out of memory\nline two");

  EXPECT_EQ(parse_ok(encode_done()).kind, Kind::kDone);

  WorkerMessage st = parse_ok(encode_stopped(77));
  EXPECT_EQ(st.kind, Kind::kStopped);
  EXPECT_EQ(st.step, 77);

  // The launcher's one message is no worker message, but the workers recognise it.
  const std::string stop = encode_stop("SIGTERM");
  EXPECT_TRUE(is_stop_message(stop));
  EXPECT_FALSE(parse_worker_message(stop).message.has_value());
  EXPECT_FALSE(is_stop_message(encode_done()));
  EXPECT_FALSE(is_stop_message("stop"));
  EXPECT_FALSE(is_stop_message(R"(["stop"])"));
}

// Reports must never throw: a message with invalid UTF-8 (a file name, say) is sent with
// U+FFFD in its place, and eval text that is not an object arrives malformed, not as a crash.
TEST(ControlProtocol, EncodersDoNotThrowOnBadInput) {
  std::string line;
  ASSERT_NO_THROW(line = encode_error(std::string("bad \xff\xfe byte")));
  WorkerMessage m = parse_ok(line);
  EXPECT_EQ(m.text, "bad \xEF\xBF\xBD\xEF\xBF\xBD byte");
  ASSERT_NO_THROW(line = encode_eval("{not json"));
  EXPECT_FALSE(parse_worker_message(line).message.has_value());
  ASSERT_NO_THROW(line = encode_eval("[1,2]"));
  EXPECT_FALSE(parse_worker_message(line).message.has_value());
}

TEST(ControlProtocol, MalformedLinesAreRejectedWithAReason) {
  const std::string hello_tail = R"(,"world":2,"host":"h","local_rank":0,"device":"cpu","pid":9})";
  const std::string tok = R"("token":"0123456789abcdef0123456789abcdef")";
  struct Case {
    std::string name, line, problem;  // problem: a substring the reason must hold
  };
  const std::vector<Case> cases = {
      {"empty line", "", "empty"},
      {"not JSON", "hello there", "not JSON"},
      {"truncated object", R"({"type":"done")", "not JSON"},
      {"two objects on one line", R"({"type":"done"}{"type":"done"})", "not JSON"},
      {"array", R"(["hello"])", "not a JSON object"},
      {"bare number", "42", "not a JSON object"},
      {"missing type", R"({"step":1})", "\"type\" is missing"},
      {"type not a string", R"({"type":7})", "\"type\" is not a string"},
      {"unknown type", R"({"type":"reboot"})", "unknown type \"reboot\""},
      {"the launcher's stop", R"({"type":"stop","reason":"x"})", "unknown type"},
      {"hello without token", R"({"type":"hello","rank":0)" + hello_tail, "\"token\" is missing"},
      {"hello token not a string", R"({"type":"hello","token":123,"rank":0)" + hello_tail, "\"token\" is not a string"},
      {"hello rank negative", "{\"type\":\"hello\"," + tok + ",\"rank\":-1" + hello_tail, "\"rank\" is out of range"},
      {"hello rank fractional", "{\"type\":\"hello\"," + tok + ",\"rank\":1.5" + hello_tail, "\"rank\" is not an integer"},
      {"hello rank a string", "{\"type\":\"hello\"," + tok + ",\"rank\":\"0\"" + hello_tail, "\"rank\" is not an integer"},
      {"hello rank past int", "{\"type\":\"hello\"," + tok + ",\"rank\":4294967296" + hello_tail, "\"rank\" is out of range"},
      {"hello rank not below world", "{\"type\":\"hello\"," + tok + ",\"rank\":2" + hello_tail, "below \"world\""},
      {"hello pid zero", "{\"type\":\"hello\"," + tok + R"(,"rank":0,"world":2,"host":"h","local_rank":0,"device":"cpu","pid":0})",
       "\"pid\" is out of range"},
      {"step with string loss",
       R"({"type":"step","step":1,"steps":2,"loss":"0.5","lr":0,"grad_norm":0,"tokens_per_s":0,"rss_mib":0,"peak_rss_mib":0})",
       "\"loss\" is not a number"},
      {"step missing lr", R"({"type":"step","step":1,"steps":2,"loss":0.5})", "\"lr\" is missing"},
      {"step with nested garbage",
       R"({"type":"step","step":{"a":[1,{"b":null}]},"steps":2,"loss":0.5,"lr":0,"grad_norm":0,"tokens_per_s":0,"rss_mib":0,"peak_rss_mib":0})",
       "\"step\" is not an integer"},
      {"step past int64", R"({"type":"step","step":9223372036854775808,"steps":1})", "\"step\" is out of range"},
      {"step number past uint64", R"({"type":"stopped","step":123456789012345678901234567890})", "\"step\" is not an integer"},
      {"number overflowing a double", R"({"type":"heartbeat","rss_mib":1e400,"peak_rss_mib":0})", "not JSON"},
      {"heartbeat rss a bool", R"({"type":"heartbeat","rss_mib":true,"peak_rss_mib":0})", "\"rss_mib\" is not a number"},
      {"checkpoint path missing", R"({"type":"checkpoint","step":3})", "\"path\" is missing"},
      {"eval metrics a string", R"({"type":"eval","metrics":"0.9"})", "\"metrics\" is not an object"},
      {"error message an array", R"({"type":"error","message":["x"]})", "\"message\" is not a string"},
      {"invalid UTF-8 in a string", "{\"type\":\"error\",\"message\":\"\xc3\x28\"}", "not JSON"},
      {"invalid UTF-8 outside strings", "\xff\xfe{}", "not JSON"},
      {"NUL byte", std::string("{\"type\":\"done\"}\0x", 17), "not JSON"},
      {"deep nesting", std::string(100000, '['), "not JSON"},
  };
  ASSERT_GE(cases.size(), 15u);
  for (const Case& c : cases) {
    ParseResult r;
    ASSERT_NO_THROW(r = parse_worker_message(c.line)) << c.name;
    EXPECT_FALSE(r.message.has_value()) << c.name;
    EXPECT_NE(r.problem.find(c.problem), std::string::npos) << c.name << ": got \"" << r.problem << "\"";
  }
}

TEST(ControlProtocol, UnknownFieldsAreIgnored) {
  // A newer worker may add fields; an older launcher still reads the ones it knows.
  WorkerMessage m = parse_ok(R"({"type":"stopped","step":5,"extra":{"x":1}})");
  EXPECT_EQ(m.step, 5);
}

TEST(ControlProtocol, TokensEqual) {
  const std::string t = "0123456789abcdef0123456789abcdef";
  EXPECT_TRUE(tokens_equal(t, t));
  EXPECT_TRUE(tokens_equal(t, std::string(t)));
  EXPECT_FALSE(tokens_equal(t, "0123456789abcdef0123456789abcdeF"));  // last byte
  EXPECT_FALSE(tokens_equal(t, "1123456789abcdef0123456789abcdef"));  // first byte
  EXPECT_FALSE(tokens_equal(t, t.substr(0, 31)));                     // a prefix
  EXPECT_FALSE(tokens_equal(t, t + "0"));
  EXPECT_FALSE(tokens_equal(t, std::string(t.c_str(), 16) + std::string(16, '\0')));
  EXPECT_FALSE(tokens_equal("", ""));  // no token lets nobody in
  EXPECT_FALSE(tokens_equal(t, ""));
}

TEST(ControlProtocol, RandomTokenIs32HexAndFresh) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    const std::string t = random_token();
    ASSERT_EQ(t.size(), 32u) << t;
    EXPECT_EQ(t.find_first_not_of("0123456789abcdef"), std::string::npos) << t;
    seen.insert(t);
  }
  EXPECT_EQ(seen.size(), 100u);
}

}  // namespace
}  // namespace gt::control
