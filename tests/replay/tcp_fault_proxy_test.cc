// TcpFaultProxy in front of a small echo server: each mode does to real
// sockets what its contract says, within the times a test relies on, and
// the proxy keeps its bounds and goes away promptly.
#define BOOST_TEST_MODULE tcp_fault_proxy_test
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <cerrno>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "replay/tcp_fault_proxy.h"

using carapace::TcpFaultProxy;
using Mode = TcpFaultProxy::Mode;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

bool send_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Echoes every connection's bytes back, one thread per connection; half-closes
// its side when the client does. Blocking sockets: the destructor shuts them
// down to wake the threads.
class EchoServer {
 public:
  EchoServer() {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr = loopback(0);
    socklen_t len = sizeof addr;
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(listen_fd_, 128) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      throw std::runtime_error("EchoServer: cannot listen");
    }
    port_ = ntohs(addr.sin_port);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~EchoServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);  // on Linux this wakes the blocked accept()
    accept_thread_.join();
    for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    for (std::thread& t : threads_) t.join();
    for (int fd : fds_) ::close(fd);
    ::close(listen_fd_);
  }
  uint16_t port() const { return port_; }

 private:
  void accept_loop() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
      if (fd < 0) return;
      // The fd stays open until the destructor, so that its number is not
      // reused while the destructor may still shut it down.
      fds_.push_back(fd);
      threads_.emplace_back([fd] {
        char buf[16384];
        ssize_t n;
        while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
          if (!send_all(fd, buf, static_cast<size_t>(n))) return;
        }
        if (n == 0) ::shutdown(fd, SHUT_WR);
      });
    }
  }

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  std::thread accept_thread_;
  std::vector<int> fds_;  // accept thread's until it is joined
  std::vector<std::thread> threads_;
};

// A connected client socket (blocking, TCP_NODELAY), closed with the object.
class Client {
 public:
  explicit Client(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a = loopback(port);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("cannot connect");
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Client() {
    if (fd_ >= 0) ::close(fd_);
  }
  Client(Client&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Client(const Client&) = delete;

  int fd() const { return fd_; }
  bool send(const std::string& s) const { return send_all(fd_, s.data(), s.size()); }

 private:
  int fd_ = -1;
};

enum class Got { kData, kEof, kReset, kNothing, kError };

const char* name(Got g) {
  switch (g) {
    case Got::kData: return "data";
    case Got::kEof: return "EOF";
    case Got::kReset: return "ECONNRESET";
    case Got::kNothing: return "nothing";
    case Got::kError: return "another error";
  }
  return "?";
}

// What one read within `timeout` finds (the bytes, if any, appended to `out`).
Got read_once(int fd, std::chrono::milliseconds timeout, std::string* out = nullptr) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(timeout.count())) == 0) return Got::kNothing;
  char buf[65536];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n > 0) {
    if (out != nullptr) out->append(buf, static_cast<size_t>(n));
    return Got::kData;
  }
  if (n == 0) return Got::kEof;
  return errno == ECONNRESET ? Got::kReset : Got::kError;
}

// Up to `size` bytes read before `deadline` (fewer on EOF or error).
std::string read_exactly(int fd, size_t size, std::chrono::milliseconds within = 3s) {
  std::string got;
  auto deadline = Clock::now() + within;
  while (got.size() < size) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left <= 0ms || read_once(fd, left, &got) != Got::kData) break;
  }
  return got;
}

bool closed(Got g) { return g == Got::kEof || g == Got::kReset; }

bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds within = 3s) {
  auto deadline = Clock::now() + within;
  while (!pred()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

// Whole milliseconds since `start` (a count, so that Boost.Test can print it).
long ms_since(Clock::time_point start) {
  return static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count());
}

std::string echoed(const Client& c, const std::string& text) {
  if (!c.send(text)) return "(send failed)";
  return read_exactly(c.fd(), text.size());
}

}  // namespace

BOOST_AUTO_TEST_CASE(pass_echoes_a_mebibyte_intact) {
  EchoServer echo;
  TcpFaultProxy proxy(echo.port());
  Client c(proxy.port());
  std::string data(1 << 20, '\0');
  std::mt19937 rng(7);
  for (char& ch : data) ch = static_cast<char>(rng());

  // Written from another thread: the echo comes back while it is written.
  std::thread writer([&] { c.send(data); });
  std::string back = read_exactly(c.fd(), data.size(), 4s);
  writer.join();
  BOOST_TEST(back.size() == data.size());
  BOOST_TEST((back == data));
  BOOST_TEST(wait_for([&] { return proxy.bytes_forwarded() == 2 * data.size(); }));
  BOOST_TEST(proxy.connections() == 1u);

  // A FIN is passed on too: the echo server answers the client's with its own.
  ::shutdown(c.fd(), SHUT_WR);
  Got g = read_once(c.fd(), 1s);
  BOOST_CHECK_MESSAGE(g == Got::kEof, "after its FIN the client got " << name(g));
}

