#include "control/control_server.hpp"

#include <unistd.h>

#include <boost/asio.hpp>
#include <deque>
#include <set>

#include "common/error.hpp"

namespace gt::control {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

// A peer that connects and never says hello holds a socket; after this it is dropped (and
// counted as unauthenticated). Workers say hello right after connecting.
constexpr std::chrono::seconds kHelloDeadline{30};
// After a failed accept (out of file descriptors, say) the next try waits a little, instead of
// spinning on the same error.
constexpr std::chrono::milliseconds kAcceptRetry{100};

struct Connection {
  explicit Connection(asio::io_context& io)
      : socket(io), input(kMaxMessageBytes + 1), hello_deadline(io) {}
  tcp::socket socket;
  asio::streambuf input;  // max_size: a line longer than kMaxMessageBytes fails the read
  asio::steady_timer hello_deadline;
  std::deque<std::string> outbox;  // lines waiting for async_write, front being written
  int rank = -1;                   // set by an accepted hello
  bool closed = false;
};
using ConnectionPtr = std::shared_ptr<Connection>;

}  // namespace

struct Server::Impl {
  // The io_context goes last: handlers still queued hold connections, whose sockets must be
  // destroyed while their io_context lives (it destroys such handlers in its destructor).
  asio::io_context io;
  tcp::acceptor acceptor{io};
  asio::steady_timer accept_retry{io};
  std::string token;
  std::string advertised_host;
  std::set<ConnectionPtr> open;        // every open connection, so the destructor can close them
  std::map<int, ConnectionPtr> ranks;  // the authenticated connection of each rank
  std::map<int, Clock::time_point> heard;
  std::deque<Event> pending;
  DropCounts drops;
  std::string stop_line;  // non-empty once request_stop was called

  void accept() {
    acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted) return;
      if (ec) {
        accept_retry.expires_after(kAcceptRetry);
        accept_retry.async_wait([this](const boost::system::error_code& e) {
          if (!e) accept();
        });
        return;
      }
      auto c = std::make_shared<Connection>(io);
      c->socket = std::move(socket);
      open.insert(c);
      c->hello_deadline.expires_after(kHelloDeadline);
      c->hello_deadline.async_wait([this, c](const boost::system::error_code& e) {
        if (e || c->closed || c->rank >= 0) return;
        ++drops.unauthenticated;
        close(c);
      });
      read(c);
      accept();
    });
  }

  void read(const ConnectionPtr& c) {
    asio::async_read_until(c->socket, c->input, '\n', [this, c](const boost::system::error_code& ec, std::size_t n) {
      if (c->closed) return;
      if (ec == asio::error::not_found) {  // the buffer filled up without a newline
        ++drops.oversized;
        return close(c);
      }
      if (ec) {
        // Bytes without their newline when the peer went away: a message cut short.
        if (c->input.size() > 0) ++(c->rank >= 0 ? drops.malformed : drops.unauthenticated);
        return close(c);
      }
      auto begin = asio::buffers_begin(c->input.data());
      std::string line(begin, begin + static_cast<std::ptrdiff_t>(n - 1));
      c->input.consume(n);
      if (handle(c, line)) read(c);
    });
  }

  // False when the connection was closed.
  bool handle(const ConnectionPtr& c, const std::string& line) {
    ParseResult parsed = parse_worker_message(line);
    if (c->rank < 0) {  // the first message: a hello with this job's token or nothing
      if (!parsed.message || parsed.message->kind != Kind::kHello ||
          !tokens_equal(parsed.message->hello.token, token)) {
        ++drops.unauthenticated;
        close(c);
        return false;
      }
      authenticate(c, parsed.message->hello.rank);
    } else if (!parsed.message || parsed.message->kind == Kind::kHello) {
      ++drops.malformed;  // kept: one bad line from a live worker is no reason to lose it
      return true;
    }
    heard[c->rank] = Clock::now();
    pending.push_back(Event{Event::Kind::kMessage, c->rank, std::move(*parsed.message)});
    return true;
  }

  void authenticate(const ConnectionPtr& c, int rank) {
    c->rank = rank;
    c->hello_deadline.cancel();
    auto old = ranks.find(rank);
    if (old != ranks.end()) {
      // A rank that connects again (it lost its connection and retried) replaces itself; the old
      // connection's end is no disconnect of the rank.
      ConnectionPtr previous = old->second;
      ranks.erase(old);
      close(previous);
    }
    ranks[rank] = c;
    if (!stop_line.empty()) send(c, stop_line);
  }

  void send(const ConnectionPtr& c, const std::string& line) {
    if (c->closed) return;
    c->outbox.push_back(line + "\n");
    if (c->outbox.size() == 1) write(c);
  }

  void write(const ConnectionPtr& c) {
    asio::async_write(c->socket, asio::buffer(c->outbox.front()), [this, c](const boost::system::error_code& ec, std::size_t) {
      if (c->closed) return;
      if (ec) return close(c);
      c->outbox.pop_front();
      if (!c->outbox.empty()) write(c);
    });
  }

  void close(const ConnectionPtr& c) {
    if (c->closed) return;
    c->closed = true;
    boost::system::error_code ignored;
    c->hello_deadline.cancel();
    c->socket.shutdown(tcp::socket::shutdown_both, ignored);
    c->socket.close(ignored);
    open.erase(c);
    auto it = ranks.find(c->rank);
    if (it != ranks.end() && it->second == c) {
      ranks.erase(it);
      pending.push_back(Event{Event::Kind::kDisconnected, c->rank, {}});
    }
  }
};

