// The bundle file (docs/bundle-format.md):
//
//   bundle     := header event-line* body-line* end-line          one JSON object per line, '\n' after each
//   header     := {"format":"carapace-bundle","version":V,"session":ID,"events":N[,"bodies":M]}
//   event-line := {"seq":S,"ts_us":T,"type":K,"payload":HEX}     S = 1, 2, ... N
//   body-line  := {"body":REF,"bytes":HEX}                       version 2; REF = digest of the bytes
//   end-line   := {"end":true,"events":N[,"bodies":M],"digest":D} D = XXH3-128 of the event and body lines
//
// Lines are read one at a time, each at most kBundleMaxLineBytes, the file
// at most kBundleMaxBytes. A long string of hex digits (a payload or a
// body) is taken out of its line before the line goes to
// parse_bounded_json and decoded straight from the line, so that a line's
// bytes are held once, not copied into a JSON value as well.
#include "replay/bundle.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "base/bounded_file.h"
#include "base/bounded_json.h"
#include "base/digest.h"
#include "base/text.h"
#include "base/unique_fd.h"
#include "events/fold.h"
#include "events/payload.h"
#include "replay/recovery.h"
#include "replay/verify.h"
#include "storage/body_store.h"
#include "storage/keys.h"
#include "storage/session_meta.h"

namespace carapace {
namespace {

using nlohmann::json;
constexpr const char* kFormat = "carapace-bundle";
// A string of hex digits at least this long is decoded from the line itself.
constexpr size_t kInlineHexChars = 4096;
// Stands for the string taken out of a line.
constexpr const char* kTakenOut = "<hex>";

constexpr char kDigits[] = "0123456789abcdef";

void append_hex(std::string_view bytes, std::string* out) {
  size_t at = out->size();
  out->resize(at + bytes.size() * 2);
  char* p = out->data() + at;
  for (unsigned char c : bytes) {
    *p++ = kDigits[c >> 4];
    *p++ = kDigits[c & 15];
  }
}

// The value of each byte as a hex digit, or -1.
constexpr std::array<int8_t, 256> kHexValue = [] {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int c = '0'; c <= '9'; ++c) t[c] = static_cast<int8_t>(c - '0');
  for (int c = 'a'; c <= 'f'; ++c) t[c] = static_cast<int8_t>(c - 'a' + 10);
  return t;
}();

// Decodes the hex digits at `from` (`n` of them) into `to` (n / 2 bytes;
// `to` may be `from`: byte i is written where digit i was, after it is read).
bool decode_hex(const char* from, size_t n, char* to) {
  if (n % 2 != 0) return false;
  const auto* in = reinterpret_cast<const unsigned char*>(from);
  int bad = 0;
  for (size_t i = 0; i < n; i += 2) {
    int hi = kHexValue[in[i]], lo = kHexValue[in[i + 1]];
    bad |= hi | lo;  // negative if either is not a digit
    to[i / 2] = static_cast<char>(((hi & 15) << 4) | (lo & 15));
  }
  return bad >= 0;
}

// A directory of its own under the system's temporary directory, removed with it.
class ScratchDir {
 public:
  Status open() {
    std::string pattern = (std::filesystem::temp_directory_path() / "carapace-import-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return Status::io_error("cannot create a scratch directory to check the bundle in: " +
                              errno_text(errno));
    }
    path_ = pattern;
    return Status();
  }
  ~ScratchDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Writes a file through a temporary one, synced, then renamed, in pieces.
class SyncedFileWriter {
 public:
  explicit SyncedFileWriter(std::string path) : path_(std::move(path)), tmp_(path_ + ".tmp") {}
  ~SyncedFileWriter() {
    if (fd_) ::unlink(tmp_.c_str());
  }

  Status open() {
    fd_.reset(::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd_) return Status::io_error("cannot write " + tmp_ + ": " + errno_text(errno));
    return Status();
  }

  // Queues `text`; written out in pieces of about 1 MiB.
  Status add(std::string_view text) {
    buffer_.append(text);
    written_ += text.size();
    return buffer_.size() >= (1u << 20) ? flush() : Status();
  }

