#include "storage/db_salvage.h"

#include <rocksdb/db.h>
#include <rocksdb/sst_file_reader.h>
#include <rocksdb/table_properties.h>
#include <rocksdb/write_batch.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "events/fold.h"
#include "events/record.h"
#include "storage/db_directory.h"
#include "storage/db_lock.h"
#include "storage/db_options.h"
#include "storage/event_log.h"
#include "storage/keys.h"
#include "storage/session_journal.h"
#include "storage/session_meta.h"
#include "storage/wal_scan.h"

namespace carapace {
namespace {

namespace fs = std::filesystem;

std::string utc_stamp() {
  std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

// Every intact event record found, by session then seq: the raw bytes.
using Found = std::map<std::string, std::map<uint64_t, std::pair<std::string, std::string>>>;

struct Evidence {
  Found records;
  std::map<std::string, std::set<uint64_t>> damaged;  // seqs of records whose CRC failed
  std::map<std::string, uint64_t> indexed_checkpoint;  // the highest checkpoint seq any index entry named
  std::map<std::string, uint64_t> imported;  // SessionMeta::imported_seq any index entry named: it stays imported
  uint64_t damaged_records = 0;
};

void consider(std::string_view key, std::string_view value, Evidence* ev) {
  std::string_view session;
  uint64_t seq = 0;
  if (!keys::parse_seq_key(key, &session, &seq)) return;
  RecordHeader header;
  std::string_view payload;
  if (!parse_record(key, value, &header, &payload).ok()) {
    ++ev->damaged_records;
    ev->damaged[std::string(session)].insert(seq);
    return;
  }
  ev->records[std::string(session)][seq] = {std::string(key), std::string(value)};
}

void consider_index(std::string_view key, std::string_view value, Evidence* ev) {
  SessionMeta meta;
  if (!codec::decode(value, &meta)) return;
  uint64_t& seen = ev->indexed_checkpoint[std::string(key)];
  seen = std::max(seen, meta.committed_seq);
  if (meta.imported_seq > 0) {
    uint64_t& imported = ev->imported[std::string(key)];
    imported = std::max(imported, meta.imported_seq);
  }
}

// The events family's id in WAL records: from a table file's properties when
// one says, else the order the log creates its families in (default, events, ...).
class EventsOnly : public rocksdb::WriteBatch::Handler {
 public:
  EventsOnly(uint32_t events_id, uint32_t sessions_id, Evidence* ev)
      : events_id_(events_id), sessions_id_(sessions_id), ev_(ev) {}
  rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& key, const rocksdb::Slice& value) override {
    std::string_view k(key.data(), key.size()), v(value.data(), value.size());
    if (cf == events_id_) consider(k, v, ev_);
    if (cf == sessions_id_) consider_index(k, v, ev_);
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t, const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
  rocksdb::Status SingleDeleteCF(uint32_t, const rocksdb::Slice&) override { return rocksdb::Status::OK(); }
  rocksdb::Status DeleteRangeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t, const rocksdb::Slice&, const rocksdb::Slice&) override {
    return rocksdb::Status::OK();
  }
  void LogData(const rocksdb::Slice&) override {}

 private:
  uint32_t events_id_, sessions_id_;
  Evidence* ev_;
};

Status gather(const fs::path& dir, SalvageReport* report, Evidence* ev) {
  LogDbOptions tuned = log_db_options(/*writer=*/false, 8 << 20);
  rocksdb::Options options(tuned.db, tuned.family);
  std::vector<fs::path> tables, wals;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".sst") tables.push_back(e.path());
    if (e.path().extension() == ".log") wals.push_back(e.path());
  }
  if (ec) return Status::io_error("cannot list " + dir.string() + ": " + ec.message());
  uint32_t events_id = 1, sessions_id = 2;
  for (const auto& t : tables) {
    rocksdb::SstFileReader reader(options);
    if (!reader.Open(t.string()).ok()) {
      ++report->unreadable_files;
      continue;
    }
    ++report->table_files;
    auto props = reader.GetTableProperties();
    if (props == nullptr) continue;
    bool events = props->column_family_name == kEventsFamily;
    bool sessions = props->column_family_name == kSessionsFamily;
    if (!events && !sessions) continue;
    (events ? events_id : sessions_id) = props->column_family_id;
    std::unique_ptr<rocksdb::Iterator> it(reader.NewIterator(rocksdb::ReadOptions()));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      std::string_view k(it->key().data(), it->key().size()), v(it->value().data(), it->value().size());
      if (events) consider(k, v, ev);
      else consider_index(k, v, ev);
    }
    if (!it->status().ok()) ++report->unreadable_files;
  }
  std::sort(wals.begin(), wals.end());
  for (const auto& w : wals) {
    std::ifstream in(w, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) {
      ++report->unreadable_files;
      continue;
    }
    ++report->wal_files;
    EventsOnly handler(events_id, sessions_id, ev);
    read_wal_records(
        bytes,
        [&](std::string_view rep) {
          rocksdb::WriteBatch batch{std::string(rep)};
          batch.Iterate(&handler).PermitUncheckedError();
        },
        &report->damaged_wal_records);
  }
  return Status();
}

