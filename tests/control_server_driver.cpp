// The launcher's control server (control/control_server.hpp) as a program, for
// tests/control_attack.py: it listens, prints every event as one line, and ends with the drop
// counts, so a test can throw real sockets at it and read back what it made of them.
//   control_server_driver [--token T] [--seconds S] [--port P] [--bind ADDR]
//                         [--stop-after-hello] [--until-done N]
// Prints "token T" (when it made one), "listening HOST:PORT", then one line per event; with
// --stop-after-hello it calls request_stop once rank 0 said hello ("stop requested"); with
// --until-done it ends once N ranks said done and disconnected; last "drops unauthenticated=U
// oversized=O malformed=M". A taken port is one line on stderr and exit 2, as in the launcher.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>

#include "common/error.hpp"
#include "control/control_server.hpp"

namespace {

using gt::control::Event;
using gt::control::Kind;

void print_event(const Event& e) {
  const auto& m = e.message;
  if (e.kind == Event::Kind::kDisconnected) {
    std::printf("disconnected rank=%d\n", e.rank);
  } else {
    switch (m.kind) {
      case Kind::kHello:
        std::printf("hello rank=%d world=%d host=%s local_rank=%d device=%s pid=%lld\n", e.rank, m.hello.world,
                    m.hello.host.c_str(), m.hello.local_rank, m.hello.device.c_str(),
                    static_cast<long long>(m.hello.pid));
        break;
      case Kind::kHeartbeat:
        std::printf("heartbeat rank=%d rss_mib=%.3f peak_rss_mib=%.3f\n", e.rank, m.metrics.rss_mib,
                    m.metrics.peak_rss_mib);
        break;
      case Kind::kStep:
        std::printf("step rank=%d step=%lld steps=%lld loss=%.9g lr=%.9g rss_mib=%.3f\n", e.rank,
                    static_cast<long long>(m.metrics.step), static_cast<long long>(m.metrics.steps), m.metrics.loss,
                    m.metrics.lr, m.metrics.rss_mib);
        break;
      case Kind::kDevice:
        std::printf("device rank=%d device=%s\n", e.rank, m.text.c_str());
        break;
      case Kind::kCheckpoint:
        std::printf("checkpoint rank=%d step=%lld path=%s\n", e.rank, static_cast<long long>(m.step), m.text.c_str());
        break;
      case Kind::kEval:
        std::printf("eval rank=%d metrics=%s\n", e.rank, m.text.c_str());
        break;
      case Kind::kError:
        std::printf("error rank=%d message=%s\n", e.rank, m.text.c_str());
        break;
      case Kind::kDone:
        std::printf("done rank=%d\n", e.rank);
        break;
      case Kind::kStopped:
        std::printf("stopped rank=%d step=%lld\n", e.rank, static_cast<long long>(m.step));
        break;
    }
  }
  std::fflush(stdout);
}

int body(int argc, char** argv) {
  std::string token, bind = "127.0.0.1";
  double seconds = 10;
  int port = 0, until_done = 0;
  bool stop_after_hello = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) gt::fail(arg, "needs a value");
      return argv[++i];
    };
    if (arg == "--token") token = value();
    else if (arg == "--seconds") seconds = std::atof(value().c_str());
    else if (arg == "--port") port = std::atoi(value().c_str());
    else if (arg == "--bind") bind = value();
    else if (arg == "--until-done") until_done = std::atoi(value().c_str());
    else if (arg == "--stop-after-hello") stop_after_hello = true;
    else gt::fail(arg, "unknown option");
  }
  if (token.empty()) {
    token = gt::control::random_token();
    std::printf("token %s\n", token.c_str());
  }
  gt::control::Server server(bind, port, token, "--port");
  std::printf("listening %s\n", server.address().c_str());
  std::fflush(stdout);

  std::set<int> done, finished;  // said done; said done and then disconnected
  bool stop_sent = false;
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end && (until_done == 0 || int(finished.size()) < until_done)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    server.poll_for(std::min(left, std::chrono::milliseconds(200)), [&](const Event& e) {
      print_event(e);
      if (e.kind == Event::Kind::kMessage && e.message.kind == Kind::kDone) done.insert(e.rank);
      if (e.kind == Event::Kind::kDisconnected && done.count(e.rank)) finished.insert(e.rank);
      if (stop_after_hello && !stop_sent && e.kind == Event::Kind::kMessage && e.message.kind == Kind::kHello &&
          e.rank == 0) {
        server.request_stop("test: rank 0 said hello");
        stop_sent = true;
        std::printf("stop requested\n");
        std::fflush(stdout);
      }
    });
  }
  const auto d = server.drops();
  std::printf("heard ranks=%zu\n", server.last_heard().size());
  std::printf("drops unauthenticated=%lld oversized=%lld malformed=%lld\n", static_cast<long long>(d.unauthenticated),
              static_cast<long long>(d.oversized), static_cast<long long>(d.malformed));
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return gt::run_main("control_server_driver", body, argc, argv); }
