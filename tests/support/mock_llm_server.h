// MockLlmServer: a small HTTP/1.1 server on 127.0.0.1 for provider tests and
// benchmarks. It answers each request with a reply from a handler (or the
// next queued one), byte for byte, and misbehaves on demand: the body cut
// into separately sent pieces at random or chosen points, a stall (that a
// test can watch for), a connection dropped mid-body, a body without end. Keep-alive: one
// connection serves requests until the client closes it. Records every
// request (its head holds the client's credentials: tests assert on it and
// never write it anywhere).
//
// Thread-safe: the test's calls and the connections (one thread each) share
// one mutex. The destructor interrupts stalls and joins every thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace carapace::testing {

struct MockReply {
  int status = 200;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;
  bool chunked = true;          // Transfer-Encoding: chunked, else Content-Length
  bool split_randomly = false;  // also cut the body at random points
  std::vector<size_t> cuts;     // cut the body here (each piece is sent on its own)
  long drop_after = -1;         // close the connection after this many body bytes
  long stall_after = -1;        // stall after this many body bytes ...
  int stall_ms = 0;             // ... this long
  int delay_ms = 0;             // wait this long before the response's head
  int pace_us = -1;             // wait this long between pieces (-1: 50 us when cut)
  // After the body, more pieces: more(0), more(1), ... until one is "" or
  // the client goes away (an endless stream, paced by pace_us).
  std::function<std::string(size_t)> more;
};

struct MockRequest {
  std::string path;
  std::string head;  // request line and headers
  std::string body;

  // A header's value (name matched case-insensitively), or "".
  std::string header(const std::string& name) const {
    std::string lower_head = lower(head), key = "\r\n" + lower(name) + ":";
    size_t at = lower_head.find(key);
    if (at == std::string::npos) return "";
    size_t from = at + key.size();
    size_t end = head.find("\r\n", from);
    std::string v = head.substr(from, end == std::string::npos ? std::string::npos : end - from);
    while (!v.empty() && v.front() == ' ') v.erase(0, 1);
    return v;
  }

  static std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  }
};

class MockLlmServer {
 public:
  // Answers the request (`index`: 0 for the first the server received).
  using Handler = std::function<MockReply(const MockRequest& request, size_t index)>;

