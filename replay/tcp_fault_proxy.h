// TcpFaultProxy: a TCP proxy on 127.0.0.1 that puts network faults between
// two processes (a session host and a node, whose TLS it forwards without
// looking at a byte): the torture runner's partitions (`torture --nodes`)
// and the node tests'. Each accepted connection goes to 127.0.0.1:target_port;
// the mode says what happens to open and new connections alike:
//
//   kPass       bytes flow both ways unchanged.
//   kBlackhole  a partition: connections stay open, nothing is forwarded
//               either way. Bytes are read and dropped, so that buffers stay
//               bounded; data queued when the partition began is dropped too.
//               Not a perfect model: after a real partition TCP retransmits
//               what was lost, here it is gone for good (a TLS stream that
//               lost bytes stalls or fails). A FIN is held back, and passed
//               on when the partition ends. A connection accepted during the
//               partition reaches the target only when it ends, so the
//               target sees nothing meanwhile.
//   kReset      every open connection is reset (RST) on both sides, and
//               each new one as it is accepted.
//   kDelay      each chunk read is written `delay` after it was read, in
//               order. Switching to another mode does not hurry chunks
//               already waiting.
//
// In every mode a target that refuses the connection, and any error on
// either side, reset the connection on both sides.
//
// Bounds: at most kMaxConnections at once (more are reset as they are
// accepted), reads of kReadSize, and at most kMaxQueued waiting in each
// direction of a connection (past that the proxy stops reading that side
// until it drains, so TCP's own flow control pushes back on the sender).
//
// Thread-safety: one background thread (poll(2), woken by an eventfd) owns
// every socket; set_mode(), port(), connections() and bytes_forwarded() may
// be called from any thread. set_mode() returns once the thread applied the
// mode. The destructor stops the thread and closes every socket, as a
// process that exits would (a FIN; no RST unless unread bytes were left).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace carapace {

class TcpFaultProxy {
 public:
  enum class Mode { kPass, kBlackhole, kReset, kDelay };

  static constexpr size_t kMaxConnections = 64;
  static constexpr size_t kReadSize = 64 * 1024;
  static constexpr size_t kMaxQueued = 4 * 1024 * 1024;

  // Listens on 127.0.0.1:<ephemeral> in kPass; throws std::runtime_error if it cannot.
  explicit TcpFaultProxy(uint16_t target_port) : target_port_(target_port), buf_(kReadSize) {
    wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in addr = loopback(0);
    socklen_t len = sizeof addr;
    if (wake_fd_ < 0 || listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::listen(listen_fd_, 128) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      std::string why = std::strerror(errno);
      if (wake_fd_ >= 0) ::close(wake_fd_);
      if (listen_fd_ >= 0) ::close(listen_fd_);
      throw std::runtime_error("TcpFaultProxy: " + why);
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { run(); });
  }

