// What the project's own code (the CLI, tests, benchmarks) may reach inside a
// Runtime and an embedding program may not: the writer's event log, and the
// knobs that exist for tests (a simulated disk, a deliberate defect). Not
// installed; the public API reads events with Runtime::read_events.
#pragma once

#include <memory>

#include "actors/session/loop_mutation.h"
#include "runtime/runtime.h"
#include "storage/event_log.h"

namespace rocksdb {
class FileSystem;
}

namespace carapace {

struct Runtime::TestKnobs {
  // The file system under the event log (storage/sync_ledger_fs.h in
  // durability tests); null: the operating system's.
  std::shared_ptr<rocksdb::FileSystem> file_system;
  // A deliberate defect in every session's loop, for tests that prove the
  // torture runner catches it (actors/session/session_actor.h).
  LoopMutation mutation = LoopMutation::kNone;
};

struct RuntimeInternals {
  // The runtime's event log (the writer): reading, verifying, listing.
  static EventLog& log(Runtime& runtime);
  // Runtime::open with the test knobs.
  using TestKnobs = Runtime::TestKnobs;
  static Status open(Runtime::Options options, const TestKnobs& knobs, std::unique_ptr<Runtime>* out) {
    return Runtime::open_with(std::move(options), knobs, out);
  }
};

// The runtime's event log (the writer).
inline EventLog& runtime_log(Runtime& runtime) { return RuntimeInternals::log(runtime); }

}  // namespace carapace
