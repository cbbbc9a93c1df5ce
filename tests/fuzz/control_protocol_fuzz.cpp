// The launcher's side of the control protocol reads lines from any process that connects:
// parse_worker_message must never throw, must answer either a message or a problem, and a
// message it accepts must survive its own encoder (what a worker would send back).
#include <cstdint>
#include <string>

#include "control/control_protocol.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace control = gt::control;

namespace {

// Encodes m as a worker would and parses it again: same kind, same fields.
void check_round_trip(const control::WorkerMessage& m) {
  std::string line;
  switch (m.kind) {
    case control::Kind::kHello: line = control::encode_hello(m.hello); break;
    case control::Kind::kDevice: line = control::encode_device(m.text); break;
    case control::Kind::kHeartbeat: line = control::encode_heartbeat(m.metrics); break;
    case control::Kind::kStep: line = control::encode_step(m.metrics); break;
    case control::Kind::kCheckpoint: line = control::encode_checkpoint(m.step, m.text); break;
    case control::Kind::kEval: line = control::encode_eval(m.text); break;
    case control::Kind::kError: line = control::encode_error(m.text); break;
    case control::Kind::kDone: line = control::encode_done(); break;
    case control::Kind::kStopped: line = control::encode_stopped(m.step); break;
  }
  FUZZ_CHECK(line.find('\n') == std::string::npos, "an encoded message holds a newline");
  const control::ParseResult again = control::parse_worker_message(line);
  FUZZ_CHECK(again.message.has_value(), "an accepted message, encoded again, is refused");
  FUZZ_CHECK(again.message->kind == m.kind, "the round trip changed the kind");
  FUZZ_CHECK(again.message->step == m.step, "the round trip changed the step");
  FUZZ_CHECK(again.message->hello.rank == m.hello.rank && again.message->hello.world == m.hello.world &&
                 again.message->hello.pid == m.hello.pid,
             "the round trip changed hello's numbers");
  // Strings holding invalid UTF-8 are replaced on encoding; valid ones come back unchanged, and
  // the parser only accepts valid UTF-8, so every accepted string is compared.
  FUZZ_CHECK(again.message->hello.token == m.hello.token, "the round trip changed the token");
  if (m.kind != control::Kind::kEval) FUZZ_CHECK(again.message->text == m.text, "the round trip changed the text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string line(reinterpret_cast<const char*>(data), size);
  const control::ParseResult r = control::parse_worker_message(line);
  FUZZ_CHECK(r.message.has_value() != !r.problem.empty(), "neither or both of a message and a problem");
  FUZZ_CHECK(r.problem.find('\n') == std::string::npos, "a problem spans lines (the launcher logs it as one)");
  if (r.message) check_round_trip(*r.message);
  control::is_stop_message(line);
  return 0;
}
