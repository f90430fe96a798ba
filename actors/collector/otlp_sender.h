// OtlpSender: POSTs an OTLP/JSON export (export_otlp.h) to an OTLP/HTTP
// receiver — an OpenTelemetry Collector, Jaeger, Tempo, Langfuse, Phoenix —
// at its /v1/traces path, with Content-Type application/json.
//
// Retries: a 429, 502, 503 or 504 answer and a transport failure (refused,
// reset, timed out) are tried again, up to `max_attempts` in all, after an
// exponential backoff (base × 2^(n-1), at most max_delay) or the server's
// Retry-After (seconds), whichever it sent. Any other answer outside 2xx is
// final: the error names the status and the start of the body. URLs in
// messages lose their user info and query (where credentials hide).
//
// Synchronous (libcurl's easy interface); thread-compatible.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace carapace {

struct OtlpSendOptions {
  std::string endpoint;   // http(s)://host[:port][/path]; "/v1/traces" is added when there is no path
  int max_attempts = 5;
  uint64_t base_delay_ms = 500;
  uint64_t max_delay_ms = 10'000;
  uint64_t timeout_ms = 30'000;  // per attempt
  // Called before each retry with the attempt about to be made, the delay
  // and why (for a progress line); may be empty.
  std::function<void(int attempt, uint64_t delay_ms, const std::string& why)> on_retry;
};

struct OtlpSendReport {
  int attempts = 0;
  long status = 0;      // the last HTTP status (0: none)
  std::string body;     // the last response body (at most 4 KiB kept)
  std::string url;      // where it went, without credentials
};

// Sends `payload`; OK when the receiver answered 2xx.
Status otlp_send(const OtlpSendOptions& options, const std::string& payload, OtlpSendReport* report);

// The URL a POST goes to: `endpoint`, with /v1/traces when it has no path.
// invalid_argument unless it is http:// or https:// with a host.
Status otlp_traces_url(const std::string& endpoint, std::string* url);

// `url` without user info, query or fragment: safe to print.
std::string url_for_display(const std::string& url);

}  // namespace carapace
