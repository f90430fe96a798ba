// LogFixture: a writable EventLog in a temp dir, with a controllable clock
// and helpers to write sessions through the journal.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "storage/event_log.h"
#include "storage/session_journal.h"
#include "storage/synthetic_writer.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

namespace carapace::testing {

struct LogFixture {
  TempDir dir;
  std::unique_ptr<EventLog> log;
  int64_t now = 1'700'000'000'000'000;

  LogFixture() { open(); }

  std::string path() const { return dir.sub("log"); }

  void open(EventLog::Mode mode = EventLog::Mode::kWriter) {
    log.reset();
    CHECK_OK(EventLog::open(EventLog::Options{.path = path(), .mode = mode}, &log));
  }
  void close() { log.reset(); }

  JournalOptions options(uint64_t snapshot_every = 0) {
    return JournalOptions{.snapshot_every_turns = snapshot_every, .clock = [this] { return now += 1000; }};
  }

  void synth(const std::string& id, uint64_t turns, uint64_t snapshot_every = 0, uint64_t seed = 1) {
    SyntheticWriteStats stats;
    CHECK_OK(write_synthetic_session(log.get(), id, SyntheticOptions{.turns = turns, .seed = seed},
                                     options(snapshot_every), &stats));
  }

  std::vector<Event> read_all(const std::string& id) {
    std::vector<Event> out;
    CHECK_OK(log->read(id, 1, UINT64_MAX, &out));
    return out;
  }
};

}  // namespace carapace::testing