  Status commit() {
    CARAPACE_RETURN_IF_ERROR(flush());
    if (::fsync(fd_.get()) != 0) return Status::io_error("cannot sync " + tmp_ + ": " + errno_text(errno));
    if (::close(fd_.release()) != 0)
      return Status::io_error("cannot write " + tmp_ + ": " + errno_text(errno));
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      int e = errno;
      ::unlink(tmp_.c_str());
      return Status::io_error("cannot rename " + tmp_ + " to " + path_ + ": " + errno_text(e));
    }
    return Status();
  }

  uint64_t written() const { return written_; }

 private:
  Status flush() {
    size_t done = 0;
    while (done < buffer_.size()) {
      ssize_t n = ::write(fd_.get(), buffer_.data() + done, buffer_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return Status::io_error("cannot write " + tmp_ + ": " + errno_text(errno));
      done += static_cast<size_t>(n);
    }
    buffer_.clear();
    return Status();
  }

  std::string path_, tmp_;
  UniqueFd fd_;
  std::string buffer_;
  uint64_t written_ = 0;
};

// Reads a file line by line with a cap on each line and on the whole. A
// line longer than the buffer is measured first and then read into a string
// of exactly its size.
class LineReader {
 public:
  LineReader(int fd, uint64_t max_line, uint64_t max_total)
      : fd_(fd), max_line_(max_line), max_total_(max_total) {}

  // The next line, without its '\n', in `*line`; `*more` false at the end of
  // the file. A last line with no '\n' is a line too.
  Status next(std::string* line, bool* more) {
    *more = false;
    line->clear();
    if (pos_ == buf_.size()) {
      CARAPACE_RETURN_IF_ERROR(fill());
      if (buf_.empty()) return Status();  // the end of the file
    }
    const char* from = buf_.data() + pos_;
    const void* nl = std::memchr(from, '\n', buf_.size() - pos_);
    // A line that goes on past the buffer: measured, then read whole.
    if (nl == nullptr) return read_long(line, more);
    size_t n = static_cast<const char*>(nl) - from;
    if (n > max_line_) return too_long(offset_);
    line->assign(from, n);
    pos_ += n + 1;
    offset_ += n + 1;
    *more = true;
    return Status();
  }

  uint64_t offset() const { return offset_; }

 private:
  static constexpr size_t kChunk = 1 << 20;

  Status fill() {
    buf_.resize(kChunk);
    pos_ = 0;
    for (;;) {
      ssize_t n = ::pread(fd_, buf_.data(), buf_.size(), static_cast<off_t>(offset_));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::io_error(errno_text(errno));
      buf_.resize(static_cast<size_t>(n));
      break;
    }
    if (offset_ + buf_.size() > max_total_) {
      return Status::invalid_argument("is larger than " + byte_size_text(max_total_) +
                                      ", the limit for a bundle");
    }
    return Status();
  }

  Status too_long(uint64_t start) const {
    return Status::invalid_argument("has a line longer than " + byte_size_text(max_line_) +
                                    " (the limit for a bundle's line) at byte " + std::to_string(start));
  }

