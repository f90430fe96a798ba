#include "storage/keys.h"

#include <cstdio>
#include <ctime>
#include <random>

#include "events/wire.h"

namespace carapace::keys {

std::string generate_session_id(std::string_view prefix) {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::random_device rd;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", static_cast<unsigned>(rd()));
  return std::string(prefix) + "-" + stamp + "-" + suffix;
}

Status validate_session_id(std::string_view id) {
  if (id.empty()) return Status::invalid_argument("session id is empty");
  if (id.size() > kMaxSessionIdLength) {
    return Status::invalid_argument("session id is " + std::to_string(id.size()) + " characters; at most " +
                                    std::to_string(kMaxSessionIdLength) + " are allowed");
  }
  for (size_t i = 0; i < id.size(); ++i) {
    char c = id[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == ':' || c == '-';
    if (!ok) {
      return Status::invalid_argument("session id '" + std::string(id) + "' has character " +
                                      std::to_string(static_cast<unsigned char>(c)) + " at " +
                                      std::to_string(i) + "; use letters, digits and . _ : -");
    }
  }
  // An id becomes a command-line argument and a file name (`bundle -o`,
  // exports): one that reads as an option ("-x") or as a path component
  // (".", "..", a hidden file) is refused.
  if (id.front() == '-' || id.front() == '.') {
    return Status::invalid_argument("session id '" + std::string(id) + "' starts with '" + id.front() +
                                    "'; start it with a letter, a digit, '_' or ':'");
  }
  return Status();
}

std::string session_prefix(std::string_view session) {
  std::string key(session);
  key.push_back(kSeparator);
  return key;
}

std::string session_upper_bound(std::string_view session) {
  std::string key(session);
  key.push_back(static_cast<char>(kSeparator + 1));
  return key;
}

std::string seq_key(std::string_view session, uint64_t seq) {
  std::string key;
  key.reserve(session.size() + 9);
  key.append(session);
  key.push_back(kSeparator);
  wire::put_fixed64_be(key, seq);
  return key;
}

bool parse_seq_key(std::string_view key, std::string_view* session, uint64_t* seq) {
  if (key.size() < 10 || key[key.size() - 9] != kSeparator) return false;
  *session = key.substr(0, key.size() - 9);
  *seq = wire::load_fixed64_be(key.data() + key.size() - 8);
  return true;
}

}  // namespace carapace::keys
