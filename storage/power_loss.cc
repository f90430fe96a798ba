#include "storage/power_loss.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <map>
#include <charconv>
#include <random>
#include <vector>

#include "base/text.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

struct FileFate {
  uint64_t durable_bytes = 0;
  bool entry_durable = true;  // its directory was synced since it was created
  uint64_t created_at = 0;    // ledger line of its creation, to find the newest
};

std::string parent_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

std::string without_trailing_slash(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// A rename announced by an `r` line and never confirmed by its `R` line was
// done if the process died between the two: its source is gone and its
// target is there.
bool unconfirmed_rename_was_done(const std::vector<std::string>& lines, size_t at) {
  const std::string& rest = lines[at];
  for (size_t i = at + 1; i < lines.size(); ++i) {
    if (lines[i][0] == 'R' && lines[i].compare(1, std::string::npos, rest, 1, std::string::npos) == 0) return false;
  }
  size_t tab = rest.find('\t');
  if (tab == std::string::npos) return false;
  std::error_code ec;
  return !fs::exists(rest.substr(2, tab - 2), ec) && fs::exists(rest.substr(tab + 1), ec);
}

Status read_ledger(const std::string& path, std::map<std::string, FileFate>* files) {
  std::ifstream in(path);
  if (!in) return Status::not_found("no sync ledger at " + path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (line.size() < 3 || line[1] != ' ') {
      // A line cut short by the process's death is the ledger's torn tail.
      if (in.peek() == EOF) break;
      return Status::corruption("sync ledger " + path + " line " + std::to_string(lines.size() + 1) +
                                " is malformed");
    }
    lines.push_back(std::move(line));
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const uint64_t n = i + 1;
    char op = lines[i][0];
    if (op == 'r') {
      if (!unconfirmed_rename_was_done(lines, i)) continue;
      op = 'R';
    }
    std::string rest = lines[i].substr(2);
    switch (op) {
      case 'C':
        (*files)[rest] = FileFate{.durable_bytes = 0, .entry_durable = false, .created_at = n};
        break;
      case 'S': {
        size_t space = rest.find(' ');
        if (space == std::string::npos) return Status::corruption("sync ledger line " + std::to_string(n));
        uint64_t bytes = 0;
        auto [end, ec] = std::from_chars(rest.data(), rest.data() + space, bytes);
        if (ec != std::errc() || end != rest.data() + space)
          return Status::corruption("sync ledger line " + std::to_string(n) + " has a bad size");
        (*files)[rest.substr(space + 1)].durable_bytes = bytes;
        break;
      }
      case 'D': {
        std::string dir = without_trailing_slash(rest);
        for (auto& [file, fate] : *files) {
          if (parent_of(file) == dir) fate.entry_durable = true;
        }
        break;
      }
      case 'R': {
        size_t tab = rest.find('\t');
        if (tab == std::string::npos) return Status::corruption("sync ledger line " + std::to_string(n));
        std::string from = rest.substr(0, tab), to = rest.substr(tab + 1);
        auto it = files->find(from);
        FileFate fate = it == files->end() ? FileFate{} : it->second;
        if (it != files->end()) files->erase(it);
        // Renames are taken as durable once done (not modelled). A journaling
        // file system makes directory operations durable in order, so the
        // creations before a durable rename in its directory are durable too.
        fate.entry_durable = true;
        for (auto& [file, earlier] : *files) {
          if (parent_of(file) == parent_of(to)) earlier.entry_durable = true;
        }
        (*files)[to] = fate;
        break;
      }
      case 'X':
        files->erase(rest);
        break;
      default:
        return Status::corruption("sync ledger " + path + " line " + std::to_string(n) + " is malformed");
    }
  }
  return Status();
}

bool is_wal(const std::string& path) { return path.size() > 4 && path.compare(path.size() - 4, 4, ".log") == 0; }

}  // namespace

Status simulate_power_loss(const PowerLossOptions& options, PowerLossReport* report) {
  std::map<std::string, FileFate> files;
  // No ledger: the process died before it wrote anything through the ledger's
  // file system, so there is nothing unsynced to take away.
  std::error_code probe;
  if (!fs::exists(options.ledger_path, probe) && !probe) return Status();
  CARAPACE_RETURN_IF_ERROR(read_ledger(options.ledger_path, &files));
  // The newest WAL with unsynced bytes is where a write was in flight.
  std::string torn;
  if (options.tear_last_write) {
    uint64_t newest = 0;
    for (const auto& [path, fate] : files) {
      std::error_code ec;
      uint64_t size = fs::file_size(path, ec);
      if (!ec && is_wal(path) && fate.entry_durable && size > fate.durable_bytes && fate.created_at >= newest) {
        newest = fate.created_at;
        torn = path;
      }
    }
  }
  std::mt19937_64 rng(options.seed);
  for (const auto& [path, fate] : files) {
    std::error_code ec;
    if (!fs::exists(path, ec)) continue;
    if (!fate.entry_durable) {
      fs::remove(path, ec);
      if (ec) return Status::io_error("cannot remove " + path + ": " + ec.message());
      ++report->files_removed;
      continue;
    }
    uint64_t size = fs::file_size(path, ec);
    if (ec) return Status::io_error("cannot stat " + path + ": " + ec.message());
    if (size <= fate.durable_bytes) continue;
    uint64_t keep = fate.durable_bytes;
    if (path == torn) {
      uint64_t tail = size - fate.durable_bytes;
      report->torn_file = path;
      report->torn_bytes_kept = rng() % tail;  // never all of it: the write did not complete
      keep += report->torn_bytes_kept;
    }
    if (::truncate(path.c_str(), static_cast<off_t>(keep)) != 0) {
      return Status::io_error("cannot truncate " + path + ": " + errno_text(errno));
    }
    ++report->files_truncated;
    report->bytes_dropped += size - keep;
  }
  std::ofstream(options.ledger_path, std::ios::trunc);
  return Status();
}

}  // namespace carapace
