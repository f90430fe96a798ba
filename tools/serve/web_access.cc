#include "tools/serve/web_access.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include <array>
#include <cerrno>

namespace carapace::web {
namespace {

bool equal_constant_time(std::string_view a, std::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

bool is_loopback(std::string_view address) {
  if (iequal(address, "localhost")) return true;
  std::string text(address);
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

Access check_host(const AccessPolicy& policy, std::string_view host) {
  if (!policy.loopback) return Access::kAllowed;  // beyond loopback the token is the guard
  // Loopback: the Host must be a loopback name of this port.
  std::string port = ":" + std::to_string(policy.port);
  if (!host.ends_with(port)) return Access::kBadHost;
  host.remove_suffix(port.size());
  return is_loopback(host) ? Access::kAllowed : Access::kBadHost;
}

Access check_access(const AccessPolicy& policy, const RequestCredentials& request) {
  if (Access host = check_host(policy, request.host); host != Access::kAllowed) return host;
  if (policy.token.empty()) return Access::kAllowed;
  std::string_view given;
  std::string_view auth = trim(request.authorization);
  if (auth.size() > 7 && iequal(auth.substr(0, 7), "bearer ")) {
    given = trim(auth.substr(7));
  } else {
    // A browser's WebSocket: the token rides as a subprotocol.
    std::string_view list = request.websocket_protocols;
    while (!list.empty() && given.empty()) {
      size_t comma = list.find(',');
      std::string_view item = trim(list.substr(0, comma));
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      if (item.starts_with(kTokenProtocolPrefix)) given = item.substr(kTokenProtocolPrefix.size());
    }
  }
  if (given.empty()) return Access::kNoToken;
  return equal_constant_time(given, policy.token) ? Access::kAllowed : Access::kBadToken;
}

std::string access_error(Access access) {
  switch (access) {
    case Access::kAllowed:
      return "";
    case Access::kBadHost:
      return "this server answers only to a loopback Host (127.0.0.1, localhost, [::1]) with its port";
    case Access::kNoToken:
      return "this server needs its token: open the URL it printed (…/#token=…), or send Authorization: "
             "Bearer "
             "TOKEN (the token is in the home's serve.token)";
    case Access::kBadToken:
      return "wrong token: open the URL carapace serve printed at its start, or send the token in the home's "
             "serve.token";
  }
  return "refused";
}

unsigned access_status(Access access) { return access == Access::kBadHost ? 403 : 401; }

bool origin_allowed(std::string_view origin, std::string_view host) {
  if (origin.empty() || host.empty()) return false;
  return iequal(origin, std::string("http://") + std::string(host));
}

bool offers_protocol(std::string_view protocols, std::string_view name) {
  while (!protocols.empty()) {
    size_t comma = protocols.find(',');
    if (trim(protocols.substr(0, comma)) == name) return true;
    protocols = comma == std::string_view::npos ? std::string_view() : protocols.substr(comma + 1);
  }
  return false;
}

bool valid_token(std::string_view text) {
  if (text.size() < 16 || text.size() > 256) return false;
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
              c == '_' || c == '.' || c == '~';
    if (!ok) return false;
  }
  return true;
}

std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> parts;
  size_t at = 0;
  while (at <= path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string_view::npos) slash = path.size();
    parts.push_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return parts;
}

bool percent_decode(std::string_view text, std::string* out, bool plus_is_space) {
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
  };
  out->clear();
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%') {
      if (i + 2 >= text.size() || hex(text[i + 1]) < 0 || hex(text[i + 2]) < 0) return false;
      out->push_back(static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2])));
      i += 2;
    } else {
      out->push_back(plus_is_space && text[i] == '+' ? ' ' : text[i]);
    }
  }
  return true;
}

bool query_has(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    std::string key;
    if (percent_decode(pair.substr(0, pair.find('=')), &key, true) && key == name) return true;
  }
  return false;
}

std::string random_token() {
  std::array<unsigned char, 32> bytes{};
  size_t got = 0;
  while (got < bytes.size()) {
    ssize_t n = ::getrandom(bytes.data() + got, bytes.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    got += static_cast<size_t>(n);
  }
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char b : bytes) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 63]);
  return out;
}

}  // namespace carapace::web
