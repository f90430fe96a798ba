// RetryPolicy: whether and when to call a model provider again after a failure.
//
// Transient failures (429, 500, 502, 503, 504, 529, timeouts, connection resets)
// are retried; a failure with no HTTP status that is not a transport error
// (a bad scenario, a bad configuration) is permanent. Retries are spaced
// with exponential backoff, min(max_delay, base * 2^(attempt-1))
// scaled by a jitter factor in [0.5, 1.0]; a Retry-After from the server wins
// over the computed delay, up to max_delay (a longer one is waited out for
// max_delay; llm.failed records both what was asked and what was chosen).
// Permanent failures (400, 401, 403, 404, a bad model...) are not retried. The jitter is a pure function of the session's
// recorded seed, the turn and the attempt, so a replay or a resumed session
// computes the very same delays. Pure and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "events/events.h"

namespace carapace {

struct RetryConfig {
  uint32_t max_retries = 3;  // retries after the first attempt
  uint64_t base_delay_ms = 1000;
  uint64_t max_delay_ms = 30000;
  std::vector<uint32_t> retryable_statuses = {429, 500, 502, 503, 504, 529};
};

// What went wrong with one provider attempt.
struct ProviderFailure {
  uint32_t http_status = 0;  // 0: no HTTP response (a transport error, or a local failure)
  std::string error;         // the server's message, or the transport error
  bool transport = false;    // connection refused/reset, timeout, malformed stream
  bool has_retry_after = false;
  uint64_t retry_after_ms = 0;       // from a Retry-After header, when has_retry_after
  std::vector<std::string> headers;  // the response's headers, "Name: value", credentials removed
  // The server's x-should-retry header, when it sent one: it wins over the status.
  bool has_should_retry = false;
  bool should_retry = false;

  static constexpr auto fields() {
    using F = ProviderFailure;
    return std::tuple{codec::Field{1, "http_status", &F::http_status},
                      codec::Field{2, "error", &F::error},
                      codec::Field{3, "transport", &F::transport},
                      codec::Field{4, "has_retry_after", &F::has_retry_after},
                      codec::Field{5, "retry_after_ms", &F::retry_after_ms},
                      codec::Field{6, "headers", &F::headers},
                      codec::Field{7, "has_should_retry", &F::has_should_retry},
                      codec::Field{8, "should_retry", &F::should_retry}};
  }
  friend bool operator==(const ProviderFailure&, const ProviderFailure&) = default;
};

struct RetryDecision {
  ErrorCategory category = ErrorCategory::kPermanent;
  bool retry = false;
  uint64_t delay_ms = 0;  // when retrying: the delay chosen, jitter included
};

ErrorCategory classify(const RetryConfig& config, const ProviderFailure& failure);

// The jitter factor in [0.5, 1.0] for this session seed, turn and attempt.
double retry_jitter(uint64_t seed, uint64_t turn, uint32_t attempt);

// `attempt` is the 1-based number of the attempt that just failed.
RetryDecision decide_retry(const RetryConfig& config, const ProviderFailure& failure, uint32_t attempt,
                           uint64_t seed, uint64_t turn);

}  // namespace carapace
