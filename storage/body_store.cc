#include "storage/body_store.h"

#include <rocksdb/convenience.h>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>

#include "base/digest.h"
#include "storage/db_options.h"

namespace carapace {
namespace {

rocksdb::CompressionType body_compression() {
  auto supported = rocksdb::GetSupportedCompressions();
  for (auto wanted : {rocksdb::kZSTD, rocksdb::kLZ4Compression}) {
    for (auto have : supported) {
      if (have == wanted) return wanted;
    }
  }
  return rocksdb::kNoCompression;
}

Status from_rocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status();
  if (s.IsNotFound()) return Status::not_found(what + ": " + s.ToString());
  return Status::io_error(what + ": " + s.ToString());
}

}  // namespace

struct BodyStore::Impl {
  std::unique_ptr<rocksdb::DB> db;
  std::string path;
  uint64_t max_body_bytes = kDefaultMaxBodyBytes;
  std::atomic<uint64_t> writes{0};

  // put_async's queue and writer thread (started on first use).
  struct Pending {
    std::string body;
    std::function<void(Status, std::string)> done;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Pending> queue;
  bool stopping = false;
  std::thread writer;

  // Writes `batch` (bodies not stored yet) in one synced write; the status.
  Status write(std::deque<Pending>& batch);
  void run();
};

Status BodyStore::Impl::write(std::deque<Pending>& batch) {
  rocksdb::WriteBatch wb;
  std::unordered_set<std::string> keys;
  uint64_t fresh = 0;
  for (const auto& p : batch) {
    std::string key = ref_of(p.body);
    if (!keys.insert(key).second) continue;  // the same body twice in one batch
    std::string existing;
    if (db->Get(rocksdb::ReadOptions(), key, &existing).ok() && existing.size() == p.body.size()) continue;
    rocksdb::Status s = wb.Put(key, rocksdb::Slice(p.body.data(), p.body.size()));
    if (!s.ok()) return from_rocks(s, "storing a body in " + path);
    ++fresh;
  }
  if (fresh == 0) return Status();
  rocksdb::WriteOptions wo;
  wo.sync = true;
  CARAPACE_RETURN_IF_ERROR(from_rocks(db->Write(wo, &wb), "storing bodies in " + path));
  writes.fetch_add(fresh, std::memory_order_relaxed);
  return Status();
}

void BodyStore::Impl::run() {
  std::unique_lock lock(mu);
  for (;;) {
    cv.wait(lock, [this] { return stopping || !queue.empty(); });
    if (queue.empty()) return;  // stopping, and nothing left
    std::deque<Pending> batch;
    batch.swap(queue);
    lock.unlock();
    Status s = write(batch);
    for (auto& p : batch) {
      if (p.done) p.done(s, s.ok() ? ref_of(p.body) : std::string());
    }
    lock.lock();
  }
}

BodyStore::BodyStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BodyStore::~BodyStore() {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopping = true;
  }
  impl_->cv.notify_all();
  if (impl_->writer.joinable()) impl_->writer.join();
  if (impl_->db) (void)impl_->db->Close();
}

void BodyStore::cut_body(std::string* body, uint64_t whole_size, uint64_t max_bytes) {
  whole_size = std::max<uint64_t>(whole_size, body->size());
  if (whole_size <= max_bytes && body->size() == whole_size) return;
  if (body->size() > max_bytes) body->resize(max_bytes);
  *body += "\n[carapace: body cut: the first " + std::to_string(body->size()) + " of its " +
           std::to_string(whole_size) + " bytes are kept (provider.max_stored_body_bytes)]\n";
  body->shrink_to_fit();
}

uint64_t BodyStore::max_body_bytes() const { return impl_->max_body_bytes; }

void BodyStore::put_async(std::string body, std::function<void(Status, std::string)> done) {
  uint64_t size = body.size();
  put_async(std::move(body), size, std::move(done));
}

