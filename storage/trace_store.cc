#include "storage/trace_store.h"

#include <set>

#include <nlohmann/json.hpp>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "base/bounded_json.h"
#include "storage/close_compaction.h"
#include "storage/db_options.h"

namespace carapace {
namespace {

constexpr const char* kFamilies[] = {"default", "spans", "progress", "by_start", "by_model", "by_tool"};
enum Family { kDefault = 0, kSpans, kProgress, kByStart, kByModel, kByTool, kFamilyCount };

Status from_rocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status();
  if (s.IsNotFound()) return Status::not_found(what + ": " + s.ToString());
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos) {
    return Status::busy(what + ": another process is writing it (" + s.ToString() + ")");
  }
  return Status::io_error(what + ": " + s.ToString());
}

void put_be64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_be64(std::string_view in) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < in.size(); ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}
// Timestamps are positive microseconds; the sign bit flipped keeps the order anyway.
uint64_t ordered(int64_t ts) { return static_cast<uint64_t>(ts) ^ (uint64_t{1} << 63); }
int64_t unordered(uint64_t v) { return static_cast<int64_t>(v ^ (uint64_t{1} << 63)); }

std::string session_span(const std::string& session, const std::string& span_id) {
  std::string k = session;
  k.push_back('\0');
  return k + span_id;
}

// Parses "<be64 start> session 0x00 span_id".
bool parse_tail(std::string_view tail, SpanRef* out) {
  if (tail.size() < 9) return false;
  out->start_us = unordered(get_be64(tail.substr(0, 8)));
  tail.remove_prefix(8);
  size_t zero = tail.find('\0');
  if (zero == std::string_view::npos) return false;
  out->session = std::string(tail.substr(0, zero));
  out->span_id = std::string(tail.substr(zero + 1));
  return true;
}

std::string progress_to_text(const TraceProgress& p) {
  return nlohmann::json{{"last_seq", p.last_seq},
                        {"dropped", p.dropped},
                        {"crashed_after_seq", p.crashed_after_seq},
                        {"updated_us", p.updated_us}}
      .dump();
}

Status progress_from_text(const std::string& text, TraceProgress* out) {
  auto j = parse_stored_json(text);
  if (!j.is_object()) return Status::corruption("trace store: a progress entry is not JSON");
  out->last_seq = j.value("last_seq", uint64_t{0});
  out->dropped = j.value("dropped", uint64_t{0});
  out->crashed_after_seq = j.value("crashed_after_seq", uint64_t{0});
  out->updated_us = j.value("updated_us", int64_t{0});
  return Status();
}

}  // namespace

struct TraceStore::Impl {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> families;
  std::string path;
  bool writer = false;

  ~Impl() {
    // Each `carapace run` is a short writer of the store too: without this,
    // every run left a table file per family (7,790 after 1,560 runs).
    if (writer) settle_before_close(db.get(), families);
    for (auto* h : families) {
      if (db) (void)db->DestroyColumnFamilyHandle(h);
    }
    if (db) (void)db->Close();
  }

  Status scan(Family family, const std::string& prefix, const std::string& from, std::vector<SpanRef>* out) const {
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), families[family]));
    for (it->Seek(prefix + from); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      SpanRef ref;
      std::string_view key(it->key().data(), it->key().size());
      if (parse_tail(key.substr(prefix.size()), &ref)) out->push_back(std::move(ref));
    }
    return from_rocks(it->status(), "reading the trace store " + path);
  }
};

TraceStore::TraceStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TraceStore::~TraceStore() = default;

std::vector<rocksdb::ColumnFamilyDescriptor> trace_store_families() {
  rocksdb::ColumnFamilyOptions family;
  family.write_buffer_size = 4 << 20;
  size_levels_to_flushes(family);
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const char* name : kFamilies) descriptors.emplace_back(name, family);
  return descriptors;
}

const std::string& TraceStore::path() const { return impl_->path; }

Status TraceStore::open(const std::string& path, Mode mode, std::unique_ptr<TraceStore>* out) {
  rocksdb::DBOptions options;
  options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  options.info_log = process_rocksdb_logger();  // no LOG file: a full disk must not abort (db_options.h)
  options.keep_log_file_num = 2;
  options.max_background_jobs = 1;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors = trace_store_families();
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s;
  struct stat st;
  if (mode == Mode::kWriter) {
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::io_error("cannot create " + path + ": " + std::strerror(errno));
    }
    options.create_if_missing = true;
    options.create_missing_column_families = true;
    s = rocksdb::DB::Open(options, path, descriptors, &impl->families, &db);
    impl->writer = true;
  } else {
    if (::stat((path + "/CURRENT").c_str(), &st) != 0) return Status::not_found("no trace store at " + path);
    s = rocksdb::DB::OpenForReadOnly(options, path, descriptors, &impl->families, &db);
  }
  CARAPACE_RETURN_IF_ERROR(from_rocks(s, "opening the trace store " + path));
  impl->db.reset(db);
  out->reset(new TraceStore(std::move(impl)));
  return Status();
}

