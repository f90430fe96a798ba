// crash_writer: appends turns to one session until it is killed.
//
//   crash_writer <log-dir> <session-id> <seed> [--ledger FILE [--ignore-wal-syncs]] [--sessions N]
//
// With --ledger the log runs over a SyncLedgerFileSystem (storage/
// sync_ledger_fs.h), so that the test can simulate a power loss after the
// kill; --ignore-wal-syncs is its mutation switch.
//
// On start it recovers the session (rolling back an interrupted turn) or
// creates it, prints "READY <turn>", then runs turns forever, each as
// several buffered steps and a synced checkpoint, printing
// "COMMITTED <turn> <seq> <session>" once each checkpoint is durable. With
// --sessions N, N sessions <session-id>-0 .. -N-1 run at once, one thread
// each, so that checkpoints meet while another syncs and go through the
// log's group committer; "READY" comes once all are ready. A snapshot is
// written every 5 turns. Between steps it pauses up to 1.5 ms, as a model
// call or a tool would, so that kills land inside turns as often as between
// them. The crash test kills it with SIGKILL at random.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "replay/recovery.h"
#include "storage/sync_ledger_fs.h"
#include "storage/session_journal.h"

using namespace carapace;

namespace {

int die(const Status& s) {
  std::fprintf(stderr, "crash_writer: %s\n", s.to_string().c_str());
  return 1;
}

// Recovers or creates session `id`; false (and a message) on an error.
bool open_session(EventLog* log, const std::string& id, std::unique_ptr<SessionJournal>* journal) {
  JournalOptions options{.snapshot_every_turns = 5};
  RecoveredSession recovered;
  Status s = recover(*log, id, RecoverOptions{}, &recovered);
  if (s.is_not_found()) {
    s = SessionJournal::create(
        log, id, {SessionStarted{.agent_id = "crash", .model = "m"}, UserMessage{"go"}}, options, journal);
  } else if (s.ok()) {
    *journal = SessionJournal::attach(log, id, std::move(recovered.committed),
                                      std::move(recovered.uncommitted), recovered.last_seq, options);
    s = (*journal)->roll_back_uncommitted("crash_writer was killed");
  }
  if (!s.ok()) die(s);
  return s.ok();
}

// Turns forever; returns only on an error.
int run_turns(SessionJournal* journal, const std::string& id, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Status s;
  auto pause = [&] { std::this_thread::sleep_for(std::chrono::microseconds(rng() % 1500)); };
  for (;;) {
    uint64_t t = journal->state().turn + 1;
    std::string a = "a" + std::to_string(t), b = "b" + std::to_string(t);
    std::string noise(rng() % 2000, static_cast<char>('a' + rng() % 26));
    s = journal->append({TurnStarted{t}, PromptAssembled{.turn = t, .total_chars = 100},
                         LlmRequested{.turn = t, .attempt = 1}});
    pause();
    if (s.ok()) {
      s = journal->append(
          {LlmResponded{.turn = t,
                        .attempt = 1,
                        .text = noise,
                        .tool_calls = {{a, "shell", JsonText{"{}"}}, {b, "read_file", JsonText{"{}"}}},
                        .usage = {rng() % 5000, rng() % 500, 0, 0}}});
    }
    pause();
    if (s.ok())
      s = journal->append({HookDecided{.hook_event = "PreToolUse", .decision = "allow", .tool_call_id = a},
                           ToolRequested{a, "shell", JsonText{"{}"}}});
    pause();
    if (s.ok()) s = journal->append({ToolCompleted{.call_id = a, .tool = "shell", .output = noise + "!"}});
    pause();
    if (s.ok()) s = journal->append({ToolRequested{b, "read_file", JsonText{"{}"}}});
    pause();
    if (s.ok()) s = journal->commit({ToolCompleted{.call_id = b, .tool = "read_file", .output = "contents"}});
    if (!s.ok()) return die(s);
    // One line in one call: the threads' lines do not interleave.
    std::printf("COMMITTED %llu %llu %s\n", static_cast<unsigned long long>(journal->state().committed_turn),
                static_cast<unsigned long long>(journal->state().committed_seq), id.c_str());
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr,
                 "usage: crash_writer <log-dir> <session-id> <seed> [--ledger FILE [--ignore-wal-syncs]] "
                 "[--sessions N]\n");
    return 2;
  }
  std::string id = argv[2];
  std::mt19937_64 rng(std::strtoull(argv[3], nullptr, 10));
  SyncLedgerOptions ledger;
  int sessions = 0;  // 0: one session, named <session-id>
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ledger" && i + 1 < argc) {
      ledger.ledger_path = argv[++i];
    } else if (a == "--ignore-wal-syncs") {
      ledger.ignore_wal_syncs = true;
    } else if (a == "--sessions" && i + 1 < argc) {
      sessions = std::atoi(argv[++i]);
      if (sessions < 1 || sessions > 64) {
        std::fprintf(stderr, "crash_writer: --sessions takes 1 to 64\n");
        return 2;
      }
    } else {
      std::fprintf(stderr, "crash_writer: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  EventLog::Options log_options{.path = argv[1]};
  Status s;
  if (!ledger.ledger_path.empty()) {
    s = make_sync_ledger_fs(ledger, &log_options.file_system);
    if (!s.ok()) return die(s);
  }
  std::unique_ptr<EventLog> log;
  s = EventLog::open(log_options, &log);
  if (!s.ok()) return die(s);

  std::vector<std::string> ids;
  if (sessions == 0) {
    ids.push_back(id);
  } else {
    for (int k = 0; k < sessions; ++k) ids.push_back(id + "-" + std::to_string(k));
  }
  std::vector<std::unique_ptr<SessionJournal>> journals(ids.size());
  for (size_t k = 0; k < ids.size(); ++k) {
    if (!open_session(log.get(), ids[k], &journals[k])) return 1;
  }
  std::printf("READY %llu\n", static_cast<unsigned long long>(journals[0]->state().committed_turn));
  std::fflush(stdout);
  std::vector<std::thread> threads;
  for (size_t k = 1; k < ids.size(); ++k) {
    threads.emplace_back([&, k, seed = rng()] { std::_Exit(run_turns(journals[k].get(), ids[k], seed)); });
  }
  std::_Exit(run_turns(journals[0].get(), ids[0], rng()));  // returns only on an error
}
