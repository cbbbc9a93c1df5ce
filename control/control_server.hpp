#pragma once
// The launcher's end of the control plane (control/control_protocol.hpp): a Boost.Asio TCP
// server on one thread, driven by the launcher's own loop through poll_for(). Workers connect,
// say hello with the job token, then stream heartbeats and events. Connections that do not
// authenticate, messages over kMaxMessageBytes and malformed lines are dropped and counted;
// nothing a peer sends can stop the server.
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "control/control_protocol.hpp"

namespace gt::control {

struct Event {
  enum class Kind { kMessage, kDisconnected };
  Kind kind = Kind::kMessage;
  int rank = -1;           // the authenticated rank of the connection
  WorkerMessage message;   // kMessage (kHello included)
};

struct DropCounts {
  int64_t unauthenticated = 0;  // first message not a hello with this job's token, or a bad hello
  int64_t oversized = 0;        // a line over kMaxMessageBytes (the connection is closed)
  int64_t malformed = 0;        // not JSON, unknown type, missing or mistyped fields
};

class Server {
 public:
  // Listens on bind_address:port (port 0: any free port). A port already taken, or an address
  // that is not this host's, fails with InputError naming it ("--control-port 5000: address
  // already in use").
  Server(const std::string& bind_address, int port, std::string token, const std::string& flag_name = "--control-port");
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // "HOST:PORT" the workers connect to.
  std::string address() const;
  int port() const;

  // Runs the I/O for up to `budget` (returns earlier when at least one event was delivered);
  // each event goes to on_event on the caller's thread.
  void poll_for(std::chrono::milliseconds budget, const std::function<void(const Event&)>& on_event);

  // Sends {"type":"stop"} to every authenticated connection (and to those that authenticate later).
  void request_stop(const std::string& reason);

  // When each authenticated rank was last heard from (any valid message), by rank.
  std::map<int, std::chrono::steady_clock::time_point> last_heard() const;

  DropCounts drops() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace gt::control
