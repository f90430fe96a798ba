// Who may use `carapace serve`: the checks made on every request before it
// is answered (docs/serve.md, "Security").
//
// - Bound to loopback without a token, a request must name the server by a
//   loopback Host (127.0.0.1:PORT, localhost:PORT, [::1]:PORT): a page of
//   another site that gets its name resolved to 127.0.0.1 (DNS rebinding)
//   is refused.
// - With a token (required when bound to anything but loopback), every
//   request carries it: `Authorization: Bearer T`, the cookie the page gets
//   when opened with `?token=T`, or `?token=T` itself. Compared in constant time.
// - A WebSocket upgrade must come from the server's own page: its Origin,
//   if any, is http://<Host>.
//
// Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace carapace::web {

struct AccessPolicy {
  std::string token;  // empty: no token needed (loopback only)
  uint16_t port = 0;
};

enum class Access { kAllowed, kBadHost, kNoToken, kBadToken };

struct RequestCredentials {
  std::string_view host;           // the Host header
  std::string_view authorization;  // the Authorization header
  std::string_view cookie;         // the Cookie header
  std::string_view query_token;    // ?token=
};

Access check_access(const AccessPolicy& policy, const RequestCredentials& request);

// What to tell the client for a refusal (and the status: 401 or 403).
std::string access_error(Access access);
unsigned access_status(Access access);

// Whether a WebSocket upgrade with this Origin header (empty: none, as
// from a program that is not a browser) to this Host may go on.
bool origin_allowed(std::string_view origin, std::string_view host);

// Whether `address` (as --bind takes it) is a loopback address: 127.0.0.0/8, ::1, localhost.
bool is_loopback(std::string_view address);

// `text` with its %XX escapes decoded (and '+' as a space when `plus_is_space`); false on a bad escape.
bool percent_decode(std::string_view text, std::string* out, bool plus_is_space = false);

// The value of `name` in a query string ("a=1&token=x"), %-decoded; "" if absent.
std::string query_value(std::string_view query, std::string_view name);

// The value of cookie `name` in a Cookie header; "" if absent.
std::string cookie_value(std::string_view header, std::string_view name);

// A fresh random token: 32 bytes from the kernel, base64url (43 characters).
std::string random_token();

inline constexpr std::string_view kTokenCookie = "carapace_token";

}  // namespace carapace::web
