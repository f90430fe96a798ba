// HttpClient: HTTP requests of every session of a runtime on ONE I/O thread
// (libcurl's multi interface), with connection reuse, so that any number of
// sessions waiting on a slow model cost no thread each and no actor thread
// ever waits on the network.
//
// A request streams its response body to on_body as bytes arrive and ends
// with exactly one on_done: a status and the response headers, or a
// transport error (refused, reset, a timeout, the body cut short). Four
// timeouts: connecting, the first byte of the body, the idle time between
// two pieces of it, and the whole request (so that a body that trickles
// without end still ends). cancel() ends a request at once (on_done says
// cancelled). Request headers (which carry credentials) are handed to curl
// and never kept, logged or reported.
//
// Thread safety: start() and cancel() may be called from any thread; the
// callbacks run on the I/O thread and must be quick (hand work to an actor).
// The destructor cancels what is in flight and joins the thread.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace carapace {

struct HttpRequest {
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  std::string body;                  // POSTed
  uint64_t connect_timeout_ms = 10'000;
  uint64_t first_byte_timeout_ms = 120'000;
  uint64_t idle_timeout_ms = 60'000;
  uint64_t total_timeout_ms = 0;  // from the start to the body's last byte; 0: none
};

// Which of HttpRequest's own timeouts ended a request (curl's connect
// timeout is reported as a transport error).
enum class HttpTimeout { kNone, kFirstByte, kIdle, kTotal };

struct HttpResult {
  long status = 0;  // 0: no HTTP response
  std::map<std::string, std::string> headers;  // names lowercased; the final response's
  std::string error;  // the transport error, when status is 0 or the body was cut short
  bool transport_failed = false;
  bool timed_out = false;
  HttpTimeout timeout = HttpTimeout::kNone;
  bool cancelled = false;
  uint64_t latency_ms = 0;
};

class HttpClient {
 public:
  // Returns false to abort the request (on_done then reports a transport error).
  using BodySink = std::function<bool(long status, std::string_view bytes)>;
  using DoneSink = std::function<void(HttpResult)>;

  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts `request`; returns its id (for cancel()).
  uint64_t start(HttpRequest request, BodySink on_body, DoneSink on_done);

  // Ends the request at once if it is still running; no-op otherwise.
  void cancel(uint64_t id);

  // Requests started and not yet done.
  size_t in_flight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace carapace