// Writes what is kept of one session into the new log.
Status restore_session(EventLog* log, const std::string& id, const Evidence& ev, SalvagedSession* out) {
  static const std::map<uint64_t, std::pair<std::string, std::string>> kNone;
  auto found = ev.records.find(id);
  const auto& records = found == ev.records.end() ? kNone : found->second;
  out->id = id;
  out->records_found = records.size();
  out->highest_seq = records.empty() ? 0 : records.rbegin()->first;
  Folder folder;
  std::vector<Event> events;
  uint64_t expected = 1;
  for (const auto& [seq, kv] : records) {
    if (seq != expected) {
      out->first_lost = expected;
      out->why = "seq " + std::to_string(expected) + " is missing or damaged";
      break;
    }
    Event e;
    Status s = decode_record(kv.first, kv.second, seq, &e);
    if (s.ok()) s = folder.add(e);
    if (!s.ok()) {
      out->first_lost = seq;
      out->why = "seq " + std::to_string(seq) + ": " + s.message();
      break;
    }
    events.push_back(std::move(e));
    ++expected;
  }
  if (out->first_lost == 0) {
    // A damaged copy of a record found intact elsewhere is no loss; one past
    // the end is, and so is a checkpoint the index named but no record holds.
    if (auto d = ev.damaged.find(id); d != ev.damaged.end() && *d->second.rbegin() >= expected) {
      out->first_lost = expected;
      out->why = "seq " + std::to_string(*d->second.rbegin()) + " is damaged";
    } else if (auto i = ev.indexed_checkpoint.find(id); i != ev.indexed_checkpoint.end() && i->second >= expected) {
      out->first_lost = expected;
      out->why = "the session index named a checkpoint at seq " + std::to_string(i->second) +
                 ", but the records end at seq " + std::to_string(expected - 1);
    }
  }
  out->closed = out->first_lost != 0;
  const SessionState& committed = folder.committed();
  uint64_t keep = out->closed ? committed.last_seq : folder.last_seq();
  if (keep == 0) {
    out->kept_to = 0;
    return Status();  // not even its opening checkpoint: nothing to restore
  }
  events.resize(keep);
  out->kept_to = keep;
  out->kept_turn = committed.committed_turn;

  std::vector<CheckpointEntry> checkpoints;
  for (const auto& e : events) {
    if (const auto* c = get_if<TurnCommitted>(e)) {
      checkpoints.push_back(CheckpointEntry{.seq = e.seq, .turn = c->turn, .state_hash = c->state_hash});
    }
  }
  SessionMeta meta = meta_from_state(id, committed, events.back().ts_us, nullptr);
  meta.created_us = events.front().ts_us;
  meta.configured_seq = last_configured_seq(events);
  if (auto i = ev.imported.find(id); i != ev.imported.end()) meta.imported_seq = std::min(i->second, keep);
  CARAPACE_RETURN_IF_ERROR(log->append(AppendRequest{.session = id,
                                                     .events = events,
                                                     .durability = Durability::kSynced,
                                                     .meta = &meta,
                                                     .checkpoints = checkpoints}));
  if (!out->closed) return Status();
  // The turns after the kept checkpoint may have had effects: the session is
  // closed rather than left to be resumed as if they had not happened.
  auto journal = SessionJournal::attach(log, id, committed, {}, keep, JournalOptions{.snapshot_every_turns = 0});
  return journal->commit({SessionFailed{
      .error = "carapace repair: the log lost records of this session (" + out->why + "); its history is kept up to turn " +
               std::to_string(out->kept_turn) + ", and what happened after is unknown",
      .stop_reason = "log_damaged"}});
}

}  // namespace

