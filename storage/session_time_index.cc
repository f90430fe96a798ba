#include "storage/session_time_index.h"

#include <algorithm>

#include "events/wire.h"
#include "storage/keys.h"

namespace carapace::time_index {
namespace {

// Sums signed counts. A value that is not one fails the merge, which RocksDB
// reports as corruption on the read, rather than a count made up.
class CountMerge : public rocksdb::AssociativeMergeOperator {
 public:
  const char* Name() const override { return "carapace.session_count"; }
  bool Merge(const rocksdb::Slice&, const rocksdb::Slice* existing, const rocksdb::Slice& value,
             std::string* new_value, rocksdb::Logger*) const override {
    int64_t base = 0, add = 0;
    if (existing != nullptr && !parse_count(std::string_view(existing->data(), existing->size()), &base)) return false;
    if (!parse_count(std::string_view(value.data(), value.size()), &add)) return false;
    *new_value = count_value(base + add);
    return true;
  }
};

}  // namespace

int64_t when(const SessionMeta& meta) { return std::max<int64_t>({meta.updated_us, meta.created_us, 0}); }

std::string key(int64_t when, std::string_view session) {
  std::string k;
  k.reserve(8 + session.size());
  wire::put_fixed64_be(k, static_cast<uint64_t>(std::max<int64_t>(when, 0)));
  k.append(session);
  return k;
}

bool parse_key(std::string_view key, int64_t* when, std::string_view* session) {
  if (key.size() <= 8) return false;
  uint64_t t = wire::load_fixed64_be(key.data());
  if (t > static_cast<uint64_t>(INT64_MAX)) return false;
  *when = static_cast<int64_t>(t);
  *session = key.substr(8);
  return keys::validate_session_id(*session).ok();
}

std::string count_value(int64_t n) {
  std::string v;
  wire::put_fixed64_le(v, static_cast<uint64_t>(n));
  return v;
}

bool parse_count(std::string_view value, int64_t* n) {
  if (value.size() != 8) return false;
  *n = static_cast<int64_t>(wire::load_fixed64_le(value.data()));
  return true;
}

std::shared_ptr<rocksdb::MergeOperator> count_merge_operator() {
  static const std::shared_ptr<rocksdb::MergeOperator> op = std::make_shared<CountMerge>();
  return op;
}

}  // namespace carapace::time_index
