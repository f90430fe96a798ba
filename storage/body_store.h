// BodyStore: the verbatim bodies of provider attempts (each request as sent,
// each response as received: raw SSE bytes, or an error body), kept apart
// from the event log and referenced from llm.requested / llm.responded /
// llm.failed by their body_ref.
//
// Content-addressed: a body's key is the hex XXH3-128 digest of its bytes,
// so an identical body (a retried request) is stored once. Stored in its own
// RocksDB database (home/bodies) whose column family is compressed with
// zstd (LZ4 or none if this RocksDB lacks it). put() returns once the body
// is synced to disk, so the event that references it, appended afterwards,
// can never be durable without it. Never holds HTTP headers: callers hand it
// bodies only, and request bodies carry no credentials.
//
// Bounded: a body longer than max_body_bytes (the configuration's
// provider.max_stored_body_bytes) is stored cut: its first max_body_bytes
// bytes, then a marker line giving its whole size (cut_body()); its key is
// the digest of what is stored. A caller that kept only the beginning of a
// longer body (an HTTP response it stopped reading) passes the whole size
// to put_async(), and the same marker says so.
//
// put_async() hands a body to the store's writer thread, which writes what
// has queued up in one synced batch (one sync for many bodies) and then
// calls each caller back: an HTTP client's I/O thread stores responses this
// way without waiting on the disk.
//
// Thread-safe: all methods may be called from many threads at once. The
// destructor writes what is queued, calls its callbacks, and joins the writer.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace carapace {

class BodyStore {
 public:
  enum class Mode { kWriter, kReader };

  static constexpr uint64_t kDefaultMaxBodyBytes = 16ull << 20;

  // Opens (a writer creates it, owner-only) the store at `path`. A reader on
  // a path with no store gets not_found. `max_body_bytes` (at least 1):
  // what put() and put_async() keep of one body.
  static Status open(const std::string& path, Mode mode, std::unique_ptr<BodyStore>* out,
                     uint64_t max_body_bytes = kDefaultMaxBodyBytes);
  ~BodyStore();

  BodyStore(const BodyStore&) = delete;
  BodyStore& operator=(const BodyStore&) = delete;

  // Stores `body` durably (unless already there), cut if it is longer than
  // max_body_bytes(), and sets *ref to the key of what was stored.
  Status put(std::string_view body, std::string* ref);

  // Stores `body` as put() does, on the writer thread; then calls
  // `done(status, ref)` there (keep it quick). `whole_size`, when larger
  // than body.size(): `body` is the beginning of a body that long, and is
  // stored with the marker of a cut body.
  void put_async(std::string body, std::function<void(Status, std::string)> done);
  void put_async(std::string body, uint64_t whole_size, std::function<void(Status, std::string)> done);

  uint64_t max_body_bytes() const;

  // `*body` (the beginning of a body `whole_size` bytes long) as it is
  // stored when it is cut: its first `max_bytes` bytes, then the line
  // "\n[carapace: body cut: the first K of its N bytes are kept
  // (provider.max_stored_body_bytes)]\n". Frees what is cut off.
  static void cut_body(std::string* body, uint64_t whole_size, uint64_t max_bytes);

  // The body stored under `ref`; not_found if there is none.
  Status get(std::string_view ref, std::string* body) const;

  // Every stored body's key and size, in key order.
  Status list(std::vector<std::pair<std::string, uint64_t>>* out) const;

  // Removes the bodies under `refs` (absent ones are no error) in one synced
  // batch, then compacts so that the disk space comes back. The writer only.
  Status remove(const std::vector<std::string>& refs);

  // The key put() gives `body`.
  static std::string ref_of(std::string_view body);

  // Bodies written by put() (not counting those already stored).
  uint64_t writes() const;

 private:
  struct Impl;
  explicit BodyStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace carapace
