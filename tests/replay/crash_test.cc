// Kills a real writer process with SIGKILL at random moments, at least 20
// times, and after each kill checks that every checkpoint it reported is
// intact, byte for byte, that seqs are contiguous, and that recovery's state
// hash equals a fresh fold's.
#define BOOST_TEST_MODULE crash_test
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <map>
#include <random>
#include <sstream>

#include "base/digest.h"
#include "events/fold.h"
#include "replay/recovery.h"
#include "replay/verify.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;

namespace {

struct Child {
  pid_t pid = -1;
  int out = -1;
};

Child spawn(const std::string& log_dir, const std::string& id, uint64_t seed) {
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    std::string seed_text = std::to_string(seed);
    ::execl(CRASH_WRITER_BIN, CRASH_WRITER_BIN, log_dir.c_str(), id.c_str(), seed_text.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(fds[1]);
  return Child{pid, fds[0]};
}

// Reads whole lines from `fd` until `deadline` (or EOF when deadline is
// null), or until the first line when `first_line_only`.
void read_lines(int fd, std::string& buffer, std::vector<std::string>& lines,
                std::chrono::steady_clock::time_point* deadline, bool first_line_only = false) {
  char chunk[4096];
  for (;;) {
    if (first_line_only && !lines.empty()) return;
    int timeout_ms = -1;
    if (deadline) {
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      timeout_ms = static_cast<int>(left.count());
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r == 0) return;
    ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) return;  // EOF: the child is gone
    buffer.append(chunk, static_cast<size_t>(n));
    size_t nl;
    while ((nl = buffer.find('\n')) != std::string::npos) {
      lines.push_back(buffer.substr(0, nl));
      buffer.erase(0, nl + 1);
    }
  }
}

// Digest of the stored bytes of records [1, seq].
Digest128 digest_upto(const EventLog& log, const std::string& id, uint64_t seq) {
  Digest128Builder builder;
  auto c = log.cursor(id, 1);
  for (; c->valid() && c->seq() <= seq; c->next()) {
    builder.update(c->key());
    builder.update(c->value());
  }
  return builder.finish();
}

}  // namespace

BOOST_AUTO_TEST_CASE(committed_turns_survive_sigkill_at_random_moments) {
  testing::TempDir dir;
  const std::string log_dir = dir.sub("log");
  const std::string id = "crashy";
  constexpr int kKills = 25;
  std::mt19937_64 rng(20261121);

  std::map<uint64_t, uint64_t> reported;         // turn -> seq of every checkpoint the child reported
  std::map<uint64_t, Digest128> prefix_digests;  // checkpoint seq -> digest of records up to it
  uint64_t rollbacks_seen = 0;

  for (int kill = 0; kill < kKills; ++kill) {
    Child child = spawn(log_dir, id, rng());
    std::string buffer;
    std::vector<std::string> lines;
    auto ready_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    read_lines(child.out, buffer, lines, &ready_by, /*first_line_only=*/true);
    BOOST_REQUIRE_MESSAGE(!lines.empty() && lines[0].rfind("READY", 0) == 0, "the writer did not start");
    // Kill at a random moment: early in a turn, mid-turn, or after many turns.
    auto kill_at = std::chrono::steady_clock::now() + std::chrono::microseconds(rng() % 60'000);
    read_lines(child.out, buffer, lines, &kill_at);
    ::kill(child.pid, SIGKILL);
    int status = 0;
    ::waitpid(child.pid, &status, 0);
    BOOST_REQUIRE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    read_lines(child.out, buffer, lines, nullptr);  // what it wrote before dying
    ::close(child.out);
    for (const auto& line : lines) {
      std::istringstream in(line);
      std::string word;
      uint64_t turn = 0, seq = 0;
      in >> word >> turn >> seq;
      if (word == "COMMITTED") reported[turn] = seq;
    }

    std::unique_ptr<EventLog> log;
    CHECK_OK(EventLog::open(EventLog::Options{.path = log_dir}, &log));

    // No committed event lost: every reported checkpoint is indexed at its
    // seq, and the records up to it are byte for byte what they were.
    std::vector<CheckpointEntry> checkpoints;
    CHECK_OK(log->checkpoints(id, &checkpoints));
    std::map<uint64_t, uint64_t> indexed;
    for (const auto& c : checkpoints) indexed[c.seq] = c.turn;
    for (const auto& [turn, seq] : reported) {
      BOOST_REQUIRE_MESSAGE(
          indexed.count(seq) && indexed[seq] == turn,
          "kill " << kill << ": checkpoint of turn " << turn << " at seq " << seq << " is lost");
    }
    for (const auto& [seq, digest] : prefix_digests) {
      BOOST_REQUIRE_MESSAGE(digest_upto(*log, id, seq) == digest,
                            "kill " << kill << ": records up to seq " << seq << " changed");
    }

    // Seqs contiguous, checksums and every checkpoint hash re-folded.
    VerifyReport report;
    CHECK_OK(verify_session(*log, id, &report));
    for (const auto& issue : report.issues)
      BOOST_ERROR("kill " << kill << ": seq " << issue.seq << " " << issue.kind << ": " << issue.detail);
    BOOST_REQUIRE(report.ok());

    // Recovery (from a snapshot) equals a fresh fold from seq 1.
    RecoveredSession fast, full;
    CHECK_OK(recover(*log, id, RecoverOptions{.use_snapshots = true}, &fast));
    CHECK_OK(recover(*log, id, RecoverOptions{.use_snapshots = false}, &full));
    BOOST_TEST((state_hash(fast.committed) == state_hash(full.committed)));
    BOOST_TEST((fast.committed == full.committed));
    BOOST_TEST(fast.last_seq == full.last_seq);
    if (!reported.empty()) BOOST_TEST(full.committed.committed_turn >= reported.rbegin()->first);
    rollbacks_seen = full.committed.rolled_back_turns;

    if (!reported.empty()) {
      uint64_t seq = reported.rbegin()->second;
      prefix_digests[seq] = digest_upto(*log, id, seq);
    }
    BOOST_TEST_MESSAGE("kill " << kill + 1 << "/" << kKills << ": " << reported.size()
                               << " checkpoints reported, " << full.last_seq << " events, "
                               << full.uncommitted.size() << " uncommitted after the kill");
  }
  BOOST_TEST(reported.size() > 20u);
  BOOST_TEST(rollbacks_seen > 0u);  // some kills landed inside a turn
  BOOST_TEST_MESSAGE(rollbacks_seen << " interrupted turns rolled back over " << kKills << " kills");
}
