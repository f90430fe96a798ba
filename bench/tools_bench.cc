// tools_bench: what the tools' confinement costs per call, against the same
// work without it, in the same run (rounds interleaved).
//
//   build/bench/tools_bench [--shell-calls N] [--file-calls N] [--dir DIR] [--quick]
//
// (s) one shell call, `true`, through:
//       posix_spawn    bash -c true with posix_spawn + waitpid: no pipes, no
//                      guard (the floor of any process-based tool)
//       guard          run_process: output pipe, guard process (subreaper,
//                      sweep of descendants), no sandbox
//       sandbox off    the shell tool with tools.sandbox "off"
//       workspace-write the shell tool in its Landlock sandbox (ruleset,
//                      scratch TMPDIR made and removed, capabilities dropped)
//       + network off  the same in a network namespace of its own
// (f) file tools on a small file two directories down:
//       read_file / write_file / list_dir as they are now (WorkspaceRoot:
//       openat2 beneath the root; writes through a temporary file + rename)
//       against the path they replaced (resolve_in_workspace's textual check,
//       then open by path; writes in place), and a bare open/read by path.
// Prints a table, then one JSON object as the last line.
#include <CLI/CLI.hpp>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "actors/tool/file_tools.h"
#include "actors/tool/process/process.h"
#include "actors/tool/process/sandbox.h"
#include "actors/tool/shell_tool.h"
#include "actors/tool/workspace.h"

extern char** environ;

using namespace carapace;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "tools_bench: %s\n", what.c_str());
  std::exit(1);
}

struct Variant {
  std::string name;
  std::function<void()> once;
  double seconds = 0;
  uint64_t calls = 0;
  double us() const { return calls ? seconds * 1e6 / static_cast<double>(calls) : 0; }
};

// Runs every variant `per_round` times a round, rounds interleaved.
void measure(std::vector<Variant>& variants, uint64_t total, int rounds) {
  const uint64_t per_round = std::max<uint64_t>(1, total / static_cast<uint64_t>(rounds));
  for (auto& v : variants) v.once();  // warm up
  for (int r = 0; r < rounds; ++r) {
    for (auto& v : variants) {
      auto start = Clock::now();
      for (uint64_t i = 0; i < per_round; ++i) v.once();
      v.seconds += std::chrono::duration<double>(Clock::now() - start).count();
      v.calls += per_round;
    }
  }
}

void spawn_true() {
  pid_t pid;
  char arg0[] = "bash", arg1[] = "-c", arg2[] = "true";
  char* argv[] = {arg0, arg1, arg2, nullptr};
  if (posix_spawnp(&pid, "bash", nullptr, nullptr, argv, environ) != 0) die("posix_spawn failed");
  int status;
  waitpid(pid, &status, 0);
}

void expect_ok(const ToolResult& r, const char* what) {
  if (r.is_error) die(std::string(what) + ": " + r.output);
}

// The file tools' path before WorkspaceRoot: a textual check, then an open by path.
std::string old_read(const std::string& ws, const std::string& path) {
  std::string resolved;
  if (!resolve_in_workspace(ws, path, true, &resolved).ok()) die("old read: resolve");
  int fd = ::open(resolved.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) die("old read: open");
  struct stat st;
  ::fstat(fd, &st);
  std::string data(static_cast<size_t>(st.st_size), '\0');
  ssize_t n = ::pread(fd, data.data(), data.size(), 0);
  ::close(fd);
  data.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return data;
}

void old_write(const std::string& ws, const std::string& path, const std::string& content) {
  std::string resolved;
  if (!resolve_in_workspace(ws, path, false, &resolved).ok()) die("old write: resolve");
  std::error_code ec;
  if (fs::symlink_status(resolved, ec).type() == fs::file_type::directory) die("old write: a directory");
  fs::create_directories(fs::path(resolved).parent_path(), ec);
  int fd = ::open(resolved.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_TRUNC, 0644);
  if (fd < 0) die("old write: open");
  if (::write(fd, content.data(), content.size()) < 0) die("old write: write");
  struct stat st;
  ::fstat(fd, &st);
  ::close(fd);
}