  ~TcpFaultProxy() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      wake();
    }
    thread_.join();
    for (Conn& c : conns_) {
      for (int fd : c.fd) {
        if (fd >= 0) ::close(fd);
      }
    }
    ::close(listen_fd_);
    ::close(wake_fd_);
  }

  TcpFaultProxy(const TcpFaultProxy&) = delete;
  TcpFaultProxy& operator=(const TcpFaultProxy&) = delete;

  // Where clients connect.
  uint16_t port() const { return port_; }

  // `delay` is used by kDelay only. Returns once the proxy thread applied it:
  // after set_mode(kBlackhole) nothing more is forwarded, after
  // set_mode(kReset) every connection that was open has been reset.
  void set_mode(Mode m, std::chrono::milliseconds delay = {}) {
    std::unique_lock lock(mu_);
    mode_ = m;
    delay_ = delay;
    uint64_t wanted = ++requested_;
    wake();
    applied_cv_.wait(lock, [&] { return applied_ >= wanted; });
  }

  // Connections accepted so far, counting those reset at once (over the limit, or in kReset).
  size_t connections() const { return accepted_; }
  // Bytes written to either side so far.
  uint64_t bytes_forwarded() const { return forwarded_; }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr int kClient = 0, kTarget = 1;

  struct Chunk {
    Clock::time_point due;
    std::string bytes;
    size_t sent = 0;
  };
  // One direction of a connection: read from fd[s], written to fd[1 - s].
  struct Flow {
    std::deque<Chunk> queue;
    size_t queued = 0;  // bytes in `queue` not yet written
    bool eof = false;   // fd[s] sent FIN ...
    bool shut = false;  // ... and it was passed on
  };
  struct Conn {
    int fd[2] = {-1, -1};     // kClient, kTarget (-1: accepted in a partition, not connected yet)
    bool connecting = false;  // fd[kTarget]'s connect() is under way
    Flow flow[2];             // flow[s] carries what fd[s] sends
    bool done = false;        // its sockets are closed; erased after this round
  };

  static sockaddr_in loopback(uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return a;
  }

  // The eventfd's counter can only fail to grow when it is already huge,
  // that is, when a wake-up is pending anyway: the result is not needed.
  void wake() {
    uint64_t one = 1;
    if (::write(wake_fd_, &one, sizeof one) < 0) return;
  }
  // Fails only with EAGAIN, when nothing is pending.
  void drain_wake() {
    uint64_t count;
    if (::read(wake_fd_, &count, sizeof count) < 0) return;
  }

  // SO_LINGER {1, 0}: close() sends RST instead of FIN.
  static void reset_fd(int fd) {
    linger l{1, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    ::close(fd);
  }

  static void reset(Conn& c) {
    for (int& fd : c.fd) {
      if (fd >= 0) reset_fd(fd);
      fd = -1;
    }
    c.done = true;
  }

  // Side s can be read from or written to.
  static bool usable(const Conn& c, int s) { return c.fd[s] >= 0 && !(s == kTarget && c.connecting); }

  bool wants_read(const Conn& c, int s) const {
    if (!usable(c, s) || c.flow[s].eof) return false;
    if (mode_now_ == Mode::kBlackhole) return true;  // read to drop
    return usable(c, 1 - s) && c.flow[s].queued < kMaxQueued;
  }

  // The next chunk of flow s is due but has not been written yet.
  bool wants_write(const Conn& c, int s, Clock::time_point now) const {
    const Flow& f = c.flow[s];
    return mode_now_ != Mode::kBlackhole && usable(c, 1 - s) && !f.queue.empty() && f.queue.front().due <= now;
  }

  void connect_target(Conn& c) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return reset(c);
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c.fd[kTarget] = fd;
    sockaddr_in a = loopback(target_port_);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return;
    if (errno == EINPROGRESS) {
      c.connecting = true;
      return;
    }
    reset(c);  // refused: the client sees a reset, as it would without the proxy
  }

  // Called by the thread with mu_ held.
  void apply(Mode m, std::chrono::milliseconds delay) {
    for (Conn& c : conns_) {
      if (m == Mode::kReset) reset(c);
      if (m == Mode::kBlackhole) {
        for (Flow& f : c.flow) {
          f.queue.clear();
          f.queued = 0;
        }
      }
      if ((m == Mode::kPass || m == Mode::kDelay) && c.fd[kTarget] < 0 && !c.done) connect_target(c);
    }
    std::erase_if(conns_, [](const Conn& c) { return c.done; });
    mode_now_ = m;
    delay_now_ = m == Mode::kDelay ? delay : std::chrono::milliseconds(0);
  }

  void accept_all() {
    for (;;) {
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        // Out of descriptors or memory: the listener stays readable, so
        // leave it alone for a while rather than spin on it.
        if (errno != EAGAIN && errno != EWOULDBLOCK) accept_paused_until_ = Clock::now() + kAcceptPause;
        return;
      }
      ++accepted_;
      if (mode_now_ == Mode::kReset || conns_.size() >= kMaxConnections) {
        reset_fd(fd);
        continue;
      }
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Conn c;
      c.fd[kClient] = fd;
      if (mode_now_ != Mode::kBlackhole) connect_target(c);
      if (!c.done) conns_.push_back(std::move(c));
    }
  }

  void read_from(Conn& c, int s, Clock::time_point now) {
    ssize_t n = ::recv(c.fd[s], buf_.data(), buf_.size(), 0);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) reset(c);
      return;
    }
    Flow& f = c.flow[s];
    if (n == 0) {
      f.eof = true;
    } else if (mode_now_ != Mode::kBlackhole) {
      f.queue.push_back(Chunk{now + delay_now_, std::string(buf_.data(), static_cast<size_t>(n))});
      f.queued += static_cast<size_t>(n);
    }
  }

  // Writes flow s's due chunks until the socket is full, then passes on a FIN.
  void write_due(Conn& c, int s, Clock::time_point now) {
    Flow& f = c.flow[s];
    int to = c.fd[1 - s];
    while (wants_write(c, s, now)) {
      Chunk& chunk = f.queue.front();
      ssize_t n = ::send(to, chunk.bytes.data() + chunk.sent, chunk.bytes.size() - chunk.sent, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) reset(c);
        return;
      }
      chunk.sent += static_cast<size_t>(n);
      f.queued -= static_cast<size_t>(n);
      forwarded_ += static_cast<uint64_t>(n);
      if (chunk.sent < chunk.bytes.size()) return;
      f.queue.pop_front();
    }
    if (mode_now_ != Mode::kBlackhole && usable(c, 1 - s) && f.queue.empty() && f.eof && !f.shut) {
      ::shutdown(to, SHUT_WR);
      f.shut = true;
    }
  }

  // One connection after poll(): `p` is its two pollfds (client, target).
  void serve(Conn& c, const pollfd* p) {
    if (c.connecting && p[kTarget].revents != 0) {
      int err = 0;
      socklen_t len = sizeof err;
      ::getsockopt(c.fd[kTarget], SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return reset(c);
      c.connecting = false;
    }
    Clock::time_point now = Clock::now();
    for (int s : {kClient, kTarget}) {
      if (!c.done && (p[s].events & POLLIN) && (p[s].revents & (POLLIN | POLLHUP | POLLERR))) read_from(c, s, now);
    }
    for (int s : {kClient, kTarget}) {
      if (!c.done) write_due(c, s, now);
    }
    if (!c.done && c.flow[kClient].shut && c.flow[kTarget].shut) {
      for (int& fd : c.fd) ::close(fd);
      c.done = true;
    }
  }

  // One round: apply a new mode, wait for sockets or the next due chunk, serve. False once stopped.
  bool step() {
    {
      std::lock_guard lock(mu_);
      if (stop_) return false;
      if (applied_ != requested_) {
        apply(mode_, delay_);
        applied_ = requested_;
        applied_cv_.notify_all();
      }
    }
    Clock::time_point now = Clock::now();
    Clock::time_point wake_at = Clock::time_point::max();
    bool accepting = now >= accept_paused_until_;
    if (!accepting) wake_at = accept_paused_until_;
    fds_.clear();
    fds_.push_back({wake_fd_, POLLIN, 0});
    fds_.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
    for (const Conn& c : conns_) {
      for (int s : {kClient, kTarget}) {
        short events = 0;
        if (s == kTarget && c.connecting) events |= POLLOUT;
        if (wants_read(c, s)) events |= POLLIN;
        if (wants_write(c, 1 - s, now)) events |= POLLOUT;
        // A chunk still held back by kDelay sets the timeout.
        const Flow& f = c.flow[s];
        if (mode_now_ != Mode::kBlackhole && usable(c, 1 - s) && !f.queue.empty() && f.queue.front().due > now) {
          wake_at = std::min(wake_at, f.queue.front().due);
        }
        // An fd with nothing wanted is left out: poll() would report its
        // POLLHUP at once, again and again.
        fds_.push_back({events != 0 ? c.fd[s] : -1, events, 0});
      }
    }
    int timeout = -1;
    if (wake_at != Clock::time_point::max()) {
      auto ms = std::chrono::ceil<std::chrono::milliseconds>(wake_at - now).count();
      timeout = static_cast<int>(std::clamp<decltype(ms)>(ms, 0, 60'000));
    }
    if (::poll(fds_.data(), fds_.size(), timeout) < 0) return true;  // EINTR: go round again

    if (fds_[0].revents != 0) drain_wake();
    for (size_t k = 0; k < conns_.size(); ++k) {
      try {
        serve(conns_[k], &fds_[2 + 2 * k]);
      } catch (...) {  // out of memory for a chunk: this connection goes, not the thread
        reset(conns_[k]);
      }
    }
    std::erase_if(conns_, [](const Conn& c) { return c.done; });
    if (fds_[1].revents != 0) accept_all();
    return true;
  }

  void run() {
    for (;;) {
      try {
        if (!step()) return;
      } catch (...) {
        // Nothing in step() should throw but allocation; drop every
        // connection to free memory rather than lose the thread.
        for (Conn& c : conns_) reset(c);
        conns_.clear();
      }
    }
  }

  static constexpr std::chrono::milliseconds kAcceptPause{50};

  const uint16_t target_port_;
  uint16_t port_ = 0;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<size_t> accepted_{0};
  std::atomic<uint64_t> forwarded_{0};

  std::mutex mu_;  // guards the requested mode and stop_
  std::condition_variable applied_cv_;
  Mode mode_ = Mode::kPass;
  std::chrono::milliseconds delay_{0};
  uint64_t requested_ = 0, applied_ = 0;
  bool stop_ = false;

  // The thread's own.
  Mode mode_now_ = Mode::kPass;
  std::chrono::milliseconds delay_now_{0};
  std::vector<Conn> conns_;
  std::vector<pollfd> fds_;
  std::vector<char> buf_;
  Clock::time_point accept_paused_until_{};
  std::thread thread_;
};

}  // namespace carapace
