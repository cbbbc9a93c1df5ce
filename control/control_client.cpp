// POSIX sockets rather than Boost.Asio: two threads use one socket (the trainer sends, the
// background thread sends heartbeats and reads), which plain file descriptors allow and an asio
// socket object does not; SO_SNDTIMEO bounds a send without an event loop; shutdown() wakes
// the reading thread at exit; and the worker gains no dependency.
#include "control/control_client.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>

#include "common/error.hpp"
#include "common/host.hpp"
#include "control/control_protocol.hpp"

namespace gt::control {
namespace {

using Clock = std::chrono::steady_clock;

// How long connect() keeps trying: the launcher listens before it starts mpirun, so only a slow
// network needs more than one try.
constexpr std::chrono::seconds kConnectWindow{5};
// A send that cannot finish in this time (the launcher stopped reading) gives up and
// disconnects: a training step must not wait on the launcher.
constexpr int kSendTimeoutS = 2;
constexpr double kDefaultHeartbeatS = 2;

struct Rss {
  double now_mib = 0, peak_mib = 0;
};

// Both from one read of /proc/self/status. The kernel updates VmHWM lazily (RSS is counted per
// thread and folded in later), so it can read below VmRSS: the peak is at least the current.
Rss read_rss() {
  Rss r;
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, 6, "VmRSS:") == 0) r.now_mib = std::strtod(line.c_str() + 6, nullptr) / 1024.0;
    if (line.compare(0, 6, "VmHWM:") == 0) r.peak_mib = std::strtod(line.c_str() + 6, nullptr) / 1024.0;
  }
  r.peak_mib = std::max(r.peak_mib, r.now_mib);
  return r;  // zeros where the kernel shows neither
}

// The GPU peaks the trainer last noted (note_gpu_memory), read by the heartbeat thread.
std::atomic<double> gpu_peak_allocated_mib{0}, gpu_peak_reserved_mib{0};

// What a heartbeat and a step carry about this process's memory.
StepMetrics memory_now() {
  StepMetrics m;
  const Rss rss = read_rss();
  m.rss_mib = rss.now_mib;
  m.peak_rss_mib = rss.peak_mib;
  m.gpu_peak_allocated_mib = gpu_peak_allocated_mib.load();
  m.gpu_peak_reserved_mib = gpu_peak_reserved_mib.load();
  return m;
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// One TCP connection to the launcher. The trainer's thread sends reports; one background
// thread sends heartbeats and reads the launcher's lines. Destroyed at process exit, where it
// wakes and joins that thread, so a worker that never called report_done still exits.
class Client {
 public:
  ~Client() { close(); }

  bool connected() const { return connected_; }
  bool stop_requested() const { return stop_; }

  void connect(int rank, int world_size) {
    if (fd_ >= 0) return;
    const std::string address = env_or_empty(kAddressEnv);
    if (address.empty()) return;  // plain mpirun: no launcher
    const std::string where = std::string(kAddressEnv) + "=" + address;
    const std::string token = env_or_empty(kTokenEnv);
    if (token.empty()) fail(kTokenEnv, std::string("not set, but ") + kAddressEnv + " is");
    heartbeat_s_ = heartbeat_seconds();

    const std::size_t colon = address.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == address.size()) fail(where, "expected HOST:PORT");
    std::string host = address.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    std::string problem;
    fd_ = connect_with_retries(host, address.substr(colon + 1), problem);
    if (fd_ < 0) fail(where, "cannot connect to the launcher: " + problem);
    timeval timeout{kSendTimeoutS, 0};
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // a few small lines a second

    Hello h;
    h.token = token;
    h.rank = rank;
    h.world = world_size;
    h.host = this_host_name();
    h.local_rank = std::atoi(env_or_empty("OMPI_COMM_WORLD_LOCAL_RANK").c_str());
    h.device = "cpu";
    h.pid = getpid();
    connected_ = true;
    if (!send(encode_hello(h))) {
      ::close(fd_);
      fd_ = -1;
      fail(where, "the launcher closed the connection before the hello");
    }
    thread_ = std::thread([this] { background(); });
  }

  // Never throws and never waits longer than the send timeout; a failure disconnects silently
  // (the launcher's death ends the job through mpirun, not through this socket).
  bool send(const std::string& line) {
    std::lock_guard<std::mutex> lock(send_mutex_);
    if (!connected_) return false;
    const std::string data = line + "\n";
    for (std::size_t sent = 0; sent < data.size();) {
      const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        connected_ = false;
        ::shutdown(fd_, SHUT_RDWR);  // wakes the background thread, which then ends
        return false;
      }
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  // Stops the background thread and closes the socket; queued bytes (a "done") still go out.
  void close() {
    if (fd_ < 0) return;
    {
      std::lock_guard<std::mutex> lock(send_mutex_);
      connected_ = false;
      quitting_ = true;
      ::shutdown(fd_, SHUT_RDWR);
    }
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
    fd_ = -1;
  }

 private:
  static double heartbeat_seconds() {
    const std::string text = env_or_empty(kHeartbeatEnv);
    if (text.empty()) return kDefaultHeartbeatS;
    char* end = nullptr;
    const double s = std::strtod(text.c_str(), &end);
    if (*end != '\0' || !(s > 0) || s > 3600) fail(std::string(kHeartbeatEnv) + "=" + text, "expected seconds in (0, 3600]");
    return s;
  }

  // A non-blocking connect under poll, so an address that drops packets cannot hold the rank
  // for the kernel's SYN timeout (minutes). Tries again until kConnectWindow is spent.
  static int connect_with_retries(const std::string& host, const std::string& port, std::string& problem) {
    const auto give_up = Clock::now() + kConnectWindow;
    for (;;) {
      int fd = try_connect(host, port, give_up, problem);
      if (fd >= 0) return fd;
      if (Clock::now() + std::chrono::milliseconds(200) >= give_up) return -1;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }

  static int try_connect(const std::string& host, const std::string& port, Clock::time_point give_up,
                         std::string& problem) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
      problem = gai_strerror(rc);
      return -1;
    }
    int fd = -1;
    for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
      fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
      if (fd < 0) {
        problem = std::strerror(errno);
        continue;
      }
      int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
      if (err == EINPROGRESS) {
        pollfd p{fd, POLLOUT, 0};
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now()).count();
        err = ::poll(&p, 1, static_cast<int>(std::max<long long>(left, 1))) == 1 ? 0 : ETIMEDOUT;
        socklen_t len = sizeof err;
        if (err == 0) getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
      if (err != 0) {
        problem = std::strerror(err);
        ::close(fd);
        fd = -1;
      }
    }
    freeaddrinfo(found);
    if (fd >= 0) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // blocking, bounded by SO_SNDTIMEO
    return fd;
  }

  // Heartbeats on time and the launcher's lines as they come; ends when the socket does.
  void background() {
    const auto period = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(heartbeat_s_));
    auto next_beat = Clock::now() + period;
    std::string input;
    char chunk[4096];
    for (;;) {
      const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next_beat - Clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::max<long long>(wait, 0)));
      if (ready < 0 && errno != EINTR) break;
      if (ready > 0) {
        const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;  // the launcher closed, or close() shut the socket down
        input.append(chunk, static_cast<std::size_t>(n));
        for (std::size_t nl; (nl = input.find('\n')) != std::string::npos; input.erase(0, nl + 1)) {
          if (is_stop_message(input.substr(0, nl))) stop_ = true;
        }
        if (input.size() > kMaxMessageBytes) input.clear();  // no launcher sends that; drop it
      }
      if (Clock::now() >= next_beat) {
        if (!send(encode_heartbeat(memory_now()))) break;
        next_beat += period;
        if (next_beat < Clock::now()) next_beat = Clock::now() + period;  // the process was suspended
      }
    }
    std::lock_guard<std::mutex> lock(send_mutex_);
    if (connected_ && !quitting_) {
      std::fprintf(stderr, "graphtune-worker: warning: the launcher closed the control connection\n");
    }
    connected_ = false;
  }

  int fd_ = -1;
  double heartbeat_s_ = kDefaultHeartbeatS;
  std::mutex send_mutex_;  // one line at a time on the socket, whichever thread sends
  std::atomic<bool> connected_{false};
  std::atomic<bool> stop_{false};
  bool quitting_ = false;  // under send_mutex_
  std::thread thread_;
};

