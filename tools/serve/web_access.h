// Who may use `carapace serve`: the checks made on every request before it
// is answered (docs/serve.md, "Security").
//
// - Bound to loopback, a request must name the server by a loopback Host
//   (127.0.0.1:PORT, localhost:PORT, [::1]:PORT): a page of another site
//   that gets its name resolved to 127.0.0.1 (DNS rebinding) is refused.
// - With a token (the default; required beyond loopback), every API request
//   and every WebSocket carries it: as `Authorization: Bearer T`, or, from a
//   browser's WebSocket (which cannot set that header), as the subprotocol
//   `carapace.token.T` beside `carapace`. Compared in constant time. No
//   cookie, and never from the address: a token in a URL's query would be
//   written into logs and history. The page's own files (public, in the
//   binary) need only the Host check: the page reads the token from the
//   address's fragment (#token=T), which the browser never sends.
// - A WebSocket upgrade must come from the server's own page: its Origin is
//   exactly http://<Host> (a program that is not a browser sends it too).
//
// Pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace carapace::web {

struct AccessPolicy {
  std::string token;  // empty: no token needed (--no-token, loopback only)
  uint16_t port = 0;
  bool loopback = true;  // bound to loopback: the Host is checked
};

enum class Access { kAllowed, kBadHost, kNoToken, kBadToken };

struct RequestCredentials {
  std::string_view host;                 // the Host header
  std::string_view authorization;        // the Authorization header
  std::string_view websocket_protocols;  // Sec-WebSocket-Protocol (an upgrade to /ws only)
};

// The Host check alone (what the page's files need).
Access check_host(const AccessPolicy& policy, std::string_view host);

// The Host check, then the token.
Access check_access(const AccessPolicy& policy, const RequestCredentials& request);

// What to tell the client for a refusal (and the status: 401 or 403).
std::string access_error(Access access);
unsigned access_status(Access access);

// Whether a WebSocket upgrade with this Origin header to this Host may go
// on: only the exact origin http://<host> (ASCII case aside); an empty
// Origin, https://, another host or port are refused.
bool origin_allowed(std::string_view origin, std::string_view host);

// The WebSocket subprotocol the page asks for, and the prefix of the one
// that carries its token.
inline constexpr std::string_view kWebSocketProtocol = "carapace";
inline constexpr std::string_view kTokenProtocolPrefix = "carapace.token.";

// Whether a Sec-WebSocket-Protocol header (a comma-separated list) offers `name`.
bool offers_protocol(std::string_view protocols, std::string_view name);

// Whether `text` may be a token: 16 to 256 characters, each a letter, a
// digit, '-', '_', '.' or '~' (safe in a URL's fragment, a header and a
// WebSocket subprotocol).
bool valid_token(std::string_view text);

// Whether `address` (as --bind takes it) is a loopback address: 127.0.0.0/8, ::1, localhost.
bool is_loopback(std::string_view address);

// The parts of a path between its slashes ("/api/x" -> "", "api", "x"),
// views into `path`.
std::vector<std::string_view> split_path(std::string_view path);

// `text` with its %XX escapes decoded (and '+' as a space when `plus_is_space`); false on a bad escape.
bool percent_decode(std::string_view text, std::string* out, bool plus_is_space = false);

// Whether a query string ("a=1&token=x") has a parameter `name` (with or without a value).
bool query_has(std::string_view query, std::string_view name);

// A fresh random token: 32 bytes from the kernel's CSPRNG (getrandom),
// base64url (43 characters); "" if the kernel gave none.
std::string random_token();

}  // namespace carapace::web
