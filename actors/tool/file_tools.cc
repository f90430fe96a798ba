#include "actors/tool/file_tools.h"

#include <nlohmann/json.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/tool/workspace.h"
#include "base/text.h"
#include "base/unique_fd.h"

namespace carapace {
namespace {

// Argument readers: on a wrong type they fill *error with what the model
// should send instead and return false. A missing optional argument (or
// null) leaves *out unchanged.
bool get_string(const nlohmann::json& args, const char* key, bool required, std::string* out,
                std::string* error) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) {
    if (required) *error = std::string("missing \"") + key + "\": it is required and must be a string";
    return !required;
  }
  if (!it->is_string()) {
    *error = std::string("\"") + key + "\" must be a string, not " + it->dump();
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

bool get_count(const nlohmann::json& args, const char* key, uint64_t minimum, uint64_t* out,
               std::string* error) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return true;
  uint64_t value = 0;
  bool ok = false;
  if (it->is_number_unsigned()) {
    value = it->get<uint64_t>();
    ok = true;
  } else if (it->is_number_integer()) {  // signed: parsed JSON never is when >= 0, built JSON can be
    int64_t v = it->get<int64_t>();
    ok = v >= 0;
    if (ok) value = static_cast<uint64_t>(v);
  } else if (it->is_number_float()) {  // models sometimes write 100.0
    double d = it->get<double>();
    ok = d >= 0 && d <= 1e15 && std::floor(d) == d;
    if (ok) value = static_cast<uint64_t>(d);
  }
  if (!ok || value < minimum) {
    *error = std::string("\"") + key + "\" must be an integer of at least " + std::to_string(minimum) +
             ", not " + it->dump();
    return false;
  }
  *out = value;
  return true;
}

bool get_bool(const nlohmann::json& args, const char* key, bool* out, std::string* error) {
  auto it = args.find(key);
  if (it == args.end() || it->is_null()) return true;
  if (!it->is_boolean()) {
    *error = std::string("\"") + key + "\" must be true or false, not " + it->dump();
    return false;
  }
  *out = it->get<bool>();
  return true;
}

// The workspace root, and `path` relative to it (the checks that need no
// file system: outside by text, too long, NUL).
Status open_root(const ToolContext& context, const std::string& path, WorkspaceRoot* root, std::string* rel) {
  CARAPACE_RETURN_IF_ERROR(WorkspaceRoot::open(context.workspace, root));
  return root->relative(path, rel);
}

std::string hard_link_refusal(const std::string& path, nlink_t links) {
  return "'" + path + "' has " + std::to_string(links) +
         " hard links; write_file does not write through a hard link, whose other names may be outside the "
         "workspace. Remove it (the other names keep the content) and write a new file";
}

// Opens `dir_rel` beneath the root as a directory (O_PATH), creating what is
// missing: each directory is made with mkdirat in its parent's descriptor,
// and reopened beneath the root.
Status make_directories(const WorkspaceRoot& root, const std::string& path, const std::string& dir_rel,
                        UniqueFd* out) {
  int fd = -1;
  Status s = root.open(path, dir_rel, O_PATH | O_DIRECTORY, 0, &fd);
  if (s.ok()) {
    out->reset(fd);
    return s;
  }
  if (!s.is_not_found()) return s;
  std::string prefix;
  UniqueFd parent(::dup(root.fd()));
  for (size_t begin = 0; begin <= dir_rel.size();) {
    size_t end = dir_rel.find('/', begin);
    if (end == std::string::npos) end = dir_rel.size();
    std::string part = dir_rel.substr(begin, end - begin);
    prefix += (prefix.empty() ? "" : "/") + part;
    begin = end + 1;
    Status opened = root.open(path, prefix, O_PATH | O_DIRECTORY, 0, &fd);
    if (opened.is_not_found()) {
      if (::mkdirat(parent.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
        return Status::io_error("cannot create the directories of '" + path + "': '" + prefix +
                                "': " + errno_text(errno));
      }
      opened = root.open(path, prefix, O_PATH | O_DIRECTORY, 0, &fd);
    }
    if (!opened.ok()) return opened;
    parent.reset(fd);
  }
  out->reset(::dup(parent.get()));
  if (out->get() < 0) return Status::io_error("cannot open the directory of '" + path + "': " + errno_text(errno));
  return Status::ok_status();
}

// Writes all of `content` to `fd`; 0 or the errno.
int write_all(int fd, const std::string& content, size_t* written) {
  *written = 0;
  while (*written < content.size()) {
    ssize_t n = ::write(fd, content.data() + *written, content.size() - *written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    *written += static_cast<size_t>(n);
  }
  return 0;
}

ToolResult append_to(int dir, const std::string& name, const std::string& path, const std::string& content) {
  // O_NOFOLLOW: a link put there since the check is refused, not followed.
  UniqueFd fd(::openat(dir, name.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644));
  if (fd.get() < 0) return ToolResult::error("cannot open '" + path + "' for writing: " + errno_text(errno));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ToolResult::error("cannot check '" + path + "': " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) {
    return ToolResult::error("'" + path + "' exists and is not a regular file; write_file writes regular files");
  }
  if (st.st_nlink > 1) return ToolResult::error(hard_link_refusal(path, st.st_nlink));
  size_t written = 0;
  if (int err = write_all(fd.get(), content, &written); err != 0) {
    return ToolResult::error("writing '" + path + "' failed after " + std::to_string(written) +
                             " bytes: " + errno_text(err));
  }
  bool stat_ok = ::fstat(fd.get(), &st) == 0;
  if (::close(fd.release()) != 0) {
    return ToolResult::error("writing '" + path + "' failed on close: " + errno_text(errno));
  }
  ToolResult result;
  result.output = "appended " + std::to_string(written) + " bytes to '" + path + "'";
  if (stat_ok) result.output += " (now " + std::to_string(st.st_size) + " bytes)";
  return result;
}

// Writes a temporary file beside the target and renames it over the target:
// readers see the old content or the new, never a part; the target's inode
// (and so any other name it has) is never written.
ToolResult replace(int dir, const std::string& name, const std::string& path, const std::string& content,
                   bool existed, const struct stat& old) {
  static thread_local std::mt19937_64 random{std::random_device{}()};
  auto temp_name = [&] {
    char suffix[17];
    std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(random()));
    return "." + name.substr(0, 200) + ".carapace-" + suffix;
  };
  // The bytes go to a file with no name (O_TMPFILE), which a crash takes
  // away with the process; it gets its temporary name only once written,
  // just before the rename. Where the file system has no O_TMPFILE, a named
  // temporary file from the start. A crash between the two leaves the name,
  // which the call's recovery removes (recover_write_file).
  std::string temp;
  UniqueFd fd(::openat(dir, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0644));
  const bool unnamed = fd.get() >= 0;
  for (int attempt = 0; fd.get() < 0; ++attempt) {
    temp = temp_name();
    fd.reset(::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd.get() < 0 && (errno != EEXIST || attempt == 8)) {
      return ToolResult::error("cannot create a file beside '" + path + "': " + errno_text(errno));
    }
  }
  size_t written = 0;
  int err = write_all(fd.get(), content, &written);
  if (err == 0 && existed && ::fchmod(fd.get(), old.st_mode & 07777) != 0) err = errno;
  if (err == 0 && unnamed) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd.get());
    for (int attempt = 0;; ++attempt) {
      temp = temp_name();
      if (::linkat(AT_FDCWD, self.c_str(), dir, temp.c_str(), AT_SYMLINK_FOLLOW) == 0) break;
      if (errno != EEXIST || attempt == 8) {
        err = errno;
        temp.clear();
        break;
      }
    }
  }
  if (err == 0 && ::close(fd.release()) != 0) err = errno;
  if (err == 0 && ::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) err = errno;
  if (err != 0) {
    if (!temp.empty()) ::unlinkat(dir, temp.c_str(), 0);
    return ToolResult::error("writing '" + path + "' failed: " + errno_text(err));
  }
  ToolResult result;
  result.output = "wrote " + std::to_string(written) + " bytes to '" + path + "'";
  return result;
}

bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

// A name (or link target) as list_dir shows it: as it is, unless it could be
// misread — a control character (a newline would fake a line), a
// backslash, a leading double quote, a leading or trailing space, " -> "
// (the link marker), or bytes that are not UTF-8. Then it is shown in double
// quotes with C escapes (\n, \t, \\, \", \xNN), so each entry stays on one
// line and every name reads back exactly.
std::string display_name(std::string_view name) {
  bool plain = !name.empty() && name.front() != '"' && name.front() != ' ' && name.back() != ' ' &&
               name.find(" -> ") == std::string_view::npos && valid_utf8(name) &&
               std::none_of(name.begin(), name.end(), [](char c) {
                 unsigned char u = static_cast<unsigned char>(c);
                 return u < 0x20 || u == 0x7F || c == '\\';
               });
  if (plain) return std::string(name);
  std::string out = "\"";
  const bool utf8 = valid_utf8(name);
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      default:
        if (u < 0x20 || u == 0x7F || (u >= 0x80 && !utf8)) {
          static const char* hex = "0123456789abcdef";
          out += "\\x";
          out += hex[u >> 4];
          out += hex[u & 0xF];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

ToolResult read_file(const FileToolOptions& options, const nlohmann::json& args, const ToolContext& context) {
  std::string path, error;
  uint64_t offset = 0;
  uint64_t limit = UINT64_MAX;
  if (!args.is_object()) {
    return ToolResult::error("the arguments must be a JSON object such as {\"path\": \"README.md\"}");
  }
  if (!get_string(args, "path", true, &path, &error) || !get_count(args, "offset", 0, &offset, &error) ||
      !get_count(args, "limit", 1, &limit, &error)) {
    return ToolResult::error(error);
  }
  WorkspaceRoot root;
  std::string rel;
  if (Status s = open_root(context, path, &root, &rel); !s.ok()) return ToolResult::error(s.message());
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  int fd = -1;
  if (Status s = root.open(path, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, &fd); !s.ok()) {
    return ToolResult::error(s.message());
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return ToolResult::error("cannot read '" + path + "': " + errno_text(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    if (S_ISDIR(st.st_mode)) {
      return ToolResult::error("'" + path + "' is a directory; use list_dir to see what it holds");
    }
    return ToolResult::error("'" + path + "' is not a regular file; read_file reads text files");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (offset > size) {
    ::close(fd);
    return ToolResult::error("offset " + std::to_string(offset) + " is past the end of '" + path +
                             "', which has " + std::to_string(size) + " bytes");
  }
  const uint64_t wanted = std::min(limit, size - offset);
  const uint64_t take = std::min(wanted, options.max_read_bytes);

  std::string data(take, '\0');
  size_t got = 0;
  while (got < take) {
    ssize_t n = ::pread(fd, data.data() + got, take - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ToolResult::error("cannot read '" + path + "': " + errno_text(err));
    }
    if (n == 0) break;  // the file shrank since fstat
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  data.resize(got);

  if (data.find('\0') != std::string::npos) {
    std::string what = "'" + path + "' looks like a binary file (it contains NUL bytes; " +
                       std::to_string(size) + " bytes in all); read_file returns text only.";
    return ToolResult::error(what + " Inspect it with the shell tool, e.g. `xxd '" + path + "' | head`");
  }

  ToolResult result;
  const bool cut = take < wanted;
  // A read cut short does not end in half a character: the next read, from
  // the offset the marker names, starts with the whole character. (A read of
  // nothing but that part keeps it, so that the offset always moves on.)
  if (offset + data.size() < size) {
    size_t partial = incomplete_utf8_suffix(data);
    if (partial < data.size()) data.resize(data.size() - partial);
  }
  if (cut) {
    const uint64_t end = offset + data.size();
    result.truncated = true;
    result.original_bytes = size;
    data += "\n[read_file: showed bytes " + std::to_string(offset) + " to " + std::to_string(end) + " of " +
            std::to_string(size) + "; one read returns at most " + std::to_string(options.max_read_bytes) +
            " bytes. To read on, call read_file with offset=" + std::to_string(end) +
            " (and limit to read less)]";
  }
  result.output = std::move(data);
  return result;
}

ToolResult write_file(const FileToolOptions& options, const nlohmann::json& args,
                      const ToolContext& context) {
  std::string path, content, error;
  bool append = false;
  if (!args.is_object()) {
    return ToolResult::error(
        "the arguments must be a JSON object such as {\"path\": \"notes.txt\", \"content\": \"...\"}");
  }
  if (!get_string(args, "path", true, &path, &error) ||
      !get_string(args, "content", true, &content, &error) || !get_bool(args, "append", &append, &error)) {
    return ToolResult::error(error);
  }
  if (content.size() > options.max_write_bytes) {
    return ToolResult::error("content is " + std::to_string(content.size()) + " bytes, over the limit of " +
                             std::to_string(options.max_write_bytes) +
                             " bytes for one write; write the first part, then the rest with append=true");
  }
  WorkspaceRoot root;
  std::string rel;
  if (Status s = open_root(context, path, &root, &rel); !s.ok()) return ToolResult::error(s.message());
  if (rel == ".") return ToolResult::error("'" + path + "' is a directory; give the path of a file to write");

  // A last name that is a symbolic link inside the workspace is written
  // through, as the file it names (once: a link to a link is refused).
  for (int hop = 0;; ++hop) {
    std::string dir_rel, name;
    split_relative(rel, &dir_rel, &name);
    UniqueFd dir;
    if (Status s = make_directories(root, path, dir_rel, &dir); !s.ok()) return ToolResult::error(s.message());
    struct stat st;
    bool exists = ::fstatat(dir.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!exists && errno != ENOENT) {
      return ToolResult::error("cannot check '" + path + "': " + errno_text(errno));
    }
    if (exists && S_ISLNK(st.st_mode)) {
      std::string target;
      Status s = resolve_in_workspace(root.path(), rel, /*must_exist=*/false, &target);
      if (!s.ok()) return ToolResult::error(s.message());
      std::string target_rel;
      if (hop > 0 || !root.relative(target, &target_rel).ok() || target_rel == rel) {
        return ToolResult::error("'" + path + "' is a symbolic link that could not be followed safely; write to "
                                 "the file it names instead");
      }
      rel = target_rel;
      continue;
    }
    if (exists && S_ISDIR(st.st_mode)) {
      return ToolResult::error("'" + path + "' is a directory; give the path of a file to write");
    }
    if (exists && !S_ISREG(st.st_mode)) {
      return ToolResult::error("'" + path + "' exists and is not a regular file; write_file writes regular files");
    }
    if (exists && st.st_nlink > 1) return ToolResult::error(hard_link_refusal(path, st.st_nlink));
    return append ? append_to(dir.get(), name, path, content) : replace(dir.get(), name, path, content, exists, st);
  }
}

// What became of a write_file call a crash or a stop interrupted. Replacing
// a file ends with the same bytes however often it runs: if the file holds
// them, it took effect (the result says what the call says); otherwise it
// runs again. An append that did not happen leaves a file that does not end
// with the bytes: it runs again; one that ends with them may or may not
// have been appended to, and that is unknown.
// Whether `entry` is a temporary file replace() makes beside `name`:
// ".NAME.carapace-" and 16 hex digits.
bool replace_temp_of(std::string_view entry, const std::string& name) {
  const std::string head = "." + name.substr(0, 200) + ".carapace-";
  if (entry.size() != head.size() + 16 || entry.substr(0, head.size()) != head) return false;
  return entry.substr(head.size()).find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

// A crash inside replace() leaves its temporary file beside the target:
// removed, so that a crash leaves nothing in the workspace the call would
// not have left.
void remove_replace_temps(const WorkspaceRoot& root, const std::string& path, const std::string& rel) {
  std::string dir_rel, name;
  split_relative(rel, &dir_rel, &name);
  int fd = -1;
  if (!root.open(path, dir_rel, O_RDONLY | O_DIRECTORY, 0, &fd).ok()) return;
  DIR* listing = ::fdopendir(fd);
  if (listing == nullptr) {
    ::close(fd);
    return;
  }
  std::vector<std::string> stale;
  while (const dirent* entry = ::readdir(listing)) {
    if (replace_temp_of(entry->d_name, name)) stale.emplace_back(entry->d_name);
  }
  for (const auto& temp : stale) ::unlinkat(::dirfd(listing), temp.c_str(), 0);
  ::closedir(listing);
}

ToolRecovery recover_write_file(const nlohmann::json& args, const ToolContext& context) {
  std::string path, content, error;
  bool append = false;
  if (!args.is_object() || !get_string(args, "path", true, &path, &error) ||
      !get_string(args, "content", true, &content, &error) || !get_bool(args, "append", &append, &error)) {
    return ToolRecovery{.verdict = ToolRecovery::Verdict::kRunAgain};  // it fails again, the same way
  }
  WorkspaceRoot root;
  std::string rel;
  int fd = -1;
  if (open_root(context, path, &root, &rel).ok() && rel != "." && !append) remove_replace_temps(root, path, rel);
  if (!open_root(context, path, &root, &rel).ok() ||
      !root.open(path, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, &fd).ok()) {
    return ToolRecovery{.verdict = ToolRecovery::Verdict::kRunAgain};  // not there: not written
  }
  UniqueFd file(fd);
  struct stat st;
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) return ToolRecovery{};
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // The bytes that would be the call's: the whole file, or its end.
  if (size < content.size() || (!append && size != content.size())) {
    return ToolRecovery{.verdict = ToolRecovery::Verdict::kRunAgain};
  }
  std::string tail(content.size(), '\0');
  const off_t from = static_cast<off_t>(size - content.size());
  size_t got = 0;
  while (got < tail.size()) {
    ssize_t n = ::pread(file.get(), tail.data() + got, tail.size() - got, from + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ToolRecovery{};
    got += static_cast<size_t>(n);
  }
  if (tail != content) return ToolRecovery{.verdict = ToolRecovery::Verdict::kRunAgain};
  if (append) return ToolRecovery{};
  // What the call would have said: the same conversation as without the
  // interruption (the log shows the result came after a resume).
  return ToolRecovery{
      .verdict = ToolRecovery::Verdict::kDone,
      .result = ToolResult{.output = "wrote " + std::to_string(content.size()) + " bytes to '" + path + "'"}};
}

ToolResult list_dir(const FileToolOptions& options, const nlohmann::json& args, const ToolContext& context) {
  std::string path = ".", error;
  if (!args.is_null() && !args.is_object()) {
    return ToolResult::error("the arguments must be a JSON object such as {\"path\": \"src\"}");
  }
  if (args.is_object() && !get_string(args, "path", false, &path, &error)) return ToolResult::error(error);
  WorkspaceRoot root;
  std::string rel;
  if (Status s = open_root(context, path, &root, &rel); !s.ok()) return ToolResult::error(s.message());
  int fd = -1;
  if (Status s = root.open(path, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY, 0, &fd); !s.ok()) {
    return ToolResult::error(s.message());
  }
  struct stat dir_stat;
  if (::fstat(fd, &dir_stat) != 0 || !S_ISDIR(dir_stat.st_mode)) {
    ::close(fd);
    return ToolResult::error("'" + path + "' is not a directory; use read_file to read a file");
  }
  DIR* listing = ::fdopendir(fd);  // owns fd from here
  if (listing == nullptr) {
    int err = errno;
    ::close(fd);
    return ToolResult::error("cannot list '" + path + "': " + errno_text(err));
  }
  std::vector<std::pair<std::string, std::string>> entries;  // name, line
  int list_error = 0;
  for (;;) {
    errno = 0;
    dirent* entry = ::readdir(listing);
    if (entry == nullptr) {
      list_error = errno;
      break;
    }
    std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    bool stat_ok = ::fstatat(::dirfd(listing), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    const std::string shown = display_name(name);
    std::string line;
    if (!stat_ok) {
      line = shown;
    } else if (S_ISDIR(st.st_mode)) {
      line = shown + "/";
    } else if (S_ISREG(st.st_mode)) {
      line = shown + " (" + std::to_string(st.st_size) + " bytes)";
    } else if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = ::readlinkat(::dirfd(listing), entry->d_name, target, sizeof target);
      line = shown + " -> " + (n >= 0 ? display_name(std::string_view(target, static_cast<size_t>(n))) : "?");
    } else if (S_ISFIFO(st.st_mode)) {
      line = shown + " (fifo)";
    } else if (S_ISSOCK(st.st_mode)) {
      line = shown + " (socket)";
    } else if (S_ISBLK(st.st_mode) || S_ISCHR(st.st_mode)) {
      line = shown + " (device)";
    } else {
      line = shown;
    }
    entries.emplace_back(std::move(name), std::move(line));
  }
  ::closedir(listing);
  if (list_error != 0) return ToolResult::error("cannot list '" + path + "': " + errno_text(list_error));
  std::sort(entries.begin(), entries.end());

  ToolResult result;
  if (entries.empty()) {
    result.output = "(empty directory)";
    return result;
  }
  uint64_t full_bytes = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    full_bytes += entries[i].second.size() + 1;
    if (i < options.max_list_entries) result.output += entries[i].second + "\n";
  }
  if (entries.size() > options.max_list_entries) {
    result.truncated = true;
    result.original_bytes = full_bytes;
    result.output += "[... " + std::to_string(entries.size() - options.max_list_entries) +
                     " more entries not shown (" + std::to_string(entries.size()) +
                     " in all); list a subdirectory, or filter with the shell tool, e.g. `ls " + path +
                     " | grep pattern`]\n";
  }
  return result;
}

using FileToolBody = ToolResult (*)(const FileToolOptions&, const nlohmann::json&, const ToolContext&);

// A built-in file tool: blocking (file I/O), confined to the workspace by its body.
ToolDefinition file_tool(std::string name, std::string description, JsonText schema, bool idempotent,
                         const FileToolOptions& options, FileToolBody body) {
  ToolDefinition tool;
  tool.spec.name = std::move(name);
  tool.spec.description = std::move(description);
  tool.spec.schema = std::move(schema);
  tool.spec.idempotent = idempotent;
  tool.blocking = true;
  tool.run = [options, body](const nlohmann::json& args, const ToolContext& context) {
    return body(options, args, context);
  };
  return tool;
}

JsonText schema_of(const nlohmann::json& properties, const std::vector<std::string>& required) {
  nlohmann::json s = {{"type", "object"}, {"properties", properties}, {"additionalProperties", false}};
  if (!required.empty()) s["required"] = required;
  return JsonText{s.dump()};
}

}  // namespace

ToolDefinition make_read_file_tool(const FileToolOptions& options) {
  return file_tool(
      "read_file",
      "Reads a text file in the workspace and returns its content. `offset` and `limit` count bytes and "
      "select a part of the file. One call returns at most " +
          std::to_string(options.max_read_bytes) +
          " bytes; a longer file is cut there, and a last line says which offset to read on from. Binary "
          "files are refused (inspect them with the shell tool).",
      schema_of({{"path", {{"type", "string"}, {"description", "File path, relative to the workspace."}}},
                 {"offset",
                  {{"type", "integer"}, {"minimum", 0}, {"description", "First byte to read (default 0)."}}},
                 {"limit",
                  {{"type", "integer"}, {"minimum", 1}, {"description", "How many bytes to read at most."}}}},
                {"path"}),
      /*idempotent=*/true, options, read_file);
}

ToolDefinition make_write_file_tool(const FileToolOptions& options) {
  ToolDefinition tool = file_tool(
      "write_file",
      "Writes text to a file in the workspace, replacing the file, or adding to its end with "
      "`append`: true. Missing parent directories are created. One call writes at most " +
          std::to_string(options.max_write_bytes) + " bytes; write more in parts with `append`.",
      schema_of({{"path", {{"type", "string"}, {"description", "File path, relative to the workspace."}}},
                 {"content", {{"type", "string"}, {"description", "The text to write."}}},
                 {"append",
                  {{"type", "boolean"},
                   {"description", "Add to the end of the file instead of replacing it (default false)."}}}},
                {"path", "content"}),
      /*idempotent=*/false, options, write_file);
  tool.recover = recover_write_file;
  return tool;
}

ToolDefinition make_list_dir_tool(const FileToolOptions& options) {
  return file_tool(
      "list_dir",
      "Lists a directory in the workspace, one entry a line, sorted by name: directories end with '/', "
      "files show their size in bytes, symbolic links show their target. A name that could be misread (a "
      "newline or other control character, a backslash, a leading quote, leading or trailing spaces, ' -> ', "
      "bytes that are not UTF-8) is shown in double quotes with C escapes (\\n, \\t, \\\\, \\\", \\xNN). At most " +
          std::to_string(options.max_list_entries) + " entries are shown.",
      schema_of({{"path",
                  {{"type", "string"},
                   {"description", "Directory path, relative to the workspace (default \".\")."}}}},
                {}),
      /*idempotent=*/true, options, list_dir);
}

}  // namespace carapace