BOOST_AUTO_TEST_CASE(blackhole_forwards_nothing_keeps_connections_open_and_heals) {
  EchoServer echo;
  TcpFaultProxy proxy(echo.port());
  Client before(proxy.port());
  BOOST_TEST(echoed(before, "hello") == "hello");

  proxy.set_mode(Mode::kBlackhole);
  uint64_t forwarded = proxy.bytes_forwarded();
  Client during(proxy.port());  // accepted, but not connected to the target yet
  BOOST_TEST(before.send("lost"));
  BOOST_TEST(during.send("lost too"));
  Got g = read_once(before.fd(), 300ms);
  BOOST_CHECK_MESSAGE(g == Got::kNothing, "in the partition the client got " << name(g));
  g = read_once(during.fd(), 0ms);
  BOOST_CHECK_MESSAGE(g == Got::kNothing, "a connection made in the partition got " << name(g));
  BOOST_TEST(proxy.bytes_forwarded() == forwarded);

  // What was sent in the partition is lost; what is sent after it gets through.
  proxy.set_mode(Mode::kPass);
  BOOST_TEST(echoed(before, "found") == "found");
  BOOST_TEST(echoed(during, "late") == "late");
  BOOST_TEST(proxy.connections() == 2u);
}

BOOST_AUTO_TEST_CASE(blackhole_drops_what_was_waiting_to_be_forwarded) {
  EchoServer echo;
  TcpFaultProxy proxy(echo.port());
  Client c(proxy.port());
  BOOST_TEST(echoed(c, "warm") == "warm");

  proxy.set_mode(Mode::kDelay, 10s);
  BOOST_TEST(c.send("queued"));
  proxy.set_mode(Mode::kBlackhole);
  // Read by the proxy by now, in either mode: held back, then dropped with
  // the queue; or dropped as it was read.
  std::this_thread::sleep_for(100ms);
  proxy.set_mode(Mode::kPass);
  BOOST_TEST(echoed(c, "fresh") == "fresh");
}

BOOST_AUTO_TEST_CASE(reset_resets_open_and_new_connections_until_the_mode_changes) {
  EchoServer echo;
  TcpFaultProxy proxy(echo.port());
  Client live(proxy.port());
  BOOST_TEST(echoed(live, "hi") == "hi");

  // An RST, not a FIN: the client's next read fails with ECONNRESET.
  proxy.set_mode(Mode::kReset);
  Got g = read_once(live.fd(), 200ms);
  BOOST_CHECK_MESSAGE(g == Got::kReset, "an open connection got " << name(g));
  Client refused(proxy.port());  // the kernel completes the handshake; the proxy resets it on accept
  g = read_once(refused.fd(), 200ms);
  BOOST_CHECK_MESSAGE(g == Got::kReset, "a new connection got " << name(g));

  proxy.set_mode(Mode::kPass);
  Client after(proxy.port());
  BOOST_TEST(echoed(after, "again") == "again");
}

BOOST_AUTO_TEST_CASE(delay_holds_each_chunk_back_in_order) {
  EchoServer echo;
  TcpFaultProxy proxy(echo.port());
  Client c(proxy.port());
  BOOST_TEST(echoed(c, "warm") == "warm");  // the target's connection is made before timing starts

  proxy.set_mode(Mode::kDelay, 200ms);
  std::string sent;
  auto start = Clock::now();
  for (int k = 0; k < 20; ++k) {
    std::string piece = std::to_string(100 + k) + ",";
    BOOST_TEST(c.send(piece));
    sent += piece;
    std::this_thread::sleep_for(5ms);
  }
  std::string first;
  BOOST_TEST((read_once(c.fd(), 2s, &first) == Got::kData));
  auto first_after = ms_since(start);
  std::string back = first + read_exactly(c.fd(), sent.size() - first.size());
  auto all_after = ms_since(start);
  BOOST_TEST(back == sent);
  // Delayed on the way there and on the way back.
  BOOST_TEST(first_after >= 400);
  // Chunks wait side by side, not one after another (20 x 200 ms).
  BOOST_TEST(all_after < 1500);
}

BOOST_AUTO_TEST_CASE(connections_past_the_limit_are_closed_at_once) {
  EchoServer echo;
  TcpFaultProxy proxy(echo.port());
  std::vector<Client> clients;
  for (int k = 0; k < 70; ++k) clients.emplace_back(proxy.port());
  BOOST_TEST(wait_for([&] { return proxy.connections() == 70u; }));
  for (size_t k = 0; k < TcpFaultProxy::kMaxConnections; ++k) {
    BOOST_TEST(echoed(clients[k], "#" + std::to_string(k)) == "#" + std::to_string(k));
  }
  for (size_t k = TcpFaultProxy::kMaxConnections; k < clients.size(); ++k) {
    Got g = read_once(clients[k].fd(), 1s);
    BOOST_CHECK_MESSAGE(closed(g), "connection " << k << " got " << name(g));
  }
}

BOOST_AUTO_TEST_CASE(destructor_with_open_connections_returns_promptly) {
  EchoServer echo;
  auto proxy = std::make_unique<TcpFaultProxy>(echo.port());
  std::vector<Client> clients;
  for (int k = 0; k < 3; ++k) {
    clients.emplace_back(proxy->port());
    BOOST_TEST(echoed(clients.back(), "up") == "up");
  }
  proxy->set_mode(Mode::kDelay, 10s);  // leaves chunks waiting inside the proxy
  for (const Client& c : clients) BOOST_TEST(c.send("pending"));
  std::this_thread::sleep_for(20ms);

  auto start = Clock::now();
  proxy.reset();
  BOOST_TEST(ms_since(start) < 1000);
  for (const Client& c : clients) {
    Got g = read_once(c.fd(), 1s);
    BOOST_CHECK_MESSAGE(closed(g), "after the proxy went, a client got " << name(g));
  }
}
