#include "actors/provider/retry_policy.h"

#include <algorithm>

#include "base/digest.h"
#include "events/wire.h"

namespace carapace {

ErrorCategory classify(const RetryConfig& config, const ProviderFailure& failure) {
  if (failure.has_should_retry) return failure.should_retry ? ErrorCategory::kTransient : ErrorCategory::kPermanent;
  if (failure.transport) return ErrorCategory::kTransient;
  bool retryable = std::find(config.retryable_statuses.begin(), config.retryable_statuses.end(),
                             failure.http_status) != config.retryable_statuses.end();
  return retryable ? ErrorCategory::kTransient : ErrorCategory::kPermanent;
}

double retry_jitter(uint64_t seed, uint64_t turn, uint32_t attempt) {
  std::string key;
  wire::put_fixed64_be(key, seed);
  wire::put_fixed64_be(key, turn);
  wire::put_fixed64_be(key, attempt);
  uint64_t bits = digest128(key).hi >> 11;  // 53 random bits
  return 0.5 + 0.5 * (static_cast<double>(bits) / static_cast<double>(uint64_t{1} << 53));
}

RetryDecision decide_retry(const RetryConfig& config, const ProviderFailure& failure, uint32_t attempt,
                           uint64_t seed, uint64_t turn) {
  RetryDecision d;
  d.category = classify(config, failure);
  if (d.category != ErrorCategory::kTransient || attempt > config.max_retries) return d;
  d.retry = true;
  if (failure.has_retry_after) {
    // The server knows best, up to max_delay_ms: a Retry-After of ten years
    // must not park the session for ten years.
    d.delay_ms = std::min(failure.retry_after_ms, config.max_delay_ms);
    return d;
  }
  uint32_t exponent = std::min<uint32_t>(attempt - 1, 40);
  double backoff =
      std::min(static_cast<double>(config.max_delay_ms),
               static_cast<double>(config.base_delay_ms) * static_cast<double>(uint64_t{1} << exponent));
  d.delay_ms = static_cast<uint64_t>(backoff * retry_jitter(seed, turn, attempt));
  return d;
}

}  // namespace carapace