Status TraceStore::write(std::span<const StoredSpan> spans,
                         const std::vector<std::pair<std::string, TraceProgress>>& progress) {
  rocksdb::WriteBatch batch;
  auto& f = impl_->families;
  for (const auto& s : spans) {
    std::string key = s.session;
    key.push_back('\0');
    put_be64(&key, s.open_seq);
    key += s.span_id;
    (void)batch.Put(f[kSpans], key, s.value);
    std::string tail;
    put_be64(&tail, ordered(s.start_us));
    tail += session_span(s.session, s.span_id);
    (void)batch.Put(f[kByStart], tail, "");
    if (!s.model.empty()) (void)batch.Put(f[kByModel], s.model + std::string(1, '\0') + tail, "");
    if (!s.tool.empty()) (void)batch.Put(f[kByTool], s.tool + std::string(1, '\0') + tail, "");
  }
  for (const auto& [session, p] : progress) (void)batch.Put(f[kProgress], session, progress_to_text(p));
  return from_rocks(impl_->db->Write(rocksdb::WriteOptions(), &batch), "writing the trace store " + impl_->path);
}

Status TraceStore::remove_spans(const std::vector<std::string>& sessions, uint64_t* removed) {
  *removed = 0;
  if (sessions.empty()) return Status();
  const std::set<std::string> gone(sessions.begin(), sessions.end());
  auto& f = impl_->families;
  rocksdb::WriteBatch batch;
  for (const auto& session : gone) {
    std::string prefix = session;
    prefix.push_back('\0');
    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), f[kSpans]));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
      (void)batch.Delete(f[kSpans], it->key());
      ++*removed;
    }
    CARAPACE_RETURN_IF_ERROR(from_rocks(it->status(), "reading the trace store " + impl_->path));
  }
  // The indexes are ordered by time (within a model or tool): one pass over each.
  for (Family family : {kByStart, kByModel, kByTool}) {
    std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), f[family]));
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      std::string_view key(it->key().data(), it->key().size());
      if (family != kByStart) {
        size_t zero = key.find('\0');
        if (zero == std::string_view::npos) continue;
        key.remove_prefix(zero + 1);
      }
      SpanRef ref;
      if (parse_tail(key, &ref) && gone.count(ref.session) != 0) (void)batch.Delete(f[family], it->key());
    }
    CARAPACE_RETURN_IF_ERROR(from_rocks(it->status(), "reading the trace store " + impl_->path));
  }
  CARAPACE_RETURN_IF_ERROR(
      from_rocks(impl_->db->Write(rocksdb::WriteOptions(), &batch), "writing the trace store " + impl_->path));
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  for (auto* h : f) {
    CARAPACE_RETURN_IF_ERROR(from_rocks(impl_->db->CompactRange(co, h, nullptr, nullptr), "compacting " + impl_->path));
  }
  return Status();
}

Status TraceStore::spans_of(const std::string& session, std::vector<std::string>* values) const {
  return scan_spans(session, [&](std::string_view value) {
    values->emplace_back(value);
    return true;
  });
}

Status TraceStore::scan_spans(const std::string& session,
                              const std::function<bool(std::string_view)>& visit) const {
  std::string prefix = session;
  prefix.push_back('\0');
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->families[kSpans]));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (!visit(std::string_view(it->value().data(), it->value().size()))) break;
  }
  return from_rocks(it->status(), "reading the trace store " + impl_->path);
}

Status TraceStore::progress(const std::string& session, TraceProgress* out) const {
  std::string text;
  rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), impl_->families[kProgress], session, &text);
  if (s.IsNotFound()) return Status::not_found("the collector has not seen session " + session);
  CARAPACE_RETURN_IF_ERROR(from_rocks(s, "reading the trace store " + impl_->path));
  return progress_from_text(text, out);
}

Status TraceStore::all_progress(std::vector<std::pair<std::string, TraceProgress>>* out) const {
  std::unique_ptr<rocksdb::Iterator> it(
      impl_->db->NewIterator(rocksdb::ReadOptions(), impl_->families[kProgress]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    TraceProgress p;
    CARAPACE_RETURN_IF_ERROR(progress_from_text(it->value().ToString(), &p));
    out->emplace_back(it->key().ToString(), p);
  }
  return from_rocks(it->status(), "reading the trace store " + impl_->path);
}

Status TraceStore::by_start(int64_t since_us, std::vector<SpanRef>* out) const {
  std::string from;
  put_be64(&from, ordered(since_us));
  return impl_->scan(kByStart, "", from, out);
}

Status TraceStore::by_model(const std::string& model, int64_t since_us, std::vector<SpanRef>* out) const {
  std::string from;
  put_be64(&from, ordered(since_us));
  return impl_->scan(kByModel, model + std::string(1, '\0'), from, out);
}

Status TraceStore::by_tool(const std::string& tool, int64_t since_us, std::vector<SpanRef>* out) const {
  std::string from;
  put_be64(&from, ordered(since_us));
  return impl_->scan(kByTool, tool + std::string(1, '\0'), from, out);
}

}  // namespace carapace
