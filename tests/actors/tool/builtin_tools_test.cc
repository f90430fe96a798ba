#define BOOST_TEST_MODULE builtin_tools_test
#include <nlohmann/json.hpp>

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <grp.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "actors/tool/file_tools.h"
#include "actors/tool/process/process.h"
#include "actors/tool/process/sandbox.h"
#include "actors/tool/process/scratch_dir.h"
#include "actors/tool/shell_tool.h"
#include "actors/tool/process/tool_env.h"
#include "actors/tool/workspace.h"
#include "tests/support/printing.h"
#include "tests/support/proc_watch.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using carapace::testing::survivors;
using carapace::testing::TempDir;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

void write_text(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << content;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Orphans of the commands under test are reparented to this process while it
// is alive, so the tests can reap them and see exactly how they ended
// (otherwise they would go to an init that may never reap them).
struct Subreaper {
  Subreaper() { BOOST_REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0); }
  ~Subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
};

// The wait status of `pid`, a child or adopted orphan of this process, once
// it ends; -1 if it is not ours, -2 if it is still running after 5 s.
int reap_within_5s(pid_t pid) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (Clock::now() < deadline) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return -2;
}

pid_t read_pid(const std::string& path) {
  std::string text = read_text(path);
  return text.empty() ? 0 : static_cast<pid_t>(std::stol(text));
}

// A workspace with a subdirectory, a link that stays inside, a link that
// leaves it, a dangling link to a file outside, and a sibling directory
// outside it that holds a secret.
struct WorkspaceFixture {
  TempDir dir;
  std::string ws;
  std::string outside;
  ToolContext context;

  WorkspaceFixture() {
    fs::create_directories(dir.sub("ws/sub"));
    fs::create_directories(dir.sub("outside"));
    ws = fs::canonical(dir.sub("ws")).string();
    outside = fs::canonical(dir.sub("outside")).string();
    write_text(ws + "/sub/f.txt", "inside\n");
    write_text(outside + "/secret.txt", "secret\n");
    fs::create_directory_symlink(ws + "/sub", ws + "/inner_link");
    fs::create_directory_symlink(outside, ws + "/escape");
    fs::create_symlink(outside + "/not_yet.txt", ws + "/dangling");
    context = ToolContext{.workspace = ws, .session_id = "s1", .call_id = "c1"};
  }

  ToolResult call(const ToolDefinition& tool, const nlohmann::json& args) const {
    return tool.run(args, context);
  }

  std::string outside_message(const std::string& path) const {
    return "path '" + path + "' is outside the workspace; use a path inside it";
  }
};

std::string one_mib_command() {
  // 4 + 1,048,568 + 4 bytes: a recognisable head and tail around filler.
  return "printf HEAD; head -c 1048568 /dev/zero | tr '\\0' x; printf TAIL";
}

std::string one_mib_expected_with_64k_cap() {
  return "HEAD" + std::string(32764, 'x') +
         "\n[... 983,040 bytes truncated: kept 65,536 of 1,048,576 ...]\n" + std::string(32764, 'x') + "TAIL";
}

}  // namespace

// ---------------------------------------------------------------------------
BOOST_AUTO_TEST_SUITE(truncate_output_tests)

BOOST_AUTO_TEST_CASE(text_within_the_cap_is_unchanged) {
  bool truncated = true;
  BOOST_TEST(truncate_output("abcd", 4, &truncated) == "abcd");
  BOOST_TEST(!truncated);
  BOOST_TEST(truncate_output("", 0, nullptr) == "");
}

BOOST_AUTO_TEST_CASE(keeps_half_the_cap_from_each_end_with_a_marker) {
  bool truncated = false;
  BOOST_TEST(truncate_output("abcdefghij", 4, &truncated) ==
             "ab\n[... 6 bytes truncated: kept 4 of 10 ...]\nij");
  BOOST_TEST(truncated);
  // An odd cap gives the extra byte to the tail.
  BOOST_TEST(truncate_output("abcdefghij", 5, nullptr) ==
             "ab\n[... 5 bytes truncated: kept 5 of 10 ...]\nhij");
}

BOOST_AUTO_TEST_CASE(cuts_do_not_split_utf8_characters) {
  // "é" is 2 bytes; the head cut falls after its first byte and the tail cut
  // after the first byte of the second one: both move to whole characters.
  std::string text = "x\xC3\xA9yyyyyyyyyy\xC3\xA9z";
  BOOST_REQUIRE(text.size() == 16u);
  BOOST_TEST(truncate_output(text, 4, nullptr) == "x\n[... 14 bytes truncated: kept 2 of 16 ...]\nz");
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------
BOOST_FIXTURE_TEST_SUITE(process_tests, WorkspaceFixture)

BOOST_AUTO_TEST_CASE(reports_the_exit_code_and_the_output) {
  ProcessResult r = run_process({.argv = {"bash", "-c", "echo hi; exit 3"}});
  BOOST_TEST(r.started);
  BOOST_TEST(r.error == "");
  BOOST_TEST(r.exit_code == 3);
  BOOST_TEST(r.term_signal == 0);
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(r.output == "hi\n");
  BOOST_TEST(r.output_bytes == 3u);
  BOOST_TEST(!r.truncated);
}

BOOST_AUTO_TEST_CASE(reports_the_signal_that_ended_the_child) {
  ProcessResult r = run_process({.argv = {"bash", "-c", "kill -KILL $$"}});
  BOOST_TEST(r.started);
  BOOST_TEST(r.term_signal == SIGKILL);
  BOOST_TEST(r.exit_code == -1);
  BOOST_TEST(!r.timed_out);
}

BOOST_AUTO_TEST_CASE(stdout_and_stderr_are_merged_in_order) {
  ProcessResult r =
      run_process({.argv = {"bash", "-c", "echo one; echo two >&2; echo three; echo four >&2"}});
  BOOST_TEST(r.output == "one\ntwo\nthree\nfour\n");
}

BOOST_AUTO_TEST_CASE(stdin_is_delivered_then_closed) {
  ProcessResult r = run_process({.argv = {"cat"}, .stdin_data = "line 1\nline 2\n", .timeout_ms = 10000});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(!r.timed_out);  // cat saw EOF: stdin was closed after the data
  BOOST_TEST(r.output == "line 1\nline 2\n");

  // A large input round-trips: writing stdin and reading stdout interleave.
  std::string big(3 * 1024 * 1024, 'q');
  r = run_process({.argv = {"cat"}, .stdin_data = big, .timeout_ms = 20000, .max_output_bytes = big.size()});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.output_bytes == big.size());
  BOOST_TEST((r.output == big));
}

BOOST_AUTO_TEST_CASE(a_child_that_does_not_read_stdin_neither_blocks_nor_kills_the_caller) {
  std::string big(4 * 1024 * 1024, 'x');  // far more than a pipe buffer
  ProcessResult r = run_process({.argv = {"head", "-c", "5"}, .stdin_data = big, .timeout_ms = 20000});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(r.output == "xxxxx");

  r = run_process({.argv = {"true"}, .stdin_data = big, .timeout_ms = 20000});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(!r.timed_out);

  // Still alive here, so no SIGPIPE was delivered; none is left pending or
  // blocked in this thread either.
  sigset_t mask, pending;
  BOOST_REQUIRE(pthread_sigmask(SIG_SETMASK, nullptr, &mask) == 0);
  BOOST_TEST(sigismember(&mask, SIGPIPE) == 0);
  BOOST_REQUIRE(sigpending(&pending) == 0);
  BOOST_TEST(sigismember(&pending, SIGPIPE) == 0);
}

BOOST_AUTO_TEST_CASE(the_child_leads_a_new_group_and_inherits_no_other_fds) {
  int null_fd = ::open("/dev/null", O_RDONLY);  // deliberately without O_CLOEXEC
  BOOST_REQUIRE(null_fd >= 0);
  BOOST_REQUIRE(::dup2(null_fd, 100) == 100);
  ProcessResult r = run_process(
      {.argv = {
           "bash", "-c",
           "echo $$ $(cut -d' ' -f5 /proc/$$/stat); [ -e /proc/$$/fd/100 ] && echo leaked || echo clean"}});
  ::close(100);
  ::close(null_fd);
  BOOST_REQUIRE(r.exit_code == 0);
  std::istringstream in(r.output);
  long pid = 0, pgid = 0;
  std::string fds;
  in >> pid >> pgid >> fds;
  BOOST_TEST(pid > 0);
  BOOST_TEST(pgid == pid);  // leads its own group
  BOOST_TEST(pgid != static_cast<long>(::getpgrp()));
  BOOST_TEST(fds == "clean");
}

BOOST_AUTO_TEST_CASE(output_over_the_cap_keeps_head_and_tail_and_counts_everything) {
  ProcessResult r = run_process({.argv = {"bash", "-c", one_mib_command()}, .max_output_bytes = 64 * 1024});
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.truncated);
  BOOST_TEST(r.output_bytes == 1048576u);
  BOOST_TEST((r.output == one_mib_expected_with_64k_cap()));
}

