#include "actors/tool/workspace.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace carapace {
namespace {

namespace fs = std::filesystem;

// "/a/b/" and "/a/b" name the same directory; comparisons below go by
// components, where the trailing separator would be an extra empty one.
fs::path without_trailing_separator(fs::path p) {
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();
  return p;
}

bool is_within(const fs::path& path, const fs::path& root) {
  return std::mismatch(root.begin(), root.end(), path.begin(), path.end()).first == root.end();
}

}  // namespace

Status canonical_workspace(const std::string& path, std::string* canonical) {
  if (path.empty()) return Status::invalid_argument("the workspace path is empty");
  std::error_code ec;
  fs::path real = fs::canonical(path, ec);
  if (ec == std::errc::no_such_file_or_directory) {
    return Status::not_found("workspace '" + path + "' does not exist");
  }
  if (ec) return Status::invalid_argument("workspace '" + path + "' cannot be resolved: " + ec.message());
  if (!fs::is_directory(real, ec)) {
    return Status::invalid_argument("workspace '" + path + "' is not a directory");
  }
  *canonical = real.string();
  return Status::ok_status();
}

Status resolve_in_workspace(const std::string& workspace, const std::string& requested, bool must_exist,
                            std::string* resolved) {
  std::string root_text;
  CARAPACE_RETURN_IF_ERROR(canonical_workspace(workspace, &root_text));
  const fs::path root(root_text);
  const std::string inside_hint = "; use a path inside it";

  if (requested.empty()) {
    return Status::invalid_argument("the path is empty; give a path inside the workspace " + root_text +
                                    " ('.' is the workspace itself)");
  }
  if (requested.find('\0') != std::string::npos) {
    return Status::invalid_argument("path '" + requested + "' contains a NUL byte");
  }

  const fs::path given(requested);
  fs::path lexical =
      without_trailing_separator((given.is_absolute() ? given : root / given).lexically_normal());
  if (!is_within(lexical, root)) {
    // The caller may know the workspace by a path through a link (/tmp/ws
    // when /tmp is one); an absolute path under that spelling is inside too.
    std::error_code ec;
    fs::path alias = without_trailing_separator(fs::absolute(workspace, ec).lexically_normal());
    if (ec || !is_within(lexical, alias)) {
      return Status::invalid_argument("path '" + requested + "' is outside the workspace " + root_text +
                                      inside_hint);
    }
    lexical = without_trailing_separator((root / lexical.lexically_relative(alias)).lexically_normal());
  }

  // Split into the existing part, whose links canonical() follows, and the
  // part that does not exist yet, which has no links to follow.
  fs::path existing;
  fs::path missing;
  for (const fs::path& part : lexical) {
    if (!missing.empty()) {
      missing /= part;
      continue;
    }
    fs::path next = existing / part;
    std::error_code ec;
    fs::file_status status = fs::symlink_status(next, ec);
    if (status.type() == fs::file_type::not_found) {
      missing = part;
      continue;
    }
    if (ec) {
      return Status::invalid_argument("path '" + requested + "' cannot be checked: '" + next.string() +
                                      "': " + ec.message());
    }
    existing = std::move(next);
  }

  std::error_code ec;
  fs::path real = fs::canonical(existing, ec);
  if (ec) {
    std::error_code link_ec;
    if (fs::is_symlink(fs::symlink_status(existing, link_ec))) {
      std::string link = existing.string();
      return Status::invalid_argument(
          "path '" + requested + "' goes through the symbolic link '" + link +
          "', whose target does not exist or loops; use a path inside the workspace " + root_text +
          " that does not go through it");
    }
    return Status::invalid_argument("path '" + requested + "' cannot be resolved: " + ec.message());
  }
  fs::path full = missing.empty() ? real : real / missing;
  if (!is_within(real, root)) {
    return Status::invalid_argument("path '" + requested + "' leads through a symbolic link to '" +
                                    full.string() + "', which is outside the workspace " + root_text +
                                    inside_hint);
  }
  if (must_exist && !missing.empty()) {
    return Status::not_found("path '" + requested + "' does not exist in the workspace " + root_text);
  }
  *resolved = full.string();
  return Status::ok_status();
}

}  // namespace carapace