  Status read_long(std::string* line, bool* more) {
    // Where it ends: scanned ahead without keeping what is read.
    const uint64_t start = offset_;
    uint64_t end = offset_;
    bool newline = false;
    std::string scan(kChunk, '\0');
    for (;;) {
      ssize_t n = ::pread(fd_, scan.data(), scan.size(), static_cast<off_t>(end));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::io_error(errno_text(errno));
      if (n == 0) break;
      const void* nl = std::memchr(scan.data(), '\n', static_cast<size_t>(n));
      uint64_t upto =
          nl ? static_cast<uint64_t>(static_cast<const char*>(nl) - scan.data()) : static_cast<uint64_t>(n);
      end += upto;
      if (end - start > max_line_) return too_long(start);
      if (end > max_total_) {
        return Status::invalid_argument("is larger than " + byte_size_text(max_total_) +
                                        ", the limit for a bundle");
      }
      if (nl != nullptr) {
        newline = true;
        break;
      }
    }
    line->resize(static_cast<size_t>(end - start));
    size_t got = 0;
    while (got < line->size()) {
      ssize_t n = ::pread(fd_, line->data() + got, line->size() - got, static_cast<off_t>(start + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::io_error(errno_text(errno));
      if (n == 0) return Status::io_error("the file shrank while it was read");
      got += static_cast<size_t>(n);
    }
    offset_ = end + (newline ? 1 : 0);
    buf_.clear();
    pos_ = 0;
    *more = true;
    return Status();
  }

  int fd_;
  uint64_t max_line_, max_total_;
  std::string buf_;
  size_t pos_ = 0;
  uint64_t offset_ = 0;  // of buf_[pos_] in the file
};

// One line as parsed: its JSON, with its long string (if any) taken out
// and left in the line, at [hex_at, hex_at + hex_size).
struct ParsedLine {
  json j;
  size_t hex_at = std::string::npos;
  size_t hex_size = 0;
};

// The first JSON string of `line` that is at least kInlineHexChars long and
// has no escape: its content's offset and length, or npos. Outside strings
// no quote is special, so this finds the same strings a parser does.
std::pair<size_t, size_t> long_plain_string(std::string_view line) {
  size_t i = 0;
  for (;;) {
    size_t open = line.find('"', i);
    if (open == std::string_view::npos) return {std::string_view::npos, 0};
    const size_t at = open + 1;
    bool escaped = false;
    size_t close = 0;
    for (size_t from = at;;) {
      // The next quote, unless a backslash before it escapes something.
      size_t quote = from < line.size() ? line.find('"', from) : std::string_view::npos;
      if (quote == std::string_view::npos) return {std::string_view::npos, 0};
      const void* backslash = std::memchr(line.data() + from, '\\', quote - from);
      if (backslash == nullptr) {
        close = quote;
        break;
      }
      escaped = true;
      from = static_cast<size_t>(static_cast<const char*>(backslash) - line.data()) + 2;
    }
    if (!escaped && close - at >= kInlineHexChars) return {at, close - at};
    i = close + 1;
  }
}

Status parse_line(std::string_view line, std::string_view what, ParsedLine* out) {
  auto [at, size] = long_plain_string(line);
  out->hex_at = at;
  out->hex_size = size;
  if (at == std::string_view::npos) return parse_bounded_json(line, what, &out->j);
  std::string rest;
  rest.reserve(line.size() - size + 8);
  rest.append(line.substr(0, at)).append(kTakenOut).append(line.substr(at + size));
  return parse_bounded_json(rest, what, &out->j);
}

// The bytes whose hex string field `key` holds: decoded in place in `line`
// if it is the string taken out of it (the line's hex is spent then), else
// into `*scratch`. False if the field is not a string of hex digits.
bool hex_field(const ParsedLine& p, std::string* line, const char* key, std::string* scratch,
               std::string_view* bytes) {
  auto it = p.j.find(key);
  if (it == p.j.end() || !it->is_string()) return false;
  const std::string& s = it->get_ref<const std::string&>();
  if (p.hex_at != std::string::npos && s == kTakenOut) {
    char* at = line->data() + p.hex_at;
    if (!decode_hex(at, p.hex_size, at)) return false;
    *bytes = std::string_view(at, p.hex_size / 2);
    return true;
  }
  scratch->resize(s.size() / 2);
  if (!decode_hex(s.data(), s.size(), scratch->data())) return false;
  *bytes = *scratch;
  return true;
}

const char* json_type(const json& v) {
  if (v.is_string()) return "a string";
  if (v.is_number_unsigned()) return "a whole number";
  if (v.is_number()) return "a number that is not a whole number from 0";
  if (v.is_boolean()) return "true or false";
  if (v.is_null()) return "null";
  if (v.is_array()) return "an array";
  return "an object";
}

// Field `key` of `j` as a whole number from 0: absent (`*present` false,
// when `present` is given), or a message naming it and what it is instead.
bool whole_field(const json& j, const char* key, uint64_t* out, std::string* why, bool* present = nullptr) {
  auto it = j.find(key);
  if (it == j.end()) {
    if (present != nullptr) {
      *present = false;
      return true;
    }
    *why = "has no field '" + std::string(key) + "'";
    return false;
  }
  if (present != nullptr) *present = true;
  if (!it->is_number_unsigned()) {
    *why = "field '" + std::string(key) + "' is " + json_type(*it) + ", not a whole number from 0";
    return false;
  }
  *out = it->get<uint64_t>();
  return true;
}

bool string_field(const json& j, const char* key, std::string* out, std::string* why) {
  auto it = j.find(key);
  if (it == j.end()) {
    *why = "has no field '" + std::string(key) + "'";
    return false;
  }
  if (!it->is_string()) {
    *why = "field '" + std::string(key) + "' is " + json_type(*it) + ", not a string";
    return false;
  }
  *out = it->get<std::string>();
  return true;
}

// Appends `bundle`'s session to `log` under `id`, with its checkpoint and
// session index entries as its writer would have written them, and the
// import marker. `checked`: the session verified already (check_bundle);
// else (the scratch log check_bundle verifies) it is written whatever it
// holds, for verify to judge: the checkpoint entries as the events say,
// the index entry from a fold that takes the hashes on trust (none if even
// that fails).
Status append_session(EventLog* log, const Bundle& bundle, const std::string& id, bool checked) {
  Folder folder(Folder::Options{.verify_hashes = checked});
  std::vector<CheckpointEntry> checkpoints;
  bool folded = true;
  for (const Event& e : bundle.events) {
    if (folded) {
      Status s = folder.add(e);
      if (!s.ok() && checked) return s.with_context("the bundle's session does not verify");
      folded = s.ok();
    }
    if (const auto* c = get_if<TurnCommitted>(e)) {
      checkpoints.push_back(CheckpointEntry{.seq = e.seq, .turn = c->turn, .state_hash = c->state_hash});
    }
  }
  SessionMeta meta;
  if (folded) {
    meta = meta_from_state(id, folder.committed(), bundle.events.back().ts_us, nullptr);
    meta.configured_seq = last_configured_seq(bundle.events);
    meta.imported_seq = bundle.events.back().seq;
  }
  return log->append(AppendRequest{.session = id,
                                   .events = bundle.events,
                                   .durability = Durability::kSynced,
                                   .meta = folded ? &meta : nullptr,
                                   .checkpoints = checkpoints});
}

}  // namespace

Status write_bundle_file(const Bundle& bundle, const std::string& path, BundleWritten* written) {
  SyncedFileWriter out(path);
  CARAPACE_RETURN_IF_ERROR(out.open());
  const bool bodies = !bundle.bodies.empty();
  json header{{"format", kFormat},
              {"version", bodies ? kBundleVersion : 1u},
              {"session", bundle.session},
              {"events", bundle.events.size()}};
  if (bodies) header["bodies"] = bundle.bodies.size();
  CARAPACE_RETURN_IF_ERROR(out.add(header.dump() + "\n"));
  Digest128Builder digest;
  std::string payload, line;
  for (const Event& e : bundle.events) {
    payload.clear();
    encode_payload(e.body, payload);
    // Keys in the order nlohmann::json writes them (sorted), as every earlier bundle has them.
    line = "{\"payload\":\"";
    append_hex(payload, &line);
    line += "\",\"seq\":" + std::to_string(e.seq) + ",\"ts_us\":" + std::to_string(e.ts_us) +
            ",\"type\":" + std::to_string(e.type_number()) + "}\n";
    digest.update(line);
    CARAPACE_RETURN_IF_ERROR(out.add(line));
  }
  for (const BundleBody& body : bundle.bodies) {
    line = json{{"body", body.ref}}.dump();
    line.pop_back();  // the closing brace
    line += ",\"bytes\":\"";
    append_hex(body.bytes, &line);
    line += "\"}\n";
    digest.update(line);
    CARAPACE_RETURN_IF_ERROR(out.add(line));
  }
  std::string().swap(line);
  json end{{"end", true}, {"events", bundle.events.size()}, {"digest", digest.finish().hex()}};
  if (bodies) end["bodies"] = bundle.bodies.size();
  CARAPACE_RETURN_IF_ERROR(out.add(end.dump() + "\n"));
  uint64_t bytes = out.written();
  CARAPACE_RETURN_IF_ERROR(out.commit());
  if (written != nullptr) {
    *written = BundleWritten{.events = bundle.events.size(), .bodies = bundle.bodies.size(), .bytes = bytes};
  }
  return Status();
}

Status write_bundle(const EventLog& log, const std::string& id, const std::string& path, bool with_bodies,
                    const BodyStore* bodies, BundleWritten* written) {
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  Status intact = check_records(log, id);
  if (!intact.ok()) {
    if (intact.is_not_found()) return intact;
    return intact.with_context("session " + id + " is damaged and was not bundled (`carapace verify " + id +
                               "` lists the damage)");
  }
  Bundle bundle{.session = id};
  CARAPACE_RETURN_IF_ERROR(log.read(id, 1, UINT64_MAX, &bundle.events));
  if (bundle.events.empty()) return Status::not_found("no session '" + id + "'");
  uint64_t missing = 0;
  if (with_bodies) {
    std::set<std::string> seen;
    for (const Event& e : bundle.events) {
      const std::string& ref = body_ref_of(e);
      if (ref.empty() || !seen.insert(ref).second) continue;
      BundleBody body{.ref = ref};
      Status s = bodies != nullptr ? bodies->get(ref, &body.bytes) : Status::not_found(ref);
      if (s.is_not_found()) {
        ++missing;
        continue;
      }
      if (!s.ok()) return s.with_context("reading body " + ref + " for the bundle");
      bundle.bodies.push_back(std::move(body));
    }
  }
  BundleWritten w;
  CARAPACE_RETURN_IF_ERROR(write_bundle_file(bundle, path, &w));
  w.missing_bodies = missing;
  if (written != nullptr) *written = w;
  return Status();
}

Status read_bundle(const std::string& path, Bundle* out, const ReadBundleOptions& options) {
  auto bad = [&path](const std::string& why) {
    return Status::corruption("the bundle " + path + " " + why + "; it was not used");
  };
  auto over = [&path](const Status& limit) {
    return Status::invalid_argument("the bundle " + path + " " + limit.message() + "; it was not used");
  };
  // O_NONBLOCK: a FIFO with no writer must not hold the command.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) {
    int err = errno;
    if (err == ENOENT) return Status::not_found("the bundle " + path + " does not exist");
    return Status::io_error("cannot read the bundle " + path + ": " + errno_text(err));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    return Status::io_error("cannot read the bundle " + path + ": " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) return Status::invalid_argument("the bundle " + path + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > kBundleMaxBytes) {
    return Status::invalid_argument("the bundle " + path + " is " + std::to_string(st.st_size) +
                                    " bytes, more than " + byte_size_text(kBundleMaxBytes) +
                                    ", the limit for a bundle; it was not used");
  }
  LineReader reader(fd.get(), kBundleMaxLineBytes, kBundleMaxBytes);
  std::string line;
  bool more = false;
  auto next = [&]() -> Status {
    Status s = reader.next(&line, &more);
    if (s.is_invalid_argument()) return over(s);
    if (!s.ok()) return Status::io_error("cannot read the bundle " + path + ": " + s.message());
    return s;
  };

  CARAPACE_RETURN_IF_ERROR(next());
  if (!more) return bad("is empty");
  ParsedLine p;
  if (!parse_line(line, "its header", &p).ok() || !p.j.is_object() || !p.j.contains("format") ||
      p.j["format"] != kFormat) {
    return bad("is not a Carapace bundle (its first line is not a bundle header)");
  }
  std::string why;
  uint64_t version = 0, header_events = 0, header_bodies = 0;
  bool has_bodies = false;
  Bundle b;
  if (!whole_field(p.j, "version", &version, &why) || !string_field(p.j, "session", &b.session, &why) ||
      !whole_field(p.j, "events", &header_events, &why) ||
      !whole_field(p.j, "bodies", &header_bodies, &why, &has_bodies)) {
    return bad("has a header whose " + why);
  }
  if (version == 0) return bad("has a header whose field 'version' is 0");
  if (version > kBundleVersion) {
    return Status::invalid_argument("the bundle " + path + " is of version " + std::to_string(version) +
                                    "; this build reads version " + std::to_string(kBundleVersion) +
                                    " and older: use a newer carapace");
  }
  if (Status valid = keys::validate_session_id(b.session); !valid.ok()) {
    return bad("names no valid session (" + valid.message() + ")");
  }

  Digest128Builder digest;
  uint64_t bodies_seen = 0;
  bool ended = false;
  std::string scratch;  // a short field's bytes
  while (!ended) {
    CARAPACE_RETURN_IF_ERROR(next());
    if (!more) break;
    const std::string where = "after event " + std::to_string(b.events.size()) +
                              (bodies_seen ? " and body " + std::to_string(bodies_seen) : "");
    if (Status parsed = parse_line(line, "it", &p); !parsed.ok()) {
      return bad("has a damaged line " + where + " (" + parsed.message() + ")");
    }
    if (!p.j.is_object()) return bad("has a line " + where + " that is not a JSON object");
    if (p.j.contains("end")) {
      uint64_t events = 0, bodies = 0;
      bool end_has_bodies = false;
      std::string recorded_digest;
      if (p.j["end"] != true || !whole_field(p.j, "events", &events, &why) ||
          !whole_field(p.j, "bodies", &bodies, &why, &end_has_bodies) ||
          !string_field(p.j, "digest", &recorded_digest, &why)) {
        return bad("has a malformed end line" + (why.empty() ? std::string() : ": its " + why));
      }
      if (events != b.events.size() || header_events != b.events.size()) {
        return bad("says it holds " + std::to_string(events != b.events.size() ? events : header_events) +
                   " events but holds " + std::to_string(b.events.size()));
      }
      if (bodies != bodies_seen || header_bodies != bodies_seen) {
        return bad("says it holds " + std::to_string(bodies != bodies_seen ? bodies : header_bodies) +
                   " bodies but holds " + std::to_string(bodies_seen));
      }
      if (recorded_digest != digest.finish().hex()) {
        return bad("was changed after it was written (digest mismatch)");
      }
      ended = true;
      continue;
    }
    digest.update(line);
    digest.update("\n");
    if (p.j.contains("body")) {
      std::string_view bytes;
      if (version < 2 || !p.j["body"].is_string() || !hex_field(p, &line, "bytes", &scratch, &bytes)) {
        return bad("has a malformed body line " + where);
      }
      const std::string& ref = p.j["body"].get_ref<const std::string&>();
      if (BodyStore::ref_of(bytes) != ref) return bad("holds a body whose bytes do not match its key " + ref);
      ++bodies_seen;
      if (options.keep_bodies) {
        b.bodies.push_back(BundleBody{.ref = ref, .bytes = std::string(bytes)});
      } else {
        ++b.bodies_skipped;
      }
    } else {
      if (bodies_seen > 0) return bad("has an event line after its bodies");
      Event e;
      uint64_t seq = 0, type = 0;
      std::string_view payload;
      auto ts = p.j.find("ts_us");
      if (!whole_field(p.j, "seq", &seq, &why) || !whole_field(p.j, "type", &type, &why) ||
          !hex_field(p, &line, "payload", &scratch, &payload) ||
          (ts != p.j.end() && !ts->is_number_integer())) {
        return bad("has a malformed event line " + where);
      }
      e.seq = seq;
      e.ts_us = ts != p.j.end() ? ts->get<int64_t>() : 0;
      if (e.seq != b.events.size() + 1) {
        return bad("skips from event " + std::to_string(b.events.size()) + " to seq " +
                   std::to_string(e.seq));
      }
      if (type == 0 || type > 0xFFFF || !decode_payload(static_cast<uint16_t>(type), payload, &e.body)) {
        return bad("has an event it cannot decode at seq " + std::to_string(e.seq));
      }
      b.events.push_back(std::move(e));
    }
    // A long line's buffer is not kept for the next one.
    if (line.capacity() > (16u << 20)) std::string().swap(line);
    if (scratch.capacity() > (16u << 20)) std::string().swap(scratch);
  }
  if (!ended) {
    return bad("is truncated (it ends after " + std::to_string(b.events.size()) +
               " events, before its end line)");
  }
  CARAPACE_RETURN_IF_ERROR(next());
  if (more) return bad("goes on after its end line");
  if (b.events.empty()) return bad("holds no events");
  *out = std::move(b);
  return Status();
}

namespace {

// The bundle's session written into `log` (a scratch one) and verified
// there as `carapace verify` would.
Status write_and_verify(EventLog* log, const Bundle& bundle, const std::string& id) {
  if (bundle.events.empty()) return Status::corruption("the bundle holds no events; nothing was imported");
  bool checkpoint = false;
  for (const Event& e : bundle.events)
    checkpoint = checkpoint || std::holds_alternative<TurnCommitted>(e.body);
  if (!checkpoint) {
    return Status::corruption("the bundle's session " + id +
                              " has no checkpoint (turn.committed), so nothing in it can be verified; "
                              "nothing was imported");
  }
  Status appended = append_session(log, bundle, id, /*checked=*/false);
  if (!appended.ok()) return appended.with_context("checking the bundle; nothing was imported");
  VerifyReport report;
  CARAPACE_RETURN_IF_ERROR(verify_session(*log, id, &report));
  if (report.ok()) return Status();
  // As `carapace verify` says it.
  const VerifyIssue& first = report.issues.front();
  std::string said = first.seq != 0 ? "seq " + std::to_string(first.seq) + "  " : "";
  said += first.kind + ": " + first.detail;
  if (report.issues.size() > 1)
    said += " (and " + std::to_string(report.issues.size() - 1) + " more problems)";
  return Status::corruption("the bundle's session " + id + " does not verify: " + said +
                            "; nothing was imported");
}

}  // namespace

Status check_bundle(const Bundle& bundle, const std::string& id) {
  ScratchDir scratch;
  CARAPACE_RETURN_IF_ERROR(scratch.open());
  std::unique_ptr<EventLog> log;
  CARAPACE_RETURN_IF_ERROR(
      EventLog::open(EventLog::Options{.path = scratch.path() + "/log", .scratch = true}, &log));
  return write_and_verify(log.get(), bundle, id);
}

Status import_bundle_to_scratch(EventLog* scratch, const Bundle& bundle) {
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(bundle.session));
  return write_and_verify(scratch, bundle, bundle.session);
}

Status import_bundle(EventLog* log, const Bundle& bundle, const std::string& as_id, BodyStore* bodies,
                     bool checked) {
  const std::string id = as_id.empty() ? bundle.session : as_id;
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(log->last_seq(id, &last));
  if (last != 0) {
    return Status::invalid_argument("session '" + id + "' already exists here (" + std::to_string(last) +
                                    " events); import it under another id with --as ID");
  }
  if (!bundle.bodies.empty() && bodies == nullptr) {
    return Status::invalid_argument(
        "the bundle carries bodies but no body store was given; nothing was imported");
  }
  if (!checked) CARAPACE_RETURN_IF_ERROR(check_bundle(bundle, id));
  for (const BundleBody& body : bundle.bodies) {
    std::string ref;
    Status s = bodies->put(body.bytes, &ref);
    if (!s.ok()) return s.with_context("storing the bundle's body " + body.ref + "; nothing was imported");
  }
  return append_session(log, bundle, id, /*checked=*/true);
}

}  // namespace carapace
