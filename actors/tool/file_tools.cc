#include "actors/tool/file_tools.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "actors/tool/workspace.h"
#include "base/text.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

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
  std::string resolved;
  if (Status s = resolve_in_workspace(context.workspace, path, /*must_exist=*/true, &resolved); !s.ok()) {
    return ToolResult::error(s.message());
  }

  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below.
  int fd = ::open(resolved.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return ToolResult::error("cannot open '" + path + "': " + errno_text(errno));
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
  std::string resolved;
  if (Status s = resolve_in_workspace(context.workspace, path, /*must_exist=*/false, &resolved); !s.ok()) {
    return ToolResult::error(s.message());
  }
  std::error_code ec;
  fs::file_type type = fs::symlink_status(resolved, ec).type();
  if (type == fs::file_type::directory) {
    return ToolResult::error("'" + path + "' is a directory; give the path of a file to write");
  }
  if (type != fs::file_type::not_found && type != fs::file_type::regular) {
    return ToolResult::error("'" + path +
                             "' exists and is not a regular file; write_file writes regular files");
  }
  fs::create_directories(fs::path(resolved).parent_path(), ec);
  if (ec) return ToolResult::error("cannot create the directories of '" + path + "': " + ec.message());

  // O_NOFOLLOW: the resolved path has no links; one appearing since the
  // check must not redirect the write.
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (append ? O_APPEND : O_TRUNC);
  int fd = ::open(resolved.c_str(), flags, 0644);
  if (fd < 0) return ToolResult::error("cannot open '" + path + "' for writing: " + errno_text(errno));
  size_t written = 0;
  while (written < content.size()) {
    ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return ToolResult::error("writing '" + path + "' failed after " + std::to_string(written) +
                               " bytes: " + errno_text(err));
    }
    written += static_cast<size_t>(n);
  }
  struct stat st;
  bool stat_ok = ::fstat(fd, &st) == 0;
  if (::close(fd) != 0)
    return ToolResult::error("writing '" + path + "' failed on close: " + errno_text(errno));

  ToolResult result;
  if (append) {
    result.output = "appended " + std::to_string(written) + " bytes to '" + path + "'";
    if (stat_ok) result.output += " (now " + std::to_string(st.st_size) + " bytes)";
  } else {
    result.output = "wrote " + std::to_string(written) + " bytes to '" + path + "'";
  }
  return result;
}

ToolResult list_dir(const FileToolOptions& options, const nlohmann::json& args, const ToolContext& context) {
  std::string path = ".", error;
  if (!args.is_null() && !args.is_object()) {
    return ToolResult::error("the arguments must be a JSON object such as {\"path\": \"src\"}");
  }
  if (args.is_object() && !get_string(args, "path", false, &path, &error)) return ToolResult::error(error);
  std::string resolved;
  if (Status s = resolve_in_workspace(context.workspace, path, /*must_exist=*/true, &resolved); !s.ok()) {
    return ToolResult::error(s.message());
  }
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(resolved, ec))) {
    return ToolResult::error("'" + path + "' is not a directory; use read_file to read a file");
  }

  std::vector<std::pair<std::string, std::string>> entries;  // name, line
  fs::directory_iterator it(resolved, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::path& entry = it->path();
    std::string name = entry.filename().string();
    std::error_code entry_ec;
    fs::file_status st = fs::symlink_status(entry, entry_ec);
    std::string line;
    switch (st.type()) {
      case fs::file_type::directory:
        line = name + "/";
        break;
      case fs::file_type::regular: {
        uintmax_t bytes = fs::file_size(entry, entry_ec);
        line = entry_ec ? name : name + " (" + std::to_string(bytes) + " bytes)";
        break;
      }
      case fs::file_type::symlink:
        line = name + " -> " + fs::read_symlink(entry, entry_ec).string();
        break;
      case fs::file_type::fifo:
        line = name + " (fifo)";
        break;
      case fs::file_type::socket:
        line = name + " (socket)";
        break;
      case fs::file_type::block:
      case fs::file_type::character:
        line = name + " (device)";
        break;
      default:
        line = name;
    }
    entries.emplace_back(std::move(name), std::move(line));
  }
  if (ec) return ToolResult::error("cannot list '" + path + "': " + ec.message());
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
  return file_tool(
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
}

ToolDefinition make_list_dir_tool(const FileToolOptions& options) {
  return file_tool(
      "list_dir",
      "Lists a directory in the workspace, one entry a line, sorted by name: directories end with '/', "
      "files show their size in bytes, symbolic links show their target. At most " +
          std::to_string(options.max_list_entries) + " entries are shown.",
      schema_of({{"path",
                  {{"type", "string"},
                   {"description", "Directory path, relative to the workspace (default \".\")."}}}},
                {}),
      /*idempotent=*/true, options, list_dir);
}

}  // namespace carapace