BOOST_AUTO_TEST_CASE(a_timeout_kills_the_whole_process_group) {
  const auto start = Clock::now();
  ProcessResult r = run_process(
      {.argv = {"bash", "-c", "sleep 1001 & echo $! > child.pid; sleep 1002"}, .cwd = ws, .timeout_ms = 500});
  const double elapsed = seconds_since(start);
  BOOST_TEST(r.started);
  BOOST_TEST(r.timed_out);
  BOOST_TEST(!r.stopped);
  BOOST_TEST(r.term_signal == SIGKILL);
  BOOST_TEST(elapsed < 5.0);
  pid_t background = read_pid(ws + "/child.pid");
  BOOST_REQUIRE(background > 0);
  // Gone by the time the call returned: killed and reaped by the guard.
  errno = 0;
  BOOST_TEST(::kill(background, 0) == -1);
  BOOST_TEST(errno == ESRCH);
  BOOST_TEST(survivors({{"sleep", "1001"}, {"sleep", "1002"}}, std::chrono::milliseconds(0)) == 0u);
}

// The reproductions of issue 9: a nohup'd and a setsid'd background process
// outlived their call, its timeout and carapace itself.
BOOST_AUTO_TEST_CASE(daemonised_descendants_die_when_the_call_ends) {
  const auto start = Clock::now();
  ProcessResult r = run_process(
      {.argv = {"bash", "-c",
                "nohup sleep 1005 >/dev/null 2>&1 & setsid sleep 1006 & "
                "(setsid bash -c 'sleep 1007 </dev/null >/dev/null 2>&1 &' &) ; sleep 0.3; echo done"},
       .cwd = ws,
       .timeout_ms = 20000});
  BOOST_TEST(seconds_since(start) < 5.0);
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.output == "done\n");
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(r.killed_background == 3u);
  BOOST_TEST(survivors({{"sleep", "1005"}, {"sleep", "1006"}, {"sleep", "1007"}}, std::chrono::milliseconds(0)) ==
             0u);
}

BOOST_AUTO_TEST_CASE(daemonised_descendants_die_at_the_timeout) {
  const auto start = Clock::now();
  // The escaped sleeps would keep the output pipe open for ever.
  ProcessResult r = run_process(
      {.argv = {"bash", "-c", "setsid sleep 1008 & nohup sleep 1009 & echo before; sleep 1010"},
       .cwd = ws,
       .timeout_ms = 500});
  BOOST_TEST(seconds_since(start) < 5.0);
  BOOST_TEST(r.timed_out);
  BOOST_TEST(r.output == "before\n");
  BOOST_TEST(survivors({{"sleep", "1008"}, {"sleep", "1009"}, {"sleep", "1010"}}, std::chrono::milliseconds(0)) ==
             0u);
}

