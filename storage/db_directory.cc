#include "storage/db_directory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <random>

#include "base/text.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

bool is_db_file(const std::string& name) {
  auto ends = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return name == "CURRENT" || name.rfind("MANIFEST-", 0) == 0 || name.rfind("OPTIONS-", 0) == 0 || ends(".log") ||
         ends(".sst") || name == "IDENTITY";
}

Status sync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) return Status::io_error("cannot open " + path + " to sync it: " + errno_text(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0) return Status::io_error("cannot sync " + path + ": " + errno_text(err));
  return Status();
}

}  // namespace

DbDirectoryState inspect_db_directory(const std::string& dir, std::string* what) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    if (!ec) return DbDirectoryState::kAbsent;
    *what = "cannot look at " + dir + ": " + ec.message();
    return DbDirectoryState::kUnreadable;
  }
  std::vector<std::string> db_files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (is_db_file(name)) db_files.push_back(name);
  }
  if (ec) {
    *what = "cannot list " + dir + ": " + ec.message();
    return DbDirectoryState::kUnreadable;
  }
  if (db_files.empty()) return DbDirectoryState::kEmpty;
  std::ifstream current(dir + "/CURRENT");
  std::string manifest;
  if (!current || !std::getline(current, manifest) || manifest.empty()) {
    *what = "its CURRENT file is missing or empty";
  } else if (!fs::exists(dir + "/" + manifest, ec)) {
    *what = "CURRENT names " + manifest + ", which is missing";
  } else {
    return DbDirectoryState::kDatabase;
  }
  std::string listing;
  size_t shown = 0;
  for (const auto& f : db_files) {
    if (shown++ == 6) {
      listing += ", ...";
      break;
    }
    listing += (listing.empty() ? "" : ", ") + f;
  }
  *what += " (it holds " + listing + ")";
  return DbDirectoryState::kDamaged;
}

Status create_db_atomically(const std::string& dir, const std::function<Status(const std::string&)>& create) {
  std::error_code ec;
  fs::path target(dir);
  fs::path parent = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  fs::create_directories(parent, ec);
  if (ec) return Status::io_error("cannot create " + parent.string() + ": " + ec.message());
  std::random_device rd;
  fs::path temp = parent / (target.filename().string() + ".creating-" + std::to_string(::getpid()) + "-" +
                            std::to_string(rd()));
  fs::create_directory(temp, ec);
  if (ec) return Status::io_error("cannot create " + temp.string() + ": " + ec.message());
  auto cleanup = [&] {
    std::error_code ignored;
    fs::remove_all(temp, ignored);
  };
  fs::permissions(temp, fs::perms::owner_all, fs::perm_options::replace, ec);
  Status s = ec ? Status::io_error("cannot restrict " + temp.string() + ": " + ec.message()) : create(temp.string());
  if (s.ok()) {
    for (const auto& entry : fs::directory_iterator(temp, ec)) {
      if (entry.is_regular_file()) s = sync_path(entry.path().string(), false);
      if (!s.ok()) break;
    }
    if (s.ok() && ec) s = Status::io_error("cannot list " + temp.string() + ": " + ec.message());
  }
  if (s.ok()) s = sync_path(temp.string(), true);
  if (!s.ok()) {
    cleanup();
    return s;
  }
  // An empty directory in the way (rename over a non-empty one fails).
  if (fs::is_directory(target, ec) && fs::is_empty(target, ec)) fs::remove(target, ec);
  fs::rename(temp, target, ec);
  if (ec) {
    cleanup();
    // Another process created it first: that one stands.
    std::string ignored;
    if (inspect_db_directory(dir, &ignored) == DbDirectoryState::kDatabase) return Status();
    return Status::io_error("cannot move the new database into " + dir + ": " + ec.message());
  }
  return sync_path(parent.string(), true);
}

}  // namespace carapace