Client& client() {
  static Client instance;
  return instance;
}

}  // namespace

void connect(int rank, int world_size) { client().connect(rank, world_size); }
bool connected() { return client().connected(); }

void report_step(const StepMetrics& m) {
  if (!connected()) return;
  StepMetrics filled = m;
  const StepMetrics now = memory_now();
  filled.rss_mib = now.rss_mib;
  filled.peak_rss_mib = now.peak_rss_mib;
  filled.gpu_peak_allocated_mib = now.gpu_peak_allocated_mib;
  filled.gpu_peak_reserved_mib = now.gpu_peak_reserved_mib;
  client().send(encode_step(filled));
}

void report_device(const std::string& device) {
  if (connected()) client().send(encode_device(device));
}

void note_gpu_memory(double peak_allocated_mib, double peak_reserved_mib) {
  gpu_peak_allocated_mib = peak_allocated_mib;
  gpu_peak_reserved_mib = peak_reserved_mib;
}

void report_checkpoint(int64_t step, const std::string& path) {
  if (connected()) client().send(encode_checkpoint(step, path));
}

void report_eval_progress(int64_t answered, int64_t resumed, int64_t records) {
  if (!connected()) return;
  client().send(encode_eval_progress({answered, resumed, records}, memory_now()));
}

void report_eval(const std::string& metrics_json) {
  if (connected()) client().send(encode_eval(metrics_json));
}

void report_error(const std::string& message) {
  if (connected()) client().send(encode_error(message));
}

void report_stopped(int64_t step) {
  if (connected()) client().send(encode_stopped(step));
}

void report_done() {
  if (connected()) {
    client().send(encode_heartbeat(memory_now()));  // the launcher's summary shows each rank's final peaks
    client().send(encode_done());
  }
  client().close();
}

bool stop_requested() { return client().stop_requested(); }

double rss_mib() { return read_rss().now_mib; }
double peak_rss_mib() { return read_rss().peak_mib; }

}  // namespace gt::control