Server::Server(const std::string& bind_address, int port, std::string token, const std::string& flag_name)
    : impl_(std::make_unique<Impl>()) {
  const std::string where = flag_name + " " + std::to_string(port);
  if (port < 0 || port > 65535) fail(where, "not a port (0 to 65535)");
  impl_->token = std::move(token);
  boost::system::error_code ec;
  tcp::resolver resolver(impl_->io);
  auto endpoints = resolver.resolve(bind_address, std::to_string(port),
                                    tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || endpoints.empty()) fail(where, "cannot resolve the address " + bind_address);
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  tcp::acceptor& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  // Lets a restarted launcher take its port back from connections still in TIME_WAIT; a port
  // someone listens on still fails below.
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (ec == asio::error::address_in_use) fail(where, "address already in use");
  if (ec == boost::system::errc::address_not_available) fail(where, "cannot listen on " + bind_address + " (not an address of this host)");
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) fail(where, "cannot listen on " + bind_address + ": " + ec.message());

  const asio::ip::address bound = a.local_endpoint().address();
  if (bound.is_unspecified()) {  // 0.0.0.0 or ::, workers on other hosts need a name
    char host[256] = {};
    impl_->advertised_host = gethostname(host, sizeof host - 1) == 0 ? host : "127.0.0.1";
  } else {
    impl_->advertised_host = bound.is_v6() ? "[" + bound.to_string() + "]" : bound.to_string();
  }
  impl_->accept();
}

Server::~Server() {
  boost::system::error_code ignored;
  impl_->acceptor.close(ignored);
  impl_->accept_retry.cancel();
  for (const ConnectionPtr& c : std::set<ConnectionPtr>(impl_->open)) impl_->close(c);
}

std::string Server::address() const { return impl_->advertised_host + ":" + std::to_string(port()); }

int Server::port() const { return impl_->acceptor.local_endpoint().port(); }

void Server::poll_for(std::chrono::milliseconds budget, const std::function<void(const Event&)>& on_event) {
  asio::io_context& io = impl_->io;
  const auto deadline = Clock::now() + budget;
  // Runs handlers one at a time until one produced an event or the budget is spent; the
  // acceptor always waits, so run_one_for blocks rather than returning for lack of work.
  while (impl_->pending.empty()) {
    const auto left = deadline - Clock::now();
    if (left <= Clock::duration::zero()) break;
    if (io.stopped()) io.restart();
    io.run_one_for(left);
  }
  if (io.stopped()) io.restart();
  io.poll();  // whatever else is ready, so a burst arrives as one batch
  // Swapped out first: on_event may call request_stop, which can add events.
  std::deque<Event> events;
  events.swap(impl_->pending);
  for (const Event& e : events) on_event(e);
}

void Server::request_stop(const std::string& reason) {
  if (!impl_->stop_line.empty()) return;  // once: a second Ctrl-C must not queue a second stop
  impl_->stop_line = encode_stop(reason);
  for (const auto& [rank, c] : std::map<int, ConnectionPtr>(impl_->ranks)) impl_->send(c, impl_->stop_line);
}

std::map<int, std::chrono::steady_clock::time_point> Server::last_heard() const { return impl_->heard; }

DropCounts Server::drops() const { return impl_->drops; }

}  // namespace gt::control