void BodyStore::put_async(std::string body, uint64_t whole_size,
                          std::function<void(Status, std::string)> done) {
  cut_body(&body, whole_size, impl_->max_body_bytes);
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->writer.joinable()) impl_->writer = std::thread([impl = impl_.get()] { impl->run(); });
    impl_->queue.push_back(Impl::Pending{std::move(body), std::move(done)});
  }
  impl_->cv.notify_one();
}

std::string BodyStore::ref_of(std::string_view body) { return digest128(body).hex(); }

Status BodyStore::open(const std::string& path, Mode mode, std::unique_ptr<BodyStore>* out,
                       uint64_t max_body_bytes) {
  rocksdb::Options options;
  options.compression = body_compression();
  options.bottommost_compression = options.compression;
  options.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  options.info_log = process_rocksdb_logger();  // no LOG file: a full disk must not abort (db_options.h)
  options.keep_log_file_num = 2;
  options.max_background_jobs = 1;
  options.write_buffer_size = 8 << 20;
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->max_body_bytes = std::max<uint64_t>(max_body_bytes, 1);
  rocksdb::DB* db = nullptr;
  rocksdb::Status s;
  if (mode == Mode::kWriter) {
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
      return Status::io_error("cannot create " + path + ": " + std::strerror(errno));
    }
    options.create_if_missing = true;
    s = rocksdb::DB::Open(options, path, &db);
  } else {
    struct stat st;
    if (::stat((path + "/CURRENT").c_str(), &st) != 0) return Status::not_found("no body store at " + path);
    s = rocksdb::DB::OpenForReadOnly(options, path, &db);
  }
  CARAPACE_RETURN_IF_ERROR(from_rocks(s, "opening the body store " + path));
  impl->db.reset(db);
  out->reset(new BodyStore(std::move(impl)));
  return Status();
}

Status BodyStore::put(std::string_view whole, std::string* ref) {
  std::string cut;
  std::string_view body = whole;
  if (whole.size() > impl_->max_body_bytes) {
    cut.assign(whole.substr(0, impl_->max_body_bytes));
    cut_body(&cut, whole.size(), impl_->max_body_bytes);
    body = cut;
  }
  std::string key = ref_of(body);
  std::string existing;
  rocksdb::ReadOptions ro;
  rocksdb::Status got = impl_->db->Get(ro, key, &existing);
  if (got.ok() && existing.size() == body.size()) {
    *ref = std::move(key);
    return Status();
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  CARAPACE_RETURN_IF_ERROR(from_rocks(impl_->db->Put(wo, key, rocksdb::Slice(body.data(), body.size())),
                                      "storing a body in " + impl_->path));
  impl_->writes.fetch_add(1, std::memory_order_relaxed);
  *ref = std::move(key);
  return Status();
}

Status BodyStore::get(std::string_view ref, std::string* body) const {
  rocksdb::Status s = impl_->db->Get(rocksdb::ReadOptions(), rocksdb::Slice(ref.data(), ref.size()), body);
  if (s.IsNotFound()) {
    return Status::not_found("no body " + std::string(ref) + " in " + impl_->path +
                             " (removed by `carapace gc`, or never stored)");
  }
  return from_rocks(s, "reading body " + std::string(ref));
}

Status BodyStore::list(std::vector<std::pair<std::string, uint64_t>>* out) const {
  out->clear();
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) out->emplace_back(it->key().ToString(), it->value().size());
  return from_rocks(it->status(), "listing the bodies in " + impl_->path);
}

Status BodyStore::remove(const std::vector<std::string>& refs) {
  if (refs.empty()) return Status();
  rocksdb::WriteBatch wb;
  for (const auto& ref : refs) wb.Delete(ref);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  CARAPACE_RETURN_IF_ERROR(from_rocks(impl_->db->Write(wo, &wb), "removing bodies from " + impl_->path));
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  return from_rocks(impl_->db->CompactRange(co, nullptr, nullptr), "compacting " + impl_->path);
}

uint64_t BodyStore::writes() const { return impl_->writes.load(std::memory_order_relaxed); }

}  // namespace carapace