  explicit MockLlmServer(uint32_t seed = 1) : rng_(seed) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(fd_, 512) != 0) {
      throw std::runtime_error(std::string("MockLlmServer: ") + std::strerror(errno));
    }
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~MockLlmServer() {
    stop_ = true;
    accept_thread_.join();
    ::close(fd_);
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  MockLlmServer(const MockLlmServer&) = delete;
  MockLlmServer& operator=(const MockLlmServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Queued replies are used first; then the handler; then a 500.
  void push(MockReply r) {
    std::lock_guard lock(mu_);
    replies_.push_back(std::move(r));
  }
  void set_handler(Handler h) {
    std::lock_guard lock(mu_);
    handler_ = std::move(h);
  }

  std::vector<MockRequest> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  size_t request_count() {
    std::lock_guard lock(mu_);
    return requests_.size();
  }

  // Stalls begun so far (a test waits for one, then kills its client), and
  // stalls under way now.
  int stalls() const { return stalls_.load(); }
  int stalling() const { return stalling_.load(); }
  // Ends the stalls under way now (the rest of their replies is sent).
  void release_stalls() { released_.fetch_add(1); }
  // Connections accepted so far (keep-alive reuses them).
  int connections() const { return connections_.load(); }

  // Waits up to `timeout` for `pred`; true if it held.
  static bool wait_for(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (!pred()) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  }

 private:
  void accept_loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      int one = 1;
      ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      connections_.fetch_add(1);
      std::lock_guard lock(mu_);
      threads_.emplace_back([this, c] {
        serve(c);
        ::close(c);
      });
    }
  }

  // Sleeps `ms` unless the server stops first (or, for a stall, it is released).
  void pause(int ms) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    int released = released_.load();
    while (!stop_ && released_.load() == released && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  bool read_some(int c, std::string* buf) {
    while (!stop_) {
      pollfd p{c, POLLIN, 0};
      int n = ::poll(&p, 1, 20);
      if (n == 0) continue;
      if (n < 0) return false;
      char tmp[16384];
      ssize_t got = ::recv(c, tmp, sizeof tmp, 0);
      if (got <= 0) return false;
      buf->append(tmp, static_cast<size_t>(got));
      return true;
    }
    return false;
  }

  static bool send_all(int c, std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(c, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  static bool send_piece(int c, std::string_view piece, bool chunked) {
    if (!chunked) return send_all(c, piece);
    char size[32];
    std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
    return send_all(c, std::string(size) + std::string(piece) + "\r\n");
  }

  MockReply next_reply(const MockRequest& req) {
    Handler handler;
    size_t index = 0;
    {
      std::lock_guard lock(mu_);
      index = requests_.size();
      requests_.push_back(req);
      if (!replies_.empty()) {
        MockReply r = std::move(replies_.front());
        replies_.pop_front();
        return r;
      }
      handler = handler_;
    }
    if (handler) return handler(req, index);
    MockReply r;
    r.status = 500;
    r.body = R"({"error":{"type":"mock","message":"no reply scripted"}})";
    return r;
  }

  void serve(int c) {
    std::string buf;
    while (!stop_) {
      size_t end;
      while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
        if (!read_some(c, &buf)) return;
      }
      MockRequest req;
      req.head = buf.substr(0, end);
      size_t sp = req.head.find(' ');
      req.path = req.head.substr(sp + 1, req.head.find(' ', sp + 1) - sp - 1);
      std::string length_text = req.header("content-length");
      size_t length = length_text.empty() ? 0 : std::stoul(length_text);
      buf.erase(0, end + 4);
      while (buf.size() < length) {
        if (!read_some(c, &buf)) return;
      }
      req.body = buf.substr(0, length);
      buf.erase(0, length);
      MockReply reply = next_reply(req);
      if (reply.delay_ms > 0) pause(reply.delay_ms);
      std::string head = "HTTP/1.1 " + std::to_string(reply.status) + " " + reason(reply.status) + "\r\n";
      for (const auto& h : reply.headers) head += h + "\r\n";
      head += reply.chunked ? "Transfer-Encoding: chunked\r\n"
                            : "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
      head += "\r\n";
      if (!send_all(c, head)) return;
      std::vector<size_t> cuts = reply.cuts;
      if (reply.split_randomly && reply.body.size() > 1) {
        std::lock_guard lock(mu_);
        std::uniform_int_distribution<size_t> pick(1, reply.body.size() - 1);
        for (size_t i = 0; i < reply.body.size() / 16 + 1; ++i) cuts.push_back(pick(rng_));
      }
      if (reply.drop_after >= 0) cuts.push_back(static_cast<size_t>(reply.drop_after));
      if (reply.stall_after >= 0) cuts.push_back(static_cast<size_t>(reply.stall_after));
      cuts.push_back(reply.body.size());
      std::sort(cuts.begin(), cuts.end());
      size_t at = 0;
      for (size_t cut : cuts) {
        cut = std::min(cut, reply.body.size());
        if (reply.stall_after >= 0 && at == static_cast<size_t>(reply.stall_after) && reply.stall_ms > 0) {
          stalling_.fetch_add(1);
          stalls_.fetch_add(1);
          pause(reply.stall_ms);
          stalling_.fetch_sub(1);
          reply.stall_ms = 0;
        }
        if (reply.drop_after >= 0 && at == static_cast<size_t>(reply.drop_after)) return;
        if (cut <= at) continue;
        if (!send_piece(c, std::string_view(reply.body).substr(at, cut - at), reply.chunked)) return;
        at = cut;
        int gap_us = reply.pace_us >= 0 ? reply.pace_us : cuts.size() > 2 ? 50 : 0;
        if (gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(gap_us));
      }
      if (reply.drop_after >= 0) return;
      if (reply.more) {
        for (size_t i = 0; !stop_; ++i) {
          std::string piece = reply.more(i);
          if (piece.empty()) break;
          if (!send_piece(c, piece, reply.chunked)) return;
          if (reply.pace_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(reply.pace_us));
        }
      }
      if (reply.chunked && !send_all(c, "0\r\n\r\n")) return;
    }
  }

  static const char* reason(int status) {
    switch (status) {
      case 200: return "OK";
      case 400: return "Bad Request";
      case 401: return "Unauthorized";
      case 404: return "Not Found";
      case 429: return "Too Many Requests";
      case 500: return "Internal Server Error";
      case 503: return "Service Unavailable";
      case 529: return "Site Overloaded";
      default: return "Status";
    }
  }

  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> stalls_{0};
  std::atomic<int> stalling_{0};
  std::atomic<int> released_{0};
  std::atomic<int> connections_{0};
  std::thread accept_thread_;
  std::mutex mu_;
  std::vector<std::thread> threads_;
  std::deque<MockReply> replies_;
  Handler handler_;
  std::vector<MockRequest> requests_;
  std::mt19937 rng_;
};

}  // namespace carapace::testing