size_t old_list(const std::string& ws, const std::string& path) {
  std::string resolved;
  if (!resolve_in_workspace(ws, path, true, &resolved).ok()) die("old list: resolve");
  std::error_code ec;
  size_t n = 0;
  for (fs::directory_iterator it(resolved, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (fs::symlink_status(it->path(), ec).type() == fs::file_type::regular) n += fs::file_size(it->path(), ec);
    ++n;
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tools_bench: the cost of tool confinement per call"};
  uint64_t shell_calls = 400, file_calls = 20000;
  std::string dir_flag;
  bool quick = false;
  app.add_option("--shell-calls", shell_calls, "Shell calls per variant");
  app.add_option("--file-calls", file_calls, "File tool calls per variant");
  app.add_option("--dir", dir_flag, "Scratch directory (default: the temp dir)");
  app.add_flag("--quick", quick, "Tiny sizes: checks that it runs");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    shell_calls = 10;
    file_calls = 50;
  }
  const int rounds = quick ? 1 : 10;

  fs::path base = dir_flag.empty() ? fs::temp_directory_path() : fs::path(dir_flag);
  fs::path dir = base / ("tools-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir / "ws/src/lib");
  const std::string ws = fs::canonical(dir / "ws").string();
  std::ofstream(ws + "/src/lib/notes.txt") << std::string(2000, 'x') << "\n";
  for (int i = 0; i < 20; ++i) std::ofstream(ws + "/src/lib/f" + std::to_string(i) + ".txt") << i;
  const ToolContext context{.workspace = ws, .session_id = "bench", .call_id = "c"};

  const SandboxSupport& support = sandbox_support();
  const nlohmann::json command = {{"command", "true"}};
  ToolDefinition shell_off = make_shell_tool({.sandbox = {.mode = "off"}});
  std::vector<Variant> shell = {
      {"posix_spawn bash -c true + waitpid", spawn_true},
      {"run_process (pipe, guard, sweep)",
       [] {
         ProcessResult r = run_process({.argv = {"bash", "-c", "true"}});
         if (r.exit_code != 0) die("run_process: " + r.error);
       }},
      {"shell tool, sandbox off", [&] { expect_ok(shell_off.run(command, context), "shell off"); }},
  };
  if (support.landlock_abi > 0) {
    ToolDefinition sandboxed = make_shell_tool({.sandbox = {.mode = "workspace-write"}});
    shell.push_back(
        {"shell tool, workspace-write", [=] { expect_ok(sandboxed.run(command, context), "workspace-write"); }});
    if (support.network_namespace) {
      ToolDefinition offline = make_shell_tool({.sandbox = {.mode = "workspace-write", .network = "off"}});
      shell.push_back({"shell tool, workspace-write + network off",
                       [=] { expect_ok(offline.run(command, context), "network off"); }});
    }
  } else {
    std::fprintf(stderr, "tools_bench: no Landlock here (%s): sandboxed rows skipped\n", support.landlock_note.c_str());
  }
  measure(shell, shell_calls, rounds);

  ToolDefinition read = make_read_file_tool({});
  ToolDefinition write = make_write_file_tool({});
  ToolDefinition list = make_list_dir_tool({});
  const std::string content(2000, 'y');
  std::vector<Variant> files = {
      {"read_file: openat2 beneath the root",
       [&] { expect_ok(read.run({{"path", "src/lib/notes.txt"}}, context), "read"); }},
      {"read: textual check + open by path (before)", [&] { old_read(ws, "src/lib/notes.txt"); }},
      {"read: open by path, no check",
       [&] {
         int fd = ::open((ws + "/src/lib/notes.txt").c_str(), O_RDONLY | O_CLOEXEC);
         char buf[4096];
         if (fd < 0 || ::read(fd, buf, sizeof buf) < 0) die("bare read");
         ::close(fd);
       }},
      {"write_file: openat2 + temp file + renameat",
       [&] { expect_ok(write.run({{"path", "src/lib/out.txt"}, {"content", content}}, context), "write"); }},
      {"write: textual check + open O_TRUNC (before)", [&] { old_write(ws, "src/lib/out2.txt", content); }},
      {"list_dir: openat2 + fdopendir", [&] { expect_ok(list.run({{"path", "src/lib"}}, context), "list"); }},
      {"list: textual check + directory_iterator (before)", [&] { old_list(ws, "src/lib"); }},
  };
  measure(files, file_calls, rounds);

  std::printf("measurement                                              per call [us]   vs first row\n");
  std::printf("(s) shell call, `true`, Landlock ABI %d%s\n", support.landlock_abi,
              support.network_namespace ? ", network namespaces" : "");
  nlohmann::json out = {{"landlock_abi", support.landlock_abi}, {"shell_calls", shell_calls},
                        {"file_calls", file_calls}};
  for (const auto& v : shell) {
    std::printf("    %-50s %10.0f %10.2fx\n", v.name.c_str(), v.us(), v.us() / shell[0].us());
    out["shell_us"][v.name] = v.us();
  }
  std::printf("(f) file tools, a 2 KB file two directories down\n");
  for (size_t i = 0; i < files.size(); ++i) {
    const Variant& v = files[i];
    const Variant& ref = files[i < 3 ? 0 : i < 5 ? 3 : 5];
    std::printf("    %-50s %10.1f %10.2fx\n", v.name.c_str(), v.us(), v.us() / ref.us());
    out["file_us"][v.name] = v.us();
  }
  std::printf("%s\n", out.dump().c_str());
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
}
