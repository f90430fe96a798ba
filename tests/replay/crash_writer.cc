// crash_writer: appends turns to one session until it is killed.
//
//   crash_writer <log-dir> <session-id> <seed> [--ledger FILE [--ignore-wal-syncs]]
//
// With --ledger the log runs over a SyncLedgerFileSystem (storage/
// sync_ledger_fs.h), so that the test can simulate a power loss after the
// kill; --ignore-wal-syncs is its mutation switch.
//
// On start it recovers the session (rolling back an interrupted turn) or
// creates it, prints "READY <turn>", then runs turns forever, each as
// several buffered steps and a synced checkpoint, printing
// "COMMITTED <turn> <seq>" once each checkpoint is durable. A snapshot is
// written every 5 turns. Between steps it pauses up to 1.5 ms, as a model
// call or a tool would, so that kills land inside turns as often as between
// them. The crash test kills it with SIGKILL at random.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>

#include "replay/recovery.h"
#include "storage/sync_ledger_fs.h"
#include "storage/session_journal.h"

using namespace carapace;

namespace {

int die(const Status& s) {
  std::fprintf(stderr, "crash_writer: %s\n", s.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: crash_writer <log-dir> <session-id> <seed> [--ledger FILE [--ignore-wal-syncs]]\n");
    return 2;
  }
  std::string id = argv[2];
  std::mt19937_64 rng(std::strtoull(argv[3], nullptr, 10));
  SyncLedgerOptions ledger;
  for (int i = 4; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--ledger" && i + 1 < argc) {
      ledger.ledger_path = argv[++i];
    } else if (a == "--ignore-wal-syncs") {
      ledger.ignore_wal_syncs = true;
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
  JournalOptions options{.snapshot_every_turns = 5};

  std::unique_ptr<SessionJournal> journal;
  RecoveredSession recovered;
  s = recover(*log, id, RecoverOptions{}, &recovered);
  if (s.is_not_found()) {
    s = SessionJournal::create(log.get(), id,
                               {SessionStarted{.agent_id = "crash", .model = "m"}, UserMessage{"go"}},
                               options, &journal);
  } else if (s.ok()) {
    journal = SessionJournal::attach(log.get(), id, std::move(recovered.committed),
                                     std::move(recovered.uncommitted), recovered.last_seq, options);
    s = journal->roll_back_uncommitted("crash_writer was killed");
  }
  if (!s.ok()) return die(s);
  std::printf("READY %llu\n", static_cast<unsigned long long>(journal->state().committed_turn));
  std::fflush(stdout);

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
    std::printf("COMMITTED %llu %llu\n", static_cast<unsigned long long>(journal->state().committed_turn),
                static_cast<unsigned long long>(journal->state().committed_seq));
    std::fflush(stdout);
  }
}
