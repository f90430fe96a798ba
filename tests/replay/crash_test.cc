// Kills a real writer process with SIGKILL at random moments, at least 20
// times, and after each kill checks that every checkpoint it reported is
// intact, byte for byte, that seqs are contiguous, and that recovery's state
// hash equals a fresh fold's — after a process crash, and after a simulated
// power loss (everything not synced taken away, storage/power_loss.h), with
// and without a torn last write. A mutation check proves the power-loss runs
// bite: with the WAL syncs ignored, reported checkpoints are lost.
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
#include <string>
#include <utility>
#include <vector>

#include "base/digest.h"
#include "events/fold.h"
#include "replay/recovery.h"
#include "replay/verify.h"
#include "storage/power_loss.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;

namespace {

struct Child {
  pid_t pid = -1;
  int out = -1;
};

Child spawn(const std::string& log_dir, const std::string& id, uint64_t seed, const std::string& ledger,
            bool ignore_wal_syncs, int sessions = 0) {
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  std::vector<std::string> args = {CRASH_WRITER_BIN, log_dir, id, std::to_string(seed)};
  if (!ledger.empty()) {
    args.insert(args.end(), {"--ledger", ledger});
    if (ignore_wal_syncs) args.push_back("--ignore-wal-syncs");
  }
  if (sessions > 0) args.insert(args.end(), {"--sessions", std::to_string(sessions)});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::close(fds[0]);
    ::close(fds[1]);
    ::execv(CRASH_WRITER_BIN, argv.data());
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

enum class Loss {
  kProcessCrash,         // SIGKILL: the page cache keeps every write
  kPowerLoss,            // SIGKILL, then every unsynced byte taken away
  kPowerLossTorn,        // the same, with part of the last WAL write kept
  kPowerLossWithoutSync  // mutation: the WAL's syncs are not honoured
};

struct Outcome {
  uint64_t reported = 0;          // checkpoints the writer said were durable
  uint64_t lost = 0;              // of those, missing after a kill
  uint64_t rollbacks = 0;         // interrupted turns rolled back
  uint64_t bytes_dropped = 0;     // by the simulated power losses
  uint64_t torn_writes = 0;
};

// Kills the writer `kills` times at random moments, each time checking what
// survived. Every failure is a test error, except lost checkpoints, which are
// counted (the mutation run expects them).
Outcome kill_repeatedly(Loss loss, int kills, uint64_t seed) {
  testing::TempDir dir;
  const std::string log_dir = dir.sub("log");
  const std::string ledger = loss == Loss::kProcessCrash ? "" : dir.path() + "/sync-ledger";
  const std::string id = "crashy";
  std::mt19937_64 rng(seed);
  Outcome out;

  std::map<uint64_t, uint64_t> reported;         // turn -> seq of every checkpoint the child reported
  std::map<uint64_t, Digest128> prefix_digests;  // checkpoint seq -> digest of records up to it

  for (int kill = 0; kill < kills; ++kill) {
    Child child = spawn(log_dir, id, rng(), ledger, loss == Loss::kPowerLossWithoutSync);
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
    std::map<uint64_t, uint64_t> this_run;
    for (const auto& line : lines) {
      std::istringstream in(line);
      std::string word;
      uint64_t turn = 0, seq = 0;
      in >> word >> turn >> seq;
      if (word == "COMMITTED") this_run[turn] = seq;
    }
    if (!ledger.empty()) {
      PowerLossReport pl;
      CHECK_OK(simulate_power_loss(
          PowerLossOptions{.ledger_path = ledger, .tear_last_write = loss == Loss::kPowerLossTorn, .seed = rng()},
          &pl));
      out.bytes_dropped += pl.bytes_dropped;
      out.torn_writes += pl.torn_file.empty() ? 0 : 1;
    }

    std::unique_ptr<EventLog> log;
    CHECK_OK(EventLog::open(EventLog::Options{.path = log_dir}, &log));

    // No committed event lost: every reported checkpoint is indexed at its
    // seq, and the records up to it are byte for byte what they were.
    std::vector<CheckpointEntry> checkpoints;
    CHECK_OK(log->checkpoints(id, &checkpoints));
    std::map<uint64_t, uint64_t> indexed;
    for (const auto& c : checkpoints) indexed[c.seq] = c.turn;
    for (const auto& [turn, seq] : this_run) {
      ++out.reported;
      if (!(indexed.count(seq) && indexed[seq] == turn)) {
        ++out.lost;
        continue;
      }
      reported[turn] = seq;
    }
    if (out.lost > 0) return out;  // what follows assumes nothing was lost
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
    out.rollbacks = full.committed.rolled_back_turns;

    if (!reported.empty()) {
      uint64_t seq = reported.rbegin()->second;
      prefix_digests[seq] = digest_upto(*log, id, seq);
    }
    BOOST_TEST_MESSAGE("kill " << kill + 1 << "/" << kills << ": " << reported.size()
                               << " checkpoints reported, " << full.last_seq << " events, "
                               << full.uncommitted.size() << " uncommitted after the kill");
  }
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(committed_turns_survive_sigkill_at_random_moments) {
  Outcome o = kill_repeatedly(Loss::kProcessCrash, 25, 20261121);
  BOOST_TEST(o.lost == 0u);
  BOOST_TEST(o.reported > 20u);
  BOOST_TEST(o.rollbacks > 0u);  // some kills landed inside a turn
}

BOOST_AUTO_TEST_CASE(committed_turns_survive_a_power_loss_at_random_moments) {
  Outcome o = kill_repeatedly(Loss::kPowerLoss, 25, 20261122);
  BOOST_TEST(o.lost == 0u);
  BOOST_TEST(o.reported > 20u);
  BOOST_TEST(o.bytes_dropped > 0u);  // the losses did take unsynced writes away
}

BOOST_AUTO_TEST_CASE(committed_turns_survive_a_power_loss_that_tears_the_last_write) {
  Outcome o = kill_repeatedly(Loss::kPowerLossTorn, 25, 20261123);
  BOOST_TEST(o.lost == 0u);
  BOOST_TEST(o.reported > 20u);
  BOOST_TEST(o.torn_writes > 0u);
}

// Four sessions at once in one writer, so that a checkpoint often meets
// another one's sync and goes out through the log's group committer (one
// write and one sync for several): every checkpoint reported must survive
// a power loss. Returns the checkpoints reported and those lost.
std::pair<uint64_t, uint64_t> kill_concurrent_sessions(Loss loss, int kills, uint64_t seed) {
  testing::TempDir dir;
  const std::string log_dir = dir.sub("log"), ledger = dir.path() + "/sync-ledger";
  std::mt19937_64 rng(seed);
  uint64_t reported = 0, lost = 0;
  for (int kill = 0; kill < kills; ++kill) {
    Child child = spawn(log_dir, "many", rng(), ledger, loss == Loss::kPowerLossWithoutSync, 4);
    std::string buffer;
    std::vector<std::string> lines;
    auto ready_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    read_lines(child.out, buffer, lines, &ready_by, /*first_line_only=*/true);
    BOOST_REQUIRE_MESSAGE(!lines.empty() && lines[0].rfind("READY", 0) == 0, "the writer did not start");
    auto kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(20 + rng() % 60);
    read_lines(child.out, buffer, lines, &kill_at);
    ::kill(child.pid, SIGKILL);
    int status = 0;
    ::waitpid(child.pid, &status, 0);
    BOOST_REQUIRE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    read_lines(child.out, buffer, lines, nullptr);
    ::close(child.out);
    std::map<std::string, std::map<uint64_t, uint64_t>> this_run;  // session -> turn -> seq
    for (const auto& line : lines) {
      std::istringstream in(line);
      std::string word, session;
      uint64_t turn = 0, seq = 0;
      in >> word >> turn >> seq >> session;
      if (word == "COMMITTED") this_run[session][turn] = seq;
    }
    PowerLossReport pl;
    CHECK_OK(simulate_power_loss(PowerLossOptions{.ledger_path = ledger, .seed = rng()}, &pl));
    std::unique_ptr<EventLog> log;
    CHECK_OK(EventLog::open(EventLog::Options{.path = log_dir}, &log));
    for (const auto& [session, turns] : this_run) {
      std::vector<CheckpointEntry> checkpoints;
      CHECK_OK(log->checkpoints(session, &checkpoints));
      std::map<uint64_t, uint64_t> indexed;
      for (const auto& c : checkpoints) indexed[c.seq] = c.turn;
      for (const auto& [turn, seq] : turns) {
        ++reported;
        if (!(indexed.count(seq) && indexed[seq] == turn)) ++lost;
      }
      if (loss == Loss::kPowerLoss) {
        VerifyReport report;
        CHECK_OK(verify_session(*log, session, &report));
        BOOST_TEST(report.ok(), "kill " << kill << ": " << session << " does not verify");
      }
    }
    if (lost > 0 && loss == Loss::kPowerLoss) break;
  }
  return {reported, lost};
}

BOOST_AUTO_TEST_CASE(committed_turns_of_concurrent_sessions_survive_a_power_loss) {
  auto [reported, lost] = kill_concurrent_sessions(Loss::kPowerLoss, 12, 20261128);
  BOOST_TEST_MESSAGE(reported << " checkpoints reported, " << lost << " lost");
  BOOST_TEST(lost == 0u);
  BOOST_TEST(reported > 40u);
}

// Its mutation check, as for one session below.
BOOST_AUTO_TEST_CASE(without_the_wal_sync_concurrent_sessions_lose_reported_checkpoints) {
  auto [reported, lost] = kill_concurrent_sessions(Loss::kPowerLossWithoutSync, 12, 20261129);
  BOOST_TEST(reported > 0u);
  BOOST_TEST(lost > 0u, "no reported checkpoint was lost although the WAL was never synced");
}

// The mutation check: the same power losses with the WAL's syncs ignored (as
// if the code never asked for them) must lose reported checkpoints; if they
// did not, the tests above would prove nothing about syncing.
BOOST_AUTO_TEST_CASE(without_the_wal_sync_a_power_loss_loses_reported_checkpoints) {
  Outcome o = kill_repeatedly(Loss::kPowerLossWithoutSync, 25, 20261124);
  BOOST_TEST(o.reported > 0u);
  BOOST_TEST(o.lost > 0u, "no reported checkpoint was lost although the WAL was never synced");
}
