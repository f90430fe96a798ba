// A tools node's ledger of the calls it ran (docs/scale-out.md): what makes
// a call run at most once on a node however often the host asks, and what a
// harness reads to prove it.
//
// One append-only file, ledger/calls.jsonl in the node's home: a "start"
// line made durable (fdatasync) before a call runs, a "done" line with its
// outcome after. A call asked for again is answered from here: its recorded
// result, or, if it started and the node stopped before it ended, that its
// outcome is unknown. The file is read back whole when the node starts.
//
// Bounded: the outcomes of the last kKeptOutcomes calls are kept in memory
// (an older call is still known to have run); the file may grow to
// kMaxLedgerBytes, then the node refuses new calls with a message saying so.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "actors/messages.h"
#include "base/status.h"
#include "base/unique_fd.h"

namespace carapace {

inline constexpr size_t kKeptOutcomes = 10'000;
inline constexpr uint64_t kMaxLedgerBytes = 1ull << 30;

class CallLedger {
 public:
  enum class State : uint8_t { kUnknown, kStarted, kDone };
  struct Entry {
    State state = State::kUnknown;
    bool outcome_kept = false;
    ToolOutcome outcome;  // kDone with outcome_kept
    std::string tool;
    uint32_t starts = 0;  // how many times it began here (more than one: only after an unknown, for idempotent tools)
  };

  // Opens (creating) dir/calls.jsonl and reads it back. A torn last line (a
  // crash while writing it) is ignored; a corrupt line elsewhere is an error.
  static Status open(const std::string& dir, std::unique_ptr<CallLedger>* out);

  // The ledger's id, made when it was created: a node with a new ledger is a new node.
  const std::string& id() const { return id_; }

  Entry find(const std::string& session_id, const std::string& call_id) const;

  // Durable before it returns (unless `durable` is false): the call may run.
  // An idempotent tool's lines need no sync: lost in a crash, the call runs
  // again, which is harmless for it.
  Status begin(const std::string& session_id, const std::string& call_id, const std::string& tool, uint32_t attempt,
               bool durable = true);
  // Durable before it returns (unless `durable` is false): the outcome may be given.
  Status finish(const std::string& session_id, const std::string& call_id, const ToolOutcome& outcome,
                bool durable = true);

  uint64_t calls() const;

 private:
  CallLedger() = default;
  Status append(const std::string& line, bool durable = true);
  Status apply(const std::string& line, bool replaying);
  static std::string key(const std::string& session_id, const std::string& call_id);

  mutable std::mutex mu_;
  std::string path_;
  std::string id_;
  UniqueFd fd_;
  uint64_t bytes_ = 0;
  std::map<std::string, Entry> entries_;
  std::deque<std::string> kept_;  // keys whose outcome is kept, oldest first
};

}  // namespace carapace
