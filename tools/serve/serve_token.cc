#include "tools/serve/serve_token.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "base/bounded_file.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "tools/serve/web_access.h"

namespace carapace::web {
namespace {

constexpr const char* kTokenFile = "/serve.token";
constexpr uint64_t kTokenFileBytes = 4096;
constexpr const char* kTokenRule = "16 to 256 letters, digits, '-', '_', '.' or '~'";

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// The token in an existing file, checked.
Status read_token_file(const std::string& path, const struct stat& st, std::string* out) {
  const std::string renew = "Remove it (rm " + path + ") and carapace serve makes a new one";
  if (S_ISLNK(st.st_mode)) {
    return Status::invalid_argument("the token file " + path +
                                    " is a symbolic link, not a file of its own. " + renew);
  }
  if (st.st_uid != ::geteuid()) {
    return Status::invalid_argument("the token file " + path + " belongs to uid " +
                                    std::to_string(st.st_uid) + ", not to you (uid " +
                                    std::to_string(::geteuid()) + "). " + renew);
  }
  if ((st.st_mode & 077) != 0) {
    return Status::invalid_argument("the token file " + path +
                                    " can be read or written by other users (mode " + mode_text(st.st_mode) +
                                    "), so its token may be known. " + renew);
  }
  std::string text;
  CARAPACE_RETURN_IF_ERROR(read_bounded_file(path, kTokenFileBytes, "the token file", &text));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (!valid_token(text)) {
    return Status::invalid_argument("the token file " + path + " does not hold a token (" + kTokenRule +
                                    "). " + renew);
  }
  *out = std::move(text);
  return Status();
}

// Writes `token` to `path`, owner-only, unless a file is there already
// (then *raced is set and nothing is written).
Status write_token_file(const std::string& path, const std::string& token, bool* raced) {
  *raced = false;
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // a leftover of a process with our pid that died here
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return Status::io_error("cannot write the token file " + tmp + ": " + errno_text(errno));
  const std::string text = token + "\n";
  bool ok = ::fchmod(fd.get(), 0600) == 0 &&
            ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd.get()) == 0;
  int err = errno;
  fd.reset();
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status::io_error("cannot write the token file " + tmp + ": " + errno_text(err));
  }
  // A link, not a rename: it fails if another server made the file meanwhile.
  int linked = ::link(tmp.c_str(), path.c_str());
  err = errno;
  if (linked != 0 && err != EEXIST) {
    // A file system without hard links: a rename (which would replace a racing server's file).
    linked = ::rename(tmp.c_str(), path.c_str());
    err = errno;
  }
  ::unlink(tmp.c_str());
  if (linked != 0 && err == EEXIST) {
    *raced = true;
    return Status();
  }
  if (linked != 0) return Status::io_error("cannot write the token file " + path + ": " + errno_text(err));
  return Status();
}

}  // namespace

Status serve_token(const std::string& home, const char* env, ServeToken* out) {
  *out = ServeToken{};
  if (env != nullptr && *env != '\0') {
    if (!valid_token(env)) {
      return Status::invalid_argument(
          std::string("CARAPACE_SERVE_TOKEN is not a token the server takes (") + kTokenRule +
          "): use a long random one, or unset it to use the home's " + "serve.token");
    }
    out->value = env;
    out->from_env = true;
    return Status();
  }
  const std::string path = home + kTokenFile;
  out->file = path;
  for (int attempt = 0; attempt < 2; ++attempt) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) return read_token_file(path, st, &out->value);
    if (errno != ENOENT)
      return Status::io_error("cannot read the token file " + path + ": " + errno_text(errno));
    std::string token = random_token();
    if (token.empty()) return Status::io_error("cannot read random bytes (getrandom) to make a token");
    bool raced = false;
    CARAPACE_RETURN_IF_ERROR(write_token_file(path, token, &raced));
    if (!raced) {
      out->value = std::move(token);
      out->made = true;
      return Status();
    }
    // Another server made it first: take that one.
  }
  return Status::io_error("the token file " + path + " keeps changing: is another carapace serve starting?");
}

}  // namespace carapace::web