Status salvage_log_db(const std::string& dir, SalvageReport* out) {
  *out = SalvageReport{};
  std::string what;
  DbDirectoryState state = inspect_db_directory(dir, &what);
  if (state == DbDirectoryState::kAbsent || state == DbDirectoryState::kEmpty) {
    return Status::not_found("there is no event log at " + dir + " to repair");
  }
  if (state == DbDirectoryState::kUnreadable) return Status::io_error(what + "; nothing was repaired");
  if (pid_t holder = lock_holder(dir); holder > 0) {
    return Status::busy("process " + std::to_string(holder) + " is writing to the event log at " + dir +
                        "; stop it before repairing");
  }
  if (state == DbDirectoryState::kDatabase) {
    std::unique_ptr<EventLog> log;
    Status opened = EventLog::open(EventLog::Options{.path = dir, .mode = EventLog::Mode::kReader}, &log);
    if (opened.ok()) return Status();  // nothing to repair
    if (opened.detail() == Status::Detail::kLockHeld) return opened;
    out->damage = opened.message();
  } else {
    out->damage = what;
  }

  // 1. The original, renamed aside and never written again.
  std::error_code ec;
  std::string base = fs::path(dir).lexically_normal().string();
  while (!base.empty() && base.back() == '/') base.pop_back();
  fs::path original = base + ".before-repair-" + utc_stamp();
  for (int n = 2; fs::exists(original, ec); ++n) original = base + ".before-repair-" + utc_stamp() + "-" + std::to_string(n);
  fs::rename(dir, original, ec);
  if (ec) return Status::io_error("cannot move " + dir + " aside to " + original.string() + ": " + ec.message());
  out->original = original.string();

  // 2-3. The evidence.
  Evidence ev;
  Status s = gather(original, out, &ev);
  out->damaged_event_records = ev.damaged_records;
  auto undo = [&](const Status& why) {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    fs::rename(original, dir, ignored);
    return why.with_context("nothing was changed");
  };
  if (!s.ok()) return undo(s);

  // 4. The new log.
  std::unique_ptr<EventLog> log;
  s = EventLog::open(EventLog::Options{.path = dir}, &log);
  if (!s.ok()) return undo(s);
  std::set<std::string> ids;
  for (const auto& [id, _] : ev.records) ids.insert(id);
  for (const auto& [id, _] : ev.damaged) ids.insert(id);
  for (const auto& [id, _] : ev.indexed_checkpoint) ids.insert(id);
  for (const auto& id : ids) {
    if (!keys::validate_session_id(id).ok()) continue;
    SalvagedSession session;
    s = restore_session(log.get(), id, ev, &session);
    if (!s.ok()) {
      log.reset();
      return undo(s.with_context("restoring session " + id));
    }
    out->sessions.push_back(std::move(session));
  }
  out->repaired = true;
  return Status();
}

}  // namespace carapace