BOOST_AUTO_TEST_CASE(terminate_all_stops_running_calls_and_refuses_new_ones) {
  ProcessSet processes;
  ProcessResult r;
  std::thread call([&] {
    r = run_process({.argv = {"bash", "-c", "setsid sleep 1021 & sleep 1011; echo finished > f"},
                     .cwd = ws,
                     .processes = &processes});
  });
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while (testing::find_processes({"sleep", "1011"}).empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_TEST(processes.running() == 1u);
  const auto start = Clock::now();
  processes.terminate_all();
  call.join();
  BOOST_TEST(seconds_since(start) < 3.0);
  BOOST_TEST(r.stopped);
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(r.term_signal == SIGKILL);
  BOOST_TEST(processes.running() == 0u);
  BOOST_TEST(survivors({{"sleep", "1011"}, {"sleep", "1021"}}, std::chrono::milliseconds(0)) == 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  BOOST_TEST(!fs::exists(ws + "/f"));

  ProcessResult refused = run_process({.argv = {"true"}, .processes = &processes});
  BOOST_TEST(!refused.started);
  BOOST_TEST(refused.error == "cannot start 'true': the runtime is stopping");
}

// The runtime killed with SIGKILL: its guards get their parent-death signal
// and kill what they guard. The "runtime" is a forked copy of this test.
BOOST_AUTO_TEST_CASE(a_runtime_killed_with_sigkill_takes_its_calls_with_it) {
  Subreaper subreaper;  // the orphaned guard comes here to be reaped
  pid_t runtime = ::fork();
  BOOST_REQUIRE(runtime >= 0);
  if (runtime == 0) {
    run_process({.argv = {"bash", "-c", "setsid sleep 1012 & nohup sleep 1013 >/dev/null 2>&1 & sleep 1014"},
                 .cwd = ws});
    ::_exit(0);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  while ((testing::find_processes({"sleep", "1012"}).empty() || testing::find_processes({"sleep", "1013"}).empty() ||
          testing::find_processes({"sleep", "1014"}).empty()) &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_TEST(testing::find_processes({"sleep", "1014"}).size() == 1u);
  ::kill(runtime, SIGKILL);
  BOOST_TEST(reap_within_5s(runtime) >= 0);
  BOOST_TEST(survivors({{"sleep", "1012"}, {"sleep", "1013"}, {"sleep", "1014"}}) == 0u);
  // Reap the guard, re-parented here.
  const auto reap_deadline = Clock::now() + std::chrono::seconds(5);
  while (::waitpid(-1, nullptr, WNOHANG) >= 0 && Clock::now() < reap_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// A command that kills its own guard with SIGKILL: the runtime's fallback
// finds what the guard left by its session and group.
BOOST_AUTO_TEST_CASE(a_guard_killed_from_outside_leaves_nothing_behind) {
  Subreaper subreaper;
  const auto start = Clock::now();
  ProcessResult r = run_process(
      {.argv = {"bash", "-c", "nohup sleep 1015 >/dev/null 2>&1 & kill -9 $PPID; sleep 1016"}, .cwd = ws});
  BOOST_TEST(seconds_since(start) < 5.0);
  BOOST_TEST(r.started);
  BOOST_TEST(r.term_signal == SIGKILL);
  BOOST_TEST(contains(r.error, "was killed before it reported (signal 9)"), r.error);
  BOOST_TEST(survivors({{"sleep", "1015"}, {"sleep", "1016"}}) == 0u);
}

BOOST_AUTO_TEST_CASE(a_zero_or_huge_timeout_means_no_deadline) {
  for (uint64_t timeout : {uint64_t{0}, UINT64_MAX}) {
    ProcessResult r = run_process({.argv = {"bash", "-c", "sleep 0.2; echo ok"}, .timeout_ms = timeout});
    BOOST_TEST(!r.timed_out);
    BOOST_TEST(r.exit_code == 0);
    BOOST_TEST(r.output == "ok\n");
  }
}

BOOST_AUTO_TEST_CASE(every_fd_it_opens_is_closed) {
  auto open_fds = [] {
    size_t n = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator("/proc/self/fd")) ++n;
    return n;
  };
  const size_t before = open_fds();
  run_process({.argv = {"bash", "-c", "echo hi"}, .stdin_data = "input"});
  run_process({.argv = {"sleep", "10"}, .timeout_ms = 100});
  run_process({.argv = {"carapace-no-such-program"}});
  run_process({.argv = {"true"}, .cwd = ws + "/missing-dir"});
  BOOST_TEST(open_fds() == before);
}

BOOST_AUTO_TEST_CASE(concurrent_calls_keep_their_outputs_apart) {
  std::vector<std::thread> threads;
  std::vector<std::string> outputs(4);
  for (size_t t = 0; t < outputs.size(); ++t) {
    threads.emplace_back([t, &outputs] {
      for (int i = 0; i < 5; ++i) {
        outputs[t] +=
            run_process({.argv = {"bash", "-c", "echo " + std::to_string(t)}, .timeout_ms = 20000}).output;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t t = 0; t < outputs.size(); ++t) {
    std::string line = std::to_string(t) + "\n";
    BOOST_TEST(outputs[t] == line + line + line + line + line);
  }
}

BOOST_AUTO_TEST_CASE(a_missing_program_or_directory_is_not_started) {
  ProcessResult r = run_process({.argv = {"carapace-no-such-program", "x"}});
  BOOST_TEST(!r.started);
  BOOST_TEST(r.error == "cannot start 'carapace-no-such-program': no such program in PATH");

  r = run_process({.argv = {ws + "/no-such-file"}});
  BOOST_TEST(!r.started);
  BOOST_TEST(r.error == "cannot start '" + ws + "/no-such-file': no such file");

  r = run_process({.argv = {"true"}, .cwd = ws + "/missing-dir"});
  BOOST_TEST(!r.started);
  BOOST_TEST(r.error ==
             "cannot start 'true': working directory '" + ws + "/missing-dir': No such file or directory");

  r = run_process({});
  BOOST_TEST(!r.started);
  BOOST_TEST(r.error == "cannot start a process: no program given (argv is empty)");
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------
BOOST_FIXTURE_TEST_SUITE(workspace_tests, WorkspaceFixture)

BOOST_AUTO_TEST_CASE(paths_inside_resolve_to_absolute_paths) {
  std::string out;
  CHECK_OK(resolve_in_workspace(ws, "sub/f.txt", true, &out));
  BOOST_TEST(out == ws + "/sub/f.txt");
  CHECK_OK(resolve_in_workspace(ws, ".", true, &out));
  BOOST_TEST(out == ws);
  CHECK_OK(resolve_in_workspace(ws, "sub/../sub/./f.txt", true, &out));
  BOOST_TEST(out == ws + "/sub/f.txt");
  CHECK_OK(resolve_in_workspace(ws, ws + "/sub/", true, &out));
  BOOST_TEST(out == ws + "/sub");
  CHECK_OK(resolve_in_workspace(ws, "inner_link/f.txt", true, &out));  // a link that stays inside
  BOOST_TEST(out == ws + "/sub/f.txt");
  CHECK_OK(resolve_in_workspace(ws, "new/dir/file.txt", false, &out));
  BOOST_TEST(out == ws + "/new/dir/file.txt");
  // The workspace may be named through a non-canonical path.
  CHECK_OK(resolve_in_workspace(ws + "/sub/..", "sub/f.txt", true, &out));
  BOOST_TEST(out == ws + "/sub/f.txt");
}

BOOST_AUTO_TEST_CASE(dot_dot_and_absolute_paths_outside_are_refused) {
  std::string out = "unchanged";
  Status s = resolve_in_workspace(ws, "../outside/secret.txt", true, &out);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message() == outside_message("../outside/secret.txt"));
  s = resolve_in_workspace(ws, outside + "/secret.txt", true, &out);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message() == outside_message(outside + "/secret.txt"));
  s = resolve_in_workspace(ws, "sub/../../outside/new.txt", false, &out);
  BOOST_TEST(s.is_invalid_argument());
  s = resolve_in_workspace(ws, "/", true, &out);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(out == "unchanged");
}

BOOST_AUTO_TEST_CASE(links_that_leave_the_workspace_are_refused) {
  std::string out = "unchanged";
  Status s = resolve_in_workspace(ws, "escape/secret.txt", true, &out);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message() == "path 'escape/secret.txt' leads through a symbolic link to '" + outside +
                                "/secret.txt', which is outside the workspace; use a path inside it");
  s = resolve_in_workspace(ws, "escape/new/file.txt", false, &out);  // what write_file would create
  BOOST_TEST(s.is_invalid_argument());
  s = resolve_in_workspace(ws, "dangling", false, &out);
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(contains(s.message(), "goes through the symbolic link 'dangling'"));
  BOOST_TEST(out == "unchanged");
}

BOOST_AUTO_TEST_CASE(missing_paths_and_bad_workspaces) {
  std::string out;
  Status s = resolve_in_workspace(ws, "nope.txt", true, &out);
  BOOST_TEST(s.is_not_found());
  BOOST_TEST(s.message() == "path 'nope.txt' does not exist in the workspace");
  s = resolve_in_workspace(ws, "", false, &out);
  BOOST_TEST(s.is_invalid_argument());
  s = canonical_workspace(ws + "/missing", &out);
  BOOST_TEST(s.is_not_found());
  BOOST_TEST(s.message() == "workspace '" + ws + "/missing' does not exist");
  s = canonical_workspace(ws + "/sub/f.txt", &out);
  BOOST_TEST(s.is_invalid_argument());
  CHECK_OK(canonical_workspace(ws + "/inner_link/", &out));
  BOOST_TEST(out == ws + "/sub");
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------
BOOST_FIXTURE_TEST_SUITE(shell_tool_tests, WorkspaceFixture)

BOOST_AUTO_TEST_CASE(the_spec_declares_a_blocking_non_idempotent_tool) {
  ToolDefinition shell = make_shell_tool({});
  BOOST_TEST(shell.spec.name == "shell");
  BOOST_TEST(!shell.spec.idempotent);
  BOOST_TEST(shell.blocking);
  nlohmann::json schema = nlohmann::json::parse(shell.spec.schema.text);
  BOOST_TEST(schema["required"] == nlohmann::json::array({"command"}));
  BOOST_TEST(schema["properties"]["timeout_ms"]["maximum"] == 600000);
}

BOOST_AUTO_TEST_CASE(runs_in_the_workspace_with_an_empty_stdin) {
  ToolDefinition shell = make_shell_tool({});
  ToolResult r = call(shell, {{"command", "pwd; cat; echo done"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.output == ws + "\ndone\n");
  BOOST_TEST(!r.truncated);
  BOOST_TEST(r.original_bytes == 0u);
}

BOOST_AUTO_TEST_CASE(exit_status_and_signal_are_reported_on_a_last_line) {
  ToolDefinition shell = make_shell_tool({});
  ToolResult r = call(shell, {{"command", "echo out; echo err >&2; exit 2"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output == "out\nerr\n[exit status 2]");
  r = call(shell, {{"command", "printf partial; exit 1"}});
  BOOST_TEST(r.output == "partial\n[exit status 1]");
  r = call(shell, {{"command", "kill -TERM $$"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(!r.timed_out);
  BOOST_TEST(r.output == "[killed by signal 15]");
}

BOOST_AUTO_TEST_CASE(a_timeout_kills_the_process_group_and_is_capped) {
  ToolDefinition shell = make_shell_tool({.timeout_ms = 500, .max_timeout_ms = 1000});
  const auto start = Clock::now();
  // Asks for 60 s; gets the 1 s cap.
  ToolResult r = call(shell, {{"command", "echo started; sleep 1017 & echo $! > child.pid; sleep 1018"},
                              {"timeout_ms", 60000}});
  BOOST_TEST(seconds_since(start) < 5.0);
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.timed_out);
  BOOST_TEST(r.output == "started\n[timed out after 1000 ms; the command and every process it started were killed]");
  pid_t background = read_pid(ws + "/child.pid");
  BOOST_REQUIRE(background > 0);
  errno = 0;
  BOOST_TEST(::kill(background, 0) == -1);
  BOOST_TEST(errno == ESRCH);
  BOOST_TEST(survivors({{"sleep", "1017"}, {"sleep", "1018"}}, std::chrono::milliseconds(0)) == 0u);
}

BOOST_AUTO_TEST_CASE(background_processes_are_killed_when_the_command_ends_and_the_model_is_told) {
  ToolDefinition shell = make_shell_tool({});
  ToolResult r = call(shell, {{"command", "nohup sleep 1019 >/dev/null 2>&1 & setsid sleep 1020 & echo ok"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.output == "ok\n[2 background processes were still running when the command ended; they were killed]");
  BOOST_TEST(survivors({{"sleep", "1019"}, {"sleep", "1020"}}, std::chrono::milliseconds(0)) == 0u);
}

BOOST_AUTO_TEST_CASE(large_output_is_truncated_with_the_original_size) {
  ToolDefinition shell = make_shell_tool({.max_output_bytes = 64 * 1024});
  ToolResult r = call(shell, {{"command", one_mib_command()}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.truncated);
  BOOST_TEST(r.original_bytes == 1048576u);
  BOOST_TEST((r.output == one_mib_expected_with_64k_cap()));
}

BOOST_AUTO_TEST_CASE(a_blocked_command_is_refused_without_running) {
  ToolDefinition shell = make_shell_tool({.blocked_patterns = {R"(rm\s+-rf\s+/)", R"(touch\s+made_it)"}});
  ToolResult r = call(shell, {{"command", "touch made_it"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output ==
             R"(command refused: it matches the blocked pattern 'touch\s+made_it'; it was not run)");
  BOOST_TEST(!fs::exists(ws + "/made_it"));
  // The same command under another name runs: the refusal was the pattern's.
  r = call(shell, {{"command", "touch made_other"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(fs::exists(ws + "/made_other"));
}

BOOST_AUTO_TEST_CASE(invalid_options_are_reported_and_fail_closed) {
  Status s = validate_shell_options({.blocked_patterns = {"ok", "(unclosed"}});
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message() ==
                 "blocked pattern 2: \"(unclosed\" is not a valid regular expression: missing ) (at byte 9, "
                 "the end)",
             s.message());
  // Backreferences need backtracking: RE2 refuses them here, not at a call.
  s = validate_shell_options({.blocked_patterns = {R"((a)\1)"}});
  BOOST_TEST(s.message().rfind(
                 "blocked pattern 1: \"(a)\\1\" is not a valid regular expression: invalid escape", 0) == 0u,
             s.message());
  s = validate_shell_options({.timeout_ms = 5000, .max_timeout_ms = 1000});
  BOOST_TEST(s.is_invalid_argument());
  BOOST_TEST(s.message() == "shell timeout_ms 5000 must be between 1 and max_timeout_ms (1000)");
  CHECK_OK(validate_shell_options({.blocked_patterns = {R"(rm\s+-rf\s+/)"}}));

  ToolDefinition shell = make_shell_tool({.blocked_patterns = {"(unclosed"}});
  ToolResult r = call(shell, {{"command", "touch made_it"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output.rfind("the shell tool is misconfigured: blocked pattern 1: \"(unclosed\"", 0) == 0u,
             r.output);
  BOOST_TEST(!fs::exists(ws + "/made_it"));
}

// Issue 9: a NUL in a command silently cut it short ("echo a\0; rm x" ran "echo a").
BOOST_AUTO_TEST_CASE(a_nul_byte_in_a_command_is_refused) {
  ToolDefinition shell = make_shell_tool({});
  ToolResult r = call(shell, {{"command", std::string("echo kept\0; touch cut-off", 25)}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output ==
             "\"command\" contains a NUL byte (at byte 9); bash would run only the text before it, so nothing was "
             "run. Remove it (in a printf format, write \\0 instead)");
  BOOST_TEST(!contains(r.output, "kept"));
  BOOST_TEST(!fs::exists(ws + "/cut-off"));
}

BOOST_AUTO_TEST_CASE(bad_arguments_are_errors_the_model_can_fix) {
  ToolDefinition shell = make_shell_tool({});
  const std::string missing = "missing \"command\": give the bash command line to run, as a string";
  ToolResult r = call(shell, nlohmann::json::object());
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output == missing);
  r = call(shell, {{"command", 42}});
  BOOST_TEST(r.output == missing);
  r = call(shell, {{"command", "true"}, {"timeout_ms", -5}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output == "\"timeout_ms\" must be a positive integer number of milliseconds, not -5");
  r = call(shell, {{"command", "true"}, {"timeout_ms", 2000.0}});
  BOOST_TEST(!r.is_error);
}

BOOST_AUTO_TEST_CASE(cwd_is_confined_to_the_workspace) {
  ToolDefinition shell = make_shell_tool({});
  ToolResult r = call(shell, {{"command", "pwd"}, {"cwd", "sub"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.output == ws + "/sub\n");
  r = call(shell, {{"command", "pwd"}, {"cwd", "inner_link"}});
  BOOST_TEST(r.output == ws + "/sub\n");

  r = call(shell, {{"command", "touch ran"}, {"cwd", "../outside"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output == "cwd: " + outside_message("../outside"));
  r = call(shell, {{"command", "touch ran"}, {"cwd", outside}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output == "cwd: " + outside_message(outside));
  r = call(shell, {{"command", "touch ran"}, {"cwd", "escape"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(contains(r.output, "leads through a symbolic link"));
  r = call(shell, {{"command", "touch ran"}, {"cwd", "sub/f.txt"}});
  BOOST_TEST(r.output == "cwd: 'sub/f.txt' is not a directory; give a directory inside the workspace");
  BOOST_TEST(!fs::exists(outside + "/ran"));
  BOOST_TEST(!fs::exists(ws + "/sub/ran"));
}

BOOST_AUTO_TEST_SUITE_END()

// ---------------------------------------------------------------------------
// The shell tool's sandbox (actors/tool/process/sandbox.h). These run on kernels
// with Landlock; elsewhere they say so and check the refusal instead.
BOOST_FIXTURE_TEST_SUITE(sandbox_tests, WorkspaceFixture)

bool have_landlock() {
  if (sandbox_support().landlock_abi > 0) return true;
  BOOST_TEST_MESSAGE("Landlock is not available here: " << sandbox_support().landlock_note);
  return false;
}

BOOST_AUTO_TEST_CASE(plans_follow_the_kernel_and_refuse_what_it_cannot_enforce) {
  SandboxSupport none{.landlock_abi = 0, .landlock_note = "this kernel has no Landlock", .network_namespace = false,
                      .network_note = "no namespaces"};
  SandboxSupport full{.landlock_abi = 6, .network_namespace = true};
  SandboxSupport tcp_only{.landlock_abi = 4, .network_namespace = false, .network_note = "no namespaces"};
  SandboxPlan plan;
  std::vector<std::string> warnings;
  CHECK_OK(plan_sandbox({}, full, &plan, &warnings));
  BOOST_TEST(plan.mode == "workspace-write");
  BOOST_TEST(!plan.network_off);
  BOOST_TEST(warnings.empty());

  CHECK_OK(plan_sandbox({}, none, &plan, &warnings));
  BOOST_TEST(plan.mode == "off");
  BOOST_REQUIRE(warnings.size() == 1u);
  BOOST_TEST(contains(warnings[0], "tools.sandbox: this kernel has no Landlock; shell commands run without a "
                                   "file-system sandbox"), warnings[0]);

  Status s = plan_sandbox({.mode = "workspace-write"}, none, &plan, nullptr);
  BOOST_TEST(s.is_unsupported());
  BOOST_TEST(s.message() == "tools.sandbox is \"workspace-write\" but this kernel has no Landlock; set "
                            "tools.sandbox to \"off\" to run shell commands unconfined (docs/sandbox.md)");
  s = plan_sandbox({.mode = "off", .network = "off"}, none, &plan, nullptr);
  BOOST_TEST(s.is_unsupported());
  BOOST_TEST(contains(s.message(), "tools.network is \"off\" but no namespaces"), s.message());

  warnings.clear();
  CHECK_OK(plan_sandbox({.network = "off"}, tcp_only, &plan, &warnings));
  BOOST_TEST(plan.network_off);
  BOOST_TEST(!plan.network_namespace);
  BOOST_REQUIRE(warnings.size() == 1u);
  BOOST_TEST(contains(warnings[0], "UDP and Unix sockets still work"));

  BOOST_TEST(plan_sandbox({.mode = "strict"}, full, &plan, nullptr).message() ==
             "tools.sandbox \"strict\" must be \"auto\", \"off\", \"workspace-write\" or \"read-only\"");
  BOOST_TEST(plan_sandbox({.network = "none"}, full, &plan, nullptr).message() ==
             "tools.network \"none\" must be \"on\" or \"off\"");
  BOOST_TEST(plan_sandbox({.readable = {"usr"}}, full, &plan, nullptr).message() ==
             "tools.sandbox_readable[0] \"usr\" must be an absolute path");
  BOOST_TEST(contains(plan_sandbox({.writable = {"/nonexistent-carapace"}}, full, &plan, nullptr).message(),
                      "tools.sandbox_writable[0] \"/nonexistent-carapace\" cannot be used"));
}

BOOST_AUTO_TEST_CASE(workspace_write_allows_the_workspace_and_tmpdir_only) {
  if (!have_landlock()) return;
  fs::create_directories(dir.sub("home"));
  const std::string tmp_target = "/tmp/carapace-sandbox-test-" + std::to_string(::getpid());
  ToolDefinition shell = make_shell_tool({.sandbox = {.mode = "workspace-write"}});
  ToolResult r = call(shell, {{"command", "echo x > " + tmp_target}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(contains(r.output, "Permission denied"), r.output);
  BOOST_TEST(!fs::exists(tmp_target));
  r = call(shell, {{"command", "echo x > " + dir.sub("home") + "/.bashrc; mkdir " + dir.sub("home") + "/.ssh"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(!fs::exists(dir.sub("home") + "/.bashrc"));
  BOOST_TEST(!fs::exists(dir.sub("home") + "/.ssh"));

  r = call(shell, {{"command", "echo inside > made.txt && mkdir -p deep/er && mv made.txt deep/er/ && "
                               "cat deep/er/made.txt && f=$(mktemp) && echo scratch > $f && cat $f && "
                               "echo $TMPDIR > tmpdir.txt && cat /etc/hostname > /dev/null && echo ok"}});
  BOOST_TEST(!r.is_error, r.output);
  BOOST_TEST(r.output == "inside\nscratch\nok\n");
  std::string scratch = read_text(ws + "/tmpdir.txt");
  BOOST_TEST(contains(scratch, "carapace-call-"));
  scratch.pop_back();
  BOOST_TEST(!fs::exists(scratch));  // removed after the call

  // Without the sandbox the same write lands: the check above can fail.
  r = call(make_shell_tool({.sandbox = {.mode = "off"}}), {{"command", "echo x > " + tmp_target}});
  BOOST_TEST(!r.is_error, r.output);
  BOOST_TEST(fs::exists(tmp_target));
  fs::remove(tmp_target);
}

BOOST_AUTO_TEST_CASE(read_only_refuses_workspace_writes) {
  if (!have_landlock()) return;
  ToolDefinition shell = make_shell_tool({.sandbox = {.mode = "read-only"}});
  ToolResult r = call(shell, {{"command", "echo x > new.txt"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(contains(r.output, "Permission denied"), r.output);
  BOOST_TEST(!fs::exists(ws + "/new.txt"));
  r = call(shell, {{"command", "rm sub/f.txt"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(fs::exists(ws + "/sub/f.txt"));
  r = call(shell, {{"command", "cat sub/f.txt; f=$(mktemp) && echo scratch > $f && cat $f"}});
  BOOST_TEST(!r.is_error, r.output);
  BOOST_TEST(r.output == "inside\nscratch\n");
}

// The bypasses of issue 9: blocked patterns are text, the sandbox is not.
BOOST_AUTO_TEST_CASE(pattern_bypasses_cannot_touch_files_outside) {
  if (!have_landlock()) return;
  const std::vector<std::string> commands = {
      "rm  -rf " + outside + "/v0",
      "r''m -rf " + outside + "/v1",
      "X=rm; $X -rf " + outside + "/v2",
      "/bin/rm -f " + outside + "/v3",
      "env rm -f " + outside + "/v4",
      "find " + outside + "/v5 -delete",
      "mv " + outside + "/v6 .",
      "echo overwritten > " + outside + "/v7",
      "truncate -s 0 " + outside + "/v8",
      "cp /dev/null " + outside + "/v9",
      "ln " + outside + "/v10 hardlink10",
      "cd " + outside + " && echo new > v11.new",
  };
  ToolDefinition shell = make_shell_tool({.blocked_patterns = {"rm -rf"}, .sandbox = {.mode = "workspace-write"}});
  for (size_t i = 0; i < commands.size(); ++i) write_text(outside + "/v" + std::to_string(i), "keep\n");
  for (size_t i = 0; i < commands.size(); ++i) {
    ToolResult r = call(shell, {{"command", commands[i]}});
    BOOST_TEST(r.is_error, commands[i] << ": " << r.output);
    BOOST_TEST(!contains(r.output, "blocked pattern"), commands[i]);  // the pattern did not catch it
    BOOST_TEST(read_text(outside + "/v" + std::to_string(i)) == "keep\n", commands[i]);
  }
  BOOST_TEST(!fs::exists(outside + "/v11.new"));
  BOOST_TEST(!fs::exists(ws + "/hardlink10"));
  // The courtesy check still catches the plain spelling.
  ToolResult plain = call(shell, {{"command", "rm -rf " + outside + "/v0"}});
  BOOST_TEST(contains(plain.output, "blocked pattern 'rm -rf'"));
}

BOOST_AUTO_TEST_CASE(a_sandboxed_command_cannot_signal_or_inspect_processes_outside) {
  if (!have_landlock() || sandbox_support().landlock_abi < 6) {
    BOOST_TEST_MESSAGE("skipped: signal scoping needs Landlock ABI 6");
    return;
  }
  pid_t victim = ::fork();
  BOOST_REQUIRE(victim >= 0);
  if (victim == 0) {
    ::execlp("sleep", "sleep", "1051", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ToolDefinition shell = make_shell_tool({.sandbox = {.mode = "workspace-write"}});
  ToolResult r = call(shell, {{"command", "kill -9 " + std::to_string(victim)}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(contains(r.output, "Operation not permitted"), r.output);
  BOOST_TEST(::kill(victim, 0) == 0);  // still alive
  // The guard's (and so the runtime's) environment is not readable either.
  r = call(shell, {{"command", "cat /proc/$PPID/environ > /dev/null && echo readable"}});
  BOOST_TEST(r.is_error, r.output);
  ::kill(victim, SIGKILL);
  ::waitpid(victim, nullptr, 0);
}

BOOST_AUTO_TEST_CASE(network_off_cuts_tcp) {
  if (!sandbox_support().network_namespace && sandbox_support().landlock_abi < 4) {
    BOOST_TEST_MESSAGE("skipped: no network namespace and no Landlock ABI 4 here");
    return;
  }
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BOOST_REQUIRE(listener >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  BOOST_REQUIRE(::listen(listener, 8) == 0);
  socklen_t len = sizeof addr;
  BOOST_REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const std::string connect =
      "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(ntohs(addr.sin_port)) + " && echo connected";
  ToolResult on = call(make_shell_tool({.sandbox = {.mode = "off", .network = "on"}}), {{"command", connect}});
  BOOST_TEST(on.output == "connected\n");
  ToolResult off = call(make_shell_tool({.sandbox = {.mode = "auto", .network = "off"}}), {{"command", connect}});
  BOOST_TEST(off.is_error, off.output);
  BOOST_TEST(!contains(off.output, "connected\n"));
  ::close(listener);
}

// Without root, the network namespace is entered inside a user namespace
// that maps the user to itself. Run as root, this test becomes nobody.
BOOST_AUTO_TEST_CASE(an_unprivileged_user_gets_the_same_sandbox) {
  if (!have_landlock() || !sandbox_support().network_namespace) return;
  if (::geteuid() != 0) {
    BOOST_TEST_MESSAGE("not root: the other sandbox tests already run unprivileged");
    return;
  }
  const std::string own = ws + "/nobody";
  const std::string own_tmp = dir.sub("nobody-tmp");  // /tmp may not be writable to all here
  fs::create_directories(own);
  fs::create_directories(own_tmp);
  BOOST_REQUIRE(::chown(own.c_str(), 65534, 65534) == 0);
  BOOST_REQUIRE(::chown(own_tmp.c_str(), 65534, 65534) == 0);
  for (std::string p = own; p != "/" && !p.empty(); p = fs::path(p).parent_path().string()) {
    ::chmod(p.c_str(), 0755);
  }
  pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
        ::setresuid(65534, 65534, 65534) != 0) {
      ::_exit(10);
    }
    ::setenv("OPENAI_API_KEY", "sk-unprivileged-canary", 1);
    ::setenv("TMPDIR", own_tmp.c_str(), 1);
    ToolDefinition shell = make_shell_tool({.sandbox = {.mode = "workspace-write", .network = "off"}});
    ToolResult r = shell.run(
        {{"command", "id -u; echo hi > f && cat f; echo x > " + outside + "/nobody.txt; "
                     "cat /proc/$PPID/environ; exec 3<>/dev/tcp/127.0.0.1/9 && echo reached"}},
        ToolContext{.workspace = own});
    std::ofstream(own + "/result.txt") << r.output;
    ::_exit(0);
  }
  BOOST_TEST(reap_within_5s(child) == 0);
  std::string out = read_text(own + "/result.txt");
  BOOST_TEST(contains(out, "65534\nhi\n"), out);
  BOOST_TEST(!fs::exists(outside + "/nobody.txt"));
  BOOST_TEST(!contains(out, "canary"), out);
  BOOST_TEST(!contains(out, "reached"), out);
  BOOST_TEST(contains(out, "Permission denied"), out);
}

BOOST_AUTO_TEST_CASE(the_description_tells_the_model_what_it_may_do) {
  if (!have_landlock()) return;
  ToolDefinition shell = make_shell_tool({.sandbox = {.mode = "workspace-write", .network = "off"}});
  BOOST_TEST(contains(shell.spec.description, "write only inside the workspace and $TMPDIR"));
  BOOST_TEST(contains(shell.spec.description, "There is no network."));
}

BOOST_AUTO_TEST_SUITE_END()

// The environment a tool process sees: secrets out by default.
BOOST_FIXTURE_TEST_SUITE(tool_env_tests, WorkspaceFixture)

// Sets variables for one test and restores the environment after it.
struct ScopedEnv {
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  void set(const std::string& name, const std::string& value) {
    const char* old = ::getenv(name.c_str());
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    ::setenv(name.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() {
    for (auto it = saved.rbegin(); it != saved.rend(); ++it) {
      if (it->second)
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        ::unsetenv(it->first.c_str());
    }
  }
};

BOOST_AUTO_TEST_CASE(names_that_look_secret) {
  const std::vector<std::string> providers = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_LLM_CRED"};
  for (const char* name : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MY_LLM_CRED", "GH_TOKEN", "aws_secret_access_key",
                           "DB_Password", "SSH_KEY_PATH", "keyring", "XTOKENX"}) {
    BOOST_TEST(looks_secret(name, providers), name);
  }
  for (const char* name : {"PATH", "HOME", "LANG", "PASSWD_FILE", "TOKYO", "MONKEY_BUSINESS_X"}) {
    // MONKEY contains KEY: a false positive the rule accepts (include passes it).
    BOOST_TEST(looks_secret(name, providers) == (std::string(name) == "MONKEY_BUSINESS_X"), name);
  }
  BOOST_TEST(env_name_matches("AWS_*", "AWS_REGION"));
  BOOST_TEST(env_name_matches("*_TOKEN", "GH_TOKEN"));
  BOOST_TEST(env_name_matches("A*B*C", "AxxBxxC"));
  BOOST_TEST(!env_name_matches("A*B*C", "AxxBxx"));
  BOOST_TEST(!env_name_matches("AWS_*", "XAWS_REGION"));
  BOOST_TEST(env_name_matches("*", ""));
}

BOOST_AUTO_TEST_CASE(bad_options_are_named) {
  BOOST_TEST(validate_tool_env({}).ok());
  BOOST_TEST(validate_tool_env({.inherit = "most"}).message() == "inherit \"most\" must be \"all\", \"core\" or \"none\"");
  BOOST_TEST(validate_tool_env({.include = {"OK", ""}}).message() ==
             "include[1] is empty; give a variable name such as \"GH_TOKEN\"");
  BOOST_TEST(validate_tool_env({.exclude = {"A=B"}}).message() ==
             "exclude[0] \"A=B\" is not a variable name: use letters, digits, '_' and '*' (any run)");
  BOOST_TEST(validate_tool_env({.include = {"X"}, .exclude = {"X"}}).message() ==
             "\"X\" is in both include and exclude; keep it in one");
  Status shell = validate_shell_options({.env = {.inherit = "most"}});
  BOOST_TEST(shell.message() == "env: inherit \"most\" must be \"all\", \"core\" or \"none\"");
  ToolResult r = call(make_shell_tool({.env = {.inherit = "most"}}), {{"command", "env"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(contains(r.output, "misconfigured"), r.output);
}

BOOST_AUTO_TEST_CASE(a_canary_secret_never_reaches_a_shell_command) {
  const std::string canary = "canary-7f3e9a1c-do-not-leak";
  ScopedEnv env;
  env.set("OPENAI_API_KEY", canary + "-openai");
  env.set("ANTHROPIC_API_KEY", canary + "-anthropic");
  env.set("CARAPACE_TEST_SECRET", canary + "-secret");
  env.set("carapace_test_token", canary + "-token");
  env.set("CARAPACE_TEST_PASSWORD_FILE", canary + "-password");
  env.set("CARAPACE_TEST_APIKEY", canary + "-apikey");
  env.set("MY_PROVIDER_CRED", canary + "-configured");
  env.set("CARAPACE_TEST_PLAIN", "plain-value");

  ToolDefinition shell = make_shell_tool({.env = {.secret_names = {"OPENAI_API_KEY", "MY_PROVIDER_CRED"}}});
  // `env`, and the process's initial environment as the kernel holds it.
  ToolResult r = call(shell, {{"command", "env; tr '\\0' '\\n' < /proc/$$/environ"}});
  BOOST_TEST(!r.is_error, r.output);
  BOOST_TEST(!contains(r.output, canary), r.output);
  BOOST_TEST(contains(r.output, "CARAPACE_TEST_PLAIN=plain-value"));
  BOOST_TEST(contains(r.output, "PATH="));

  // The canary is there to be found: without the rule it leaks.
  ToolResult leaky = call(shell, {{"command", "echo \"$CARAPACE_TEST_SECRET\""}});
  BOOST_TEST(leaky.output == "\n");
  ProcessResult raw = run_process({.argv = {"bash", "-c", "env"}});
  BOOST_TEST(contains(raw.output, canary + "-secret"));
}

BOOST_AUTO_TEST_CASE(include_exclude_and_inherit_choose_the_variables) {
  ScopedEnv env;
  env.set("GH_TOKEN", "gh-value");
  env.set("CARAPACE_TEST_PLAIN", "plain-value");
  env.set("CARAPACE_TEST_OTHER", "other-value");
  env.set("OPENAI_API_KEY", "openai-value");

  auto names = [&](const ToolEnvOptions& options) {
    ToolResult r = call(make_shell_tool({.env = options}), {{"command", "env | cut -d= -f1 | sort"}});
    BOOST_TEST(!r.is_error, r.output);
    std::set<std::string> out;
    std::istringstream in(r.output);
    for (std::string line; std::getline(in, line);) out.insert(line);
    return out;
  };
  std::set<std::string> all = names({});
  BOOST_TEST(all.count("CARAPACE_TEST_PLAIN") == 1u);
  BOOST_TEST(all.count("GH_TOKEN") == 0u);

  std::set<std::string> included = names({.include = {"GH_*"}, .exclude = {"CARAPACE_TEST_O*"}});
  BOOST_TEST(included.count("GH_TOKEN") == 1u);
  BOOST_TEST(included.count("CARAPACE_TEST_PLAIN") == 1u);
  BOOST_TEST(included.count("CARAPACE_TEST_OTHER") == 0u);
  BOOST_TEST(included.count("OPENAI_API_KEY") == 0u);

  std::set<std::string> core = names({.inherit = "core"});
  BOOST_TEST(core.count("PATH") == 1u);
  BOOST_TEST(core.count("CARAPACE_TEST_PLAIN") == 0u);

  std::set<std::string> none = names({.inherit = "none", .include = {"CARAPACE_TEST_PLAIN"}});
  none.erase("TMPDIR");  // the call's scratch directory, set by the sandbox
  none.erase("PWD");     // bash sets these itself
  none.erase("SHLVL");
  none.erase("_");
  BOOST_TEST((none == std::set<std::string>{"CARAPACE_TEST_PLAIN"}));

  // An explicit include hands over even a provider key: the user asked.
  std::set<std::string> deliberate = names({.include = {"OPENAI_API_KEY"}});
  BOOST_TEST(deliberate.count("OPENAI_API_KEY") == 1u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(file_tool_tests, WorkspaceFixture)

BOOST_AUTO_TEST_CASE(specs_declare_names_idempotence_and_required_arguments) {
  ToolDefinition read = make_read_file_tool({});
  ToolDefinition write = make_write_file_tool({});
  ToolDefinition list = make_list_dir_tool({});
  BOOST_TEST(read.spec.name == "read_file");
  BOOST_TEST(write.spec.name == "write_file");
  BOOST_TEST(list.spec.name == "list_dir");
  BOOST_TEST(read.spec.idempotent);
  BOOST_TEST(!write.spec.idempotent);
  BOOST_TEST(list.spec.idempotent);
  BOOST_TEST((read.blocking && write.blocking && list.blocking));
  BOOST_TEST(nlohmann::json::parse(read.spec.schema.text)["required"] == nlohmann::json::array({"path"}));
  BOOST_TEST(nlohmann::json::parse(write.spec.schema.text)["required"] ==
             nlohmann::json::array({"path", "content"}));
  BOOST_TEST(!nlohmann::json::parse(list.spec.schema.text).contains("required"));
}

// The same call says the same thing wherever the workspace is: no message
// names the workspace's directory (a replay or torture run elsewhere
// compares these messages).
BOOST_AUTO_TEST_CASE(messages_name_no_machine_path) {
  ToolDefinition read = make_read_file_tool({});
  ToolDefinition write = make_write_file_tool({});
  ToolDefinition list = make_list_dir_tool({});
  ToolDefinition shell = make_shell_tool({});
  fs::create_symlink(ws + "/nowhere/else", ws + "/loose");  // an absolute link inside, dangling
  const std::vector<std::pair<const ToolDefinition*, nlohmann::json>> calls = {
      {&read, {{"path", "data.csv"}}},
      {&read, {{"path", "/etc/passwd"}}},
      {&read, {{"path", ""}}},
      {&read, {{"path", "sub"}}},
      {&read, {{"path", "dangling"}}},
      {&read, {{"path", "loose"}}},
      {&read, {{"path", "sub/f.txt/x"}}},
      {&read, {{"path", "../outside/secret.txt"}}},
      {&list, {{"path", "missing"}}},
      {&list, {{"path", "escape"}}},
      {&write, {{"path", "sub"}, {"content", "x"}}},
      {&write, {{"path", "escape/new.txt"}, {"content", "x"}}},
      {&shell, {{"command", "true"}, {"cwd", "missing"}}},
      {&shell, {{"command", "true"}, {"cwd", "sub/f.txt"}}},
  };
  for (const auto& [tool, args] : calls) {
    ToolResult r = call(*tool, args);
    BOOST_TEST(r.is_error, tool->spec.name << " " << args.dump());
    BOOST_TEST(r.output.find(ws) == std::string::npos, tool->spec.name << " " << args.dump() << ": " << r.output);
  }
}

BOOST_AUTO_TEST_CASE(read_file_reads_ranges) {
  ToolDefinition read = make_read_file_tool({});
  write_text(ws + "/digits.txt", "0123456789");
  ToolResult r = call(read, {{"path", "digits.txt"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.output == "0123456789");
  BOOST_TEST(!r.truncated);
  r = call(read, {{"path", "digits.txt"}, {"offset", 3}, {"limit", 4}});
  BOOST_TEST(r.output == "3456");
  BOOST_TEST(!r.truncated);
  r = call(read, {{"path", "digits.txt"}, {"offset", 10}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.output == "");
  r = call(read, {{"path", "digits.txt"}, {"offset", 11}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output == "offset 11 is past the end of 'digits.txt', which has 10 bytes");
  r = call(read, {{"path", "digits.txt"}, {"limit", 0}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output == "\"limit\" must be an integer of at least 1, not 0");
}

BOOST_AUTO_TEST_CASE(read_file_over_the_cap_says_how_to_read_on) {
  ToolDefinition read = make_read_file_tool({.max_read_bytes = 8});
  write_text(ws + "/letters.txt", "abcdefghijklmnop");
  ToolResult r = call(read, {{"path", "letters.txt"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.truncated);
  BOOST_TEST(r.original_bytes == 16u);
  BOOST_TEST(r.output ==
             "abcdefgh\n[read_file: showed bytes 0 to 8 of 16; one read returns at most 8 bytes. To read on, "
             "call read_file with offset=8 (and limit to read less)]");
  r = call(read, {{"path", "letters.txt"}, {"offset", 8}});
  BOOST_TEST(!r.truncated);
  BOOST_TEST(r.output == "ijklmnop");
  // A limit within the cap is what was asked for, not a truncation.
  r = call(read, {{"path", "letters.txt"}, {"limit", 3}});
  BOOST_TEST(!r.truncated);
  BOOST_TEST(r.output == "abc");
}

BOOST_AUTO_TEST_CASE(read_file_refuses_binary_missing_and_directories) {
  ToolDefinition read = make_read_file_tool({});
  write_text(ws + "/blob.bin", std::string("ab\0cd", 5));
  ToolResult r = call(read, {{"path", "blob.bin"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(
      r.output.rfind("'blob.bin' looks like a binary file (it contains NUL bytes; 5 bytes in all)", 0) == 0u);
  r = call(read, {{"path", "nope.txt"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output == "path 'nope.txt' does not exist in the workspace");
  r = call(read, {{"path", "sub"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output == "'sub' is a directory; use list_dir to see what it holds");
  r = call(read, nlohmann::json::object());
  BOOST_TEST(r.output == "missing \"path\": it is required and must be a string");
}

BOOST_AUTO_TEST_CASE(read_file_is_confined) {
  ToolDefinition read = make_read_file_tool({});
  for (const std::string& path : {std::string("../outside/secret.txt"), outside + "/secret.txt"}) {
    ToolResult r = call(read, {{"path", path}});
    BOOST_TEST(r.is_error);
    BOOST_TEST(r.output == outside_message(path));
  }
  ToolResult r = call(read, {{"path", "escape/secret.txt"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(contains(r.output, "leads through a symbolic link"));
  BOOST_TEST(!contains(r.output, "secret\n"));
  r = call(read, {{"path", "inner_link/f.txt"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.output == "inside\n");
}

BOOST_AUTO_TEST_CASE(write_file_creates_parents_replaces_and_appends) {
  ToolDefinition write = make_write_file_tool({});
  ToolResult r = call(write, {{"path", "new/deep/file.txt"}, {"content", "one\n"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.output == "wrote 4 bytes to 'new/deep/file.txt'");
  BOOST_TEST(read_text(ws + "/new/deep/file.txt") == "one\n");
  r = call(write, {{"path", "new/deep/file.txt"}, {"content", "two\n"}, {"append", true}});
  BOOST_TEST(r.output == "appended 4 bytes to 'new/deep/file.txt' (now 8 bytes)");
  BOOST_TEST(read_text(ws + "/new/deep/file.txt") == "one\ntwo\n");
  r = call(write, {{"path", "new/deep/file.txt"}, {"content", "three\n"}});
  BOOST_TEST(read_text(ws + "/new/deep/file.txt") == "three\n");
  r = call(write, {{"path", "inner_link/via_link.txt"}, {"content", "x"}});  // a link that stays inside
  BOOST_TEST(!r.is_error);
  BOOST_TEST(read_text(ws + "/sub/via_link.txt") == "x");
}

BOOST_AUTO_TEST_CASE(write_file_refuses_bad_targets_and_oversized_content) {
  ToolDefinition write = make_write_file_tool({.max_write_bytes = 4});
  ToolResult r = call(write, {{"path", "big.txt"}, {"content", "12345"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(
      r.output ==
      "content is 5 bytes, over the limit of 4 bytes for one write; write the first part, then the rest "
      "with append=true");
  BOOST_TEST(!fs::exists(ws + "/big.txt"));
  r = call(write, {{"path", "sub"}, {"content", "x"}});
  BOOST_TEST(r.output == "'sub' is a directory; give the path of a file to write");
  r = call(write, {{"path", "a.txt"}});
  BOOST_TEST(r.output == "missing \"content\": it is required and must be a string");
  r = call(write, {{"path", "a.txt"}, {"content", "x"}, {"append", "yes"}});
  BOOST_TEST(r.output == "\"append\" must be true or false, not \"yes\"");
  BOOST_TEST(!fs::exists(ws + "/a.txt"));
}

BOOST_AUTO_TEST_CASE(write_file_is_confined) {
  ToolDefinition write = make_write_file_tool({});
  for (const std::string& path : {std::string("../outside/new.txt"), outside + "/new.txt"}) {
    ToolResult r = call(write, {{"path", path}, {"content", "x"}});
    BOOST_TEST(r.is_error);
    BOOST_TEST(r.output == outside_message(path));
  }
  ToolResult r = call(write, {{"path", "escape/new.txt"}, {"content", "x"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(contains(r.output, "leads through a symbolic link"));
  r = call(write, {{"path", "escape/secret.txt"}, {"content", "overwritten"}});
  BOOST_TEST(r.is_error);
  r = call(write, {{"path", "dangling"}, {"content", "x"}});  // would create outside/not_yet.txt
  BOOST_TEST(r.is_error);
  BOOST_TEST(!fs::exists(outside + "/new.txt"));
  BOOST_TEST(!fs::exists(outside + "/not_yet.txt"));
  BOOST_TEST(read_text(outside + "/secret.txt") == "secret\n");
}

// The reproduction of issue 9: `ln ../out/secret.txt ws/hardlink` and a
// write_file to ws/hardlink overwrote the outside file.
BOOST_AUTO_TEST_CASE(write_file_refuses_a_hard_link_and_leaves_the_other_file_alone) {
  ToolDefinition write = make_write_file_tool({});
  fs::create_hard_link(outside + "/secret.txt", ws + "/hardlink");
  for (bool append : {true, false}) {  // an append would write into the outside file itself
    ToolResult r = call(write, {{"path", "hardlink"}, {"content", "overwritten"}, {"append", append}});
    BOOST_TEST(r.is_error);
    BOOST_TEST(r.output ==
               "'hardlink' has 2 hard links; write_file does not write through a hard link, whose other names may "
               "be outside the workspace. Remove it (the other names keep the content) and write a new file");
  }
  BOOST_TEST(read_text(outside + "/secret.txt") == "secret\n");
  BOOST_TEST(fs::hard_link_count(outside + "/secret.txt") == 2u);
}

BOOST_AUTO_TEST_CASE(write_file_replaces_through_a_rename_keeping_the_mode) {
  ToolDefinition write = make_write_file_tool({});
  write_text(ws + "/script.sh", "old\n");
  fs::permissions(ws + "/script.sh", fs::perms(0750));
  const auto inode_before = [&] {
    struct stat st;
    ::stat((ws + "/script.sh").c_str(), &st);
    return st.st_ino;
  };
  ino_t before = inode_before();
  ToolResult r = call(write, {{"path", "script.sh"}, {"content", "new\n"}});
  BOOST_TEST(!r.is_error, r.output);
  BOOST_TEST(read_text(ws + "/script.sh") == "new\n");
  BOOST_TEST(static_cast<int>(fs::status(ws + "/script.sh").permissions() & fs::perms::all) == 0750);
  BOOST_TEST(inode_before() != before);  // a new file took the name: the old inode was never written
  for (const auto& entry : fs::directory_iterator(ws)) {
    BOOST_TEST(!contains(entry.path().filename().string(), ".carapace-"), entry.path());
  }
  // A last name that is a link inside the workspace writes its target and stays a link.
  fs::create_symlink("sub/f.txt", ws + "/to_f");
  r = call(write, {{"path", "to_f"}, {"content", "via link\n"}});
  BOOST_TEST(!r.is_error, r.output);
  BOOST_TEST(fs::is_symlink(ws + "/to_f"));
  BOOST_TEST(read_text(ws + "/sub/f.txt") == "via link\n");
}

// The reproduction of issue 9: a thread swapping a directory and a link to
// outside (renameat2 RENAME_EXCHANGE) beside 1,500 calls wrote 225 files and
// read 317 times outside. Resolved beneath the root by the kernel: none.
BOOST_AUTO_TEST_CASE(a_directory_swapped_for_a_link_outside_never_lets_a_call_out) {
  ToolDefinition write = make_write_file_tool({});
  ToolDefinition read = make_read_file_tool({});
  ToolDefinition list = make_list_dir_tool({});
  fs::create_directories(ws + "/race");
  write_text(ws + "/race/secret.txt", "inside\n");
  write_text(outside + "/outside-only.txt", "");
  fs::create_directory_symlink(outside, ws + "/swap");
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> swaps{0};
  std::thread swapper([&] {
    const std::string a = ws + "/race", b = ws + "/swap";
    while (!stop.load(std::memory_order_relaxed)) {
      if (::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) ++swaps;
    }
  });
  int outside_reads = 0, outside_lists = 0, inside_reads = 0, refused = 0;
  for (int i = 0; i < 500; ++i) {
    ToolResult w = call(write, {{"path", "race/w" + std::to_string(i) + ".txt"},
                                {"content", "x"},
                                {"append", i % 2 == 1}});
    if (w.is_error) ++refused;
    ToolResult r = call(read, {{"path", "race/secret.txt"}});
    if (r.output == "secret\n") ++outside_reads;
    if (r.output == "inside\n") ++inside_reads;
    ToolResult l = call(list, {{"path", "race"}});
    if (contains(l.output, "outside-only.txt")) ++outside_lists;
  }
  stop = true;
  swapper.join();
  int outside_writes = 0;
  for (const auto& entry : fs::directory_iterator(outside)) {
    if (entry.path().filename().string().rfind("w", 0) == 0) ++outside_writes;
  }
  BOOST_TEST_MESSAGE("swaps " << swaps.load() << ", inside reads " << inside_reads << ", refused writes "
                              << refused);
  BOOST_TEST(swaps.load() > 1000u);  // the race really ran
  BOOST_TEST(inside_reads > 0);
  BOOST_TEST(outside_writes == 0);
  BOOST_TEST(outside_reads == 0);
  BOOST_TEST(outside_lists == 0);
  BOOST_TEST(read_text(outside + "/secret.txt") == "secret\n");
}

BOOST_AUTO_TEST_CASE(list_dir_sorts_marks_directories_and_sizes_files) {
  ToolDefinition list = make_list_dir_tool({});
  write_text(ws + "/listing/b.txt", "abc");
  write_text(ws + "/listing/Z.txt", "");
  fs::create_directories(ws + "/listing/a");
  fs::create_directories(ws + "/listing/c");
  fs::create_symlink("b.txt", ws + "/listing/link");
  ToolResult r = call(list, {{"path", "listing"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.output == "Z.txt (0 bytes)\na/\nb.txt (3 bytes)\nc/\nlink -> b.txt\n");
  BOOST_TEST(!r.truncated);

  r = call(list, nlohmann::json::object());  // the workspace itself
  BOOST_TEST(r.output == "dangling -> " + outside + "/not_yet.txt\nescape -> " + outside +
                             "\ninner_link -> " + ws + "/sub\nlisting/\nsub/\n");
  fs::create_directories(ws + "/empty");
  r = call(list, {{"path", "empty"}});
  BOOST_TEST(r.output == "(empty directory)");
  r = call(list, {{"path", "listing/b.txt"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(r.output == "'listing/b.txt' is not a directory; use read_file to read a file");
}

// Issue 9: a file named "x\nfake.txt (999 bytes)" made a second, invented entry.
BOOST_AUTO_TEST_CASE(list_dir_escapes_names_that_could_be_misread) {
  ToolDefinition list = make_list_dir_tool({});
  const std::string d = ws + "/odd";
  fs::create_directories(d);
  for (const std::string& name :
       {std::string("x\nfake.txt (999 bytes)"), std::string("tab\there"), std::string("back\\slash"),
        std::string("\"quoted"), std::string(" lead"), std::string("arrow -> there"), std::string("bell\a"),
        std::string("bad\xff utf8"), std::string("plain é.txt")}) {
    write_text(d + "/" + name, "");
  }
  fs::create_symlink("target\nline", d + "/zlink");
  ToolResult r = call(list, {{"path", "odd"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.output ==
             "\" lead\" (0 bytes)\n"
             "\"\\\"quoted\" (0 bytes)\n"
             "\"arrow -> there\" (0 bytes)\n"
             "\"back\\\\slash\" (0 bytes)\n"
             "\"bad\\xff utf8\" (0 bytes)\n"
             "\"bell\\x07\" (0 bytes)\n"
             "plain é.txt (0 bytes)\n"
             "\"tab\\there\" (0 bytes)\n"
             "\"x\\nfake.txt (999 bytes)\" (0 bytes)\n"
             "zlink -> \"target\\nline\"\n");
  // One line per entry: no line of its own for the part after a newline.
  std::istringstream lines(r.output);
  size_t count = 0;
  for (std::string line; std::getline(lines, line);) {
    ++count;
    BOOST_TEST(line.rfind("fake.txt", 0) != 0u, line);
  }
  BOOST_TEST(count == 10u);
}

// Issue 9: a 6,000-character path was "exists and is not a regular file".
BOOST_AUTO_TEST_CASE(a_path_that_is_too_long_is_called_too_long) {
  const std::string long_path = std::string(5996, 'a') + "/b.txt";  // 6,002 bytes
  const std::string long_name = std::string(300, 'n') + ".txt";
  ToolDefinition read = make_read_file_tool({});
  ToolDefinition write = make_write_file_tool({});
  ToolDefinition list = make_list_dir_tool({});
  ToolDefinition shell = make_shell_tool({});
  for (const ToolResult& r : {call(read, {{"path", long_path}}), call(write, {{"path", long_path}, {"content", "x"}}),
                              call(list, {{"path", long_path}}), call(shell, {{"command", "true"}, {"cwd", long_path}})}) {
    BOOST_TEST(r.is_error);
    BOOST_TEST(contains(r.output, "is too long: 6002 bytes, where the limit is 4095"), r.output);
    BOOST_TEST(!contains(r.output, "regular file"), r.output);
    BOOST_TEST(r.output.size() < 400u);  // the path is shortened in the message
  }
  ToolResult r = call(write, {{"path", "dir/" + long_name}, {"content", "x"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(contains(r.output, "is too long: its name '"), r.output);
  BOOST_TEST(contains(r.output, "' has 304 bytes, where the limit is 255"), r.output);
  BOOST_TEST(!fs::exists(ws + "/dir"));
}

BOOST_AUTO_TEST_CASE(list_dir_caps_the_number_of_entries) {
  ToolDefinition list = make_list_dir_tool({.max_list_entries = 2});
  for (const char* name : {"d", "c", "b", "a"}) write_text(ws + "/many/" + name, "");
  ToolResult r = call(list, {{"path", "many"}});
  BOOST_TEST(r.truncated);
  BOOST_TEST(r.original_bytes == 4u * std::string("a (0 bytes)\n").size());
  BOOST_TEST(r.output ==
             "a (0 bytes)\nb (0 bytes)\n[... 2 more entries not shown (4 in all); list a subdirectory, or "
             "filter with the shell tool, e.g. `ls many | grep pattern`]\n");
}

BOOST_AUTO_TEST_CASE(list_dir_is_confined) {
  ToolDefinition list = make_list_dir_tool({});
  for (const std::string& path : {std::string(".."), outside, std::string("/")}) {
    ToolResult r = call(list, {{"path", path}});
    BOOST_TEST(r.is_error);
    BOOST_TEST(r.output == outside_message(path));
  }
  ToolResult r = call(list, {{"path", "escape"}});
  BOOST_TEST(r.is_error);
  BOOST_TEST(contains(r.output, "leads through a symbolic link"));
  BOOST_TEST(!contains(r.output, "secret.txt ("));
  r = call(list, {{"path", "inner_link"}});
  BOOST_TEST(!r.is_error);
  BOOST_TEST(r.output == "f.txt (7 bytes)\n");
}

BOOST_AUTO_TEST_SUITE_END()

// A runtime SIGKILLed mid-call leaves its call's scratch directory behind
// (56 were found in /tmp): the next runtime to start removes those whose
// maker is gone, and nothing else.
BOOST_AUTO_TEST_CASE(scratch_dirs_a_killed_process_left_are_reclaimed_and_only_those) {
  testing::TempDir base;
  int pipe_fds[2];
  BOOST_REQUIRE(::pipe(pipe_fds) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    std::string path;
    if (!make_scratch_dir(base.path(), &path).ok()) ::_exit(1);
    path += "\n";
    if (::write(pipe_fds[1], path.data(), path.size()) < 0) ::_exit(1);
    ::pause();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string killed;
  char c;
  while (::read(pipe_fds[0], &c, 1) == 1 && c != '\n') killed += c;
  ::close(pipe_fds[0]);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  BOOST_REQUIRE(fs::is_directory(killed));
  std::ofstream(killed + "/left.txt") << "what the command wrote";

  std::string live;  // this process's own, for a call still running
  CHECK_OK(make_scratch_dir(base.path(), &live));
  // This pid, another start time: a process before this one with the same pid.
  std::string reused = base.sub("carapace-call-" + std::to_string(::getpid()) + "-1-abcdef");
  fs::create_directory(reused);
  std::string old_form = base.sub("carapace-call-Xy12Ab");  // made before names carried a pid
  fs::create_directory(old_form);
  std::string other_user = base.sub("carapace-call-999999999-5-abcdef");  // no such pid, but not ours
  fs::create_directory(other_user);
  BOOST_REQUIRE(::chown(other_user.c_str(), 65534, 65534) == 0 || ::geteuid() != 0);
  std::string a_file = base.sub("carapace-call-999999998-5-abcdef");  // not a directory
  std::ofstream(a_file) << "x";

  size_t removed = reclaim_scratch_dirs(base.path());
  BOOST_TEST(!fs::exists(killed));
  BOOST_TEST(!fs::exists(reused));
  BOOST_TEST(fs::is_directory(live));
  BOOST_TEST(fs::is_directory(old_form));
  BOOST_TEST(fs::exists(a_file));
  if (::geteuid() == 0) {
    BOOST_TEST(fs::is_directory(other_user));
    BOOST_TEST(removed == 2u);
  }
  BOOST_TEST(reclaim_scratch_dirs(base.path()) == 0u);
}

// What a resume makes of a write_file call a crash interrupted: replaced
// with the same bytes, or not there: done or run again; an append whose
// bytes end the file: unknown (they may have been there before).
BOOST_AUTO_TEST_CASE(write_file_says_what_became_of_an_interrupted_call) {
  TempDir dir;
  std::string ws = dir.sub("ws");
  fs::create_directories(ws);
  ToolDefinition tool = make_write_file_tool(FileToolOptions{});
  BOOST_REQUIRE(tool.recover);
  ToolContext ctx{.workspace = fs::canonical(ws).string(), .session_id = "s", .call_id = "c"};
  using V = ToolRecovery::Verdict;
  auto verdict = [&](const nlohmann::json& args) { return tool.recover(args, ctx).verdict; };
  nlohmann::json replace = {{"path", "out/a.txt"}, {"content", "alpha\n"}};
  BOOST_TEST((verdict(replace) == V::kRunAgain));  // not there
  fs::create_directories(ws + "/out");
  std::ofstream(ws + "/out/a.txt") << "old text\n";
  BOOST_TEST((verdict(replace) == V::kRunAgain));  // other bytes: replacing them again is safe
  std::ofstream(ws + "/out/a.txt") << "alpha\n";
  ToolRecovery done = tool.recover(replace, ctx);
  BOOST_TEST((done.verdict == V::kDone));
  BOOST_TEST(done.result.output == "wrote 6 bytes to 'out/a.txt'");
  BOOST_TEST(!done.result.is_error);
  nlohmann::json append = {{"path", "out/a.txt"}, {"content", "beta\n"}, {"append", true}};
  BOOST_TEST((verdict(append) == V::kRunAgain));  // the file does not end with it: not appended
  std::ofstream(ws + "/out/a.txt", std::ios::app) << "beta\n";
  BOOST_TEST((verdict(append) == V::kUnknown));  // it does: appended, or there before
  BOOST_TEST(
      (verdict({{"path", "../outside"}, {"content", "x"}}) == V::kRunAgain));  // fails again, the same way
  BOOST_TEST(read_text(ws + "/out/a.txt") == "alpha\nbeta\n");                 // the check wrote nothing

  // A crash inside the replace leaves its temporary file beside the target;
  // the recovery of that call removes it, and nothing else.
  const std::string stale = ws + "/out/.a.txt.carapace-0123456789abcdef";
  std::ofstream(stale) << "half";
  std::ofstream(ws + "/out/.a.txt.carapace-notours") << "x";
  std::ofstream(ws + "/out/.b.txt.carapace-0123456789abcdef") << "x";
  (void)tool.recover(replace, ctx);
  BOOST_TEST(!fs::exists(stale));
  BOOST_TEST(fs::exists(ws + "/out/.a.txt.carapace-notours"));
  BOOST_TEST(fs::exists(ws + "/out/.b.txt.carapace-0123456789abcdef"));
  BOOST_TEST(read_text(ws + "/out/a.txt") == "alpha\nbeta\n");
}
