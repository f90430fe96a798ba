#include "runtime/home.h"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace carapace {
namespace {

std::string user_name(uid_t uid) {
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[1024];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    return std::string(found->pw_name) + " (uid " + std::to_string(uid) + ")";
  }
  return "uid " + std::to_string(uid);
}

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

Status prepare_home(const std::string& home, bool create) {
  struct stat st;
  if (::stat(home.c_str(), &st) != 0) {
    int err = errno;
    if (err != ENOENT) {
      return Status::io_error("cannot use the home " + home + ": " + std::strerror(err) +
                              "; pass --home with a directory of your own");
    }
    if (!create) return Status();
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(home).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (::mkdir(home.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::io_error("cannot create the home " + home + ": " + std::strerror(errno));
    }
    if (::stat(home.c_str(), &st) != 0) return Status::io_error("cannot use the home " + home + ": " + std::strerror(errno));
    // Owner-only whatever the umask (mkdir applied it).
    if (st.st_uid == ::geteuid() && (st.st_mode & 07777) != 0700 && ::chmod(home.c_str(), 0700) != 0) {
      return Status::io_error("cannot make the home " + home + " owner-only: " + std::strerror(errno));
    }
    if (::stat(home.c_str(), &st) != 0) return Status::io_error("cannot use the home " + home + ": " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) return Status::invalid_argument("the home " + home + " is not a directory");
  uid_t me = ::geteuid();
  if (st.st_uid != me) {
    return Status::invalid_argument(
        "the home " + home + " belongs to " + user_name(st.st_uid) + ", not to you, " + user_name(me) +
        ": its config could make you run that user's hooks, so carapace will not use it. Pass --home with a "
        "directory of your own, or, if you trust it, take it over: chown -R " +
        std::to_string(me) + " " + home);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::invalid_argument("the home " + home + " can be written by other users (mode " +
                                    mode_text(st.st_mode) +
                                    "): anyone could plant a config or hooks there. Make it owner-only: chmod 700 " +
                                    home);
  }
  return Status();
}

Status check_trusted_file(const std::string& path, std::string_view what) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Status();  // reading it reports what is wrong
  uid_t me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return Status::invalid_argument("the " + std::string(what) + " " + path + " belongs to " +
                                    user_name(st.st_uid) + ", not to you, " + user_name(me) +
                                    " or root: carapace will not take instructions from it. If you trust it: "
                                    "chown " + std::to_string(me) + " " + path);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return Status::invalid_argument("the " + std::string(what) + " " + path +
                                    " can be written by other users (mode " + mode_text(st.st_mode) +
                                    "): carapace will not take instructions from it. Fix: chmod go-w " + path);
  }
  return Status();
}

Status check_hook_program(const std::string& first_word) {
  if (first_word.find('/') == std::string::npos) return Status();
  return check_trusted_file(first_word, "hook program");
}

}  // namespace carapace
