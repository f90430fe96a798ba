#include "replay/bundle.h"

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "base/digest.h"
#include "events/fold.h"
#include "events/payload.h"
#include "replay/recovery.h"
#include "storage/body_store.h"
#include "storage/keys.h"
#include "storage/session_meta.h"

namespace carapace {
namespace {

using nlohmann::json;
constexpr const char* kFormat = "carapace-bundle";

std::string to_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

bool from_hex(std::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  auto value = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  out->clear();
  out->reserve(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = value(hex[i]), lo = value(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

Status write_synced(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Status::io_error("cannot write " + tmp + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::io_error("cannot write " + tmp + ": " + std::strerror(e));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(tmp.c_str());
    return Status::io_error("cannot sync " + tmp + ": " + std::strerror(errno));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return Status::io_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(e));
  }
  return Status();
}

}  // namespace

Status write_bundle(const EventLog& log, const std::string& id, const std::string& path, bool with_bodies,
                    const BodyStore* bodies, BundleWritten* written) {
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  Status intact = check_records(log, id);
  if (!intact.ok()) {
    if (intact.is_not_found()) return intact;
    return intact.with_context("session " + id + " is damaged and was not bundled (`carapace verify " + id +
                               "` lists the damage)");
  }
  std::vector<Event> events;
  CARAPACE_RETURN_IF_ERROR(log.read(id, 1, UINT64_MAX, &events));
  if (events.empty()) return Status::not_found("no session '" + id + "'");
  BundleWritten w{.events = events.size()};
  std::vector<BundleBody> carried;
  if (with_bodies) {
    std::set<std::string> seen;
    for (const Event& e : events) {
      const std::string& ref = body_ref_of(e);
      if (ref.empty() || !seen.insert(ref).second) continue;
      BundleBody body{.ref = ref};
      Status s = bodies != nullptr ? bodies->get(ref, &body.bytes) : Status::not_found(ref);
      if (s.is_not_found()) {
        ++w.missing_bodies;
        continue;
      }
      if (!s.ok()) return s.with_context("reading body " + ref + " for the bundle");
      carried.push_back(std::move(body));
    }
  }
  w.bodies = carried.size();
  json header{{"format", kFormat}, {"version", carried.empty() ? 1u : kBundleVersion}, {"session", id},
              {"events", events.size()}};
  if (!carried.empty()) header["bodies"] = carried.size();
  std::string text = header.dump() + "\n";
  Digest128Builder digest;
  std::string payload;
  for (const Event& e : events) {
    payload.clear();
    encode_payload(e.body, payload);
    std::string line =
        json{{"seq", e.seq}, {"ts_us", e.ts_us}, {"type", e.type_number()}, {"payload", to_hex(payload)}}.dump() +
        "\n";
    digest.update(line);
    text += line;
  }
  for (const BundleBody& body : carried) {
    std::string line = json{{"body", body.ref}, {"bytes", to_hex(body.bytes)}}.dump() + "\n";
    digest.update(line);
    text += line;
  }
  json end{{"end", true}, {"events", events.size()}, {"digest", digest.finish().hex()}};
  if (!carried.empty()) end["bodies"] = carried.size();
  text += end.dump() + "\n";
  w.bytes = text.size();
  CARAPACE_RETURN_IF_ERROR(write_synced(path, text));
  if (written != nullptr) *written = w;
  return Status();
}

Status read_bundle(const std::string& path, Bundle* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found("cannot read the bundle " + path);
  auto bad = [&path](const std::string& why) {
    return Status::corruption("the bundle " + path + " " + why + "; it was not used");
  };
  std::string line;
  if (!std::getline(in, line)) return bad("is empty");
  json header = json::parse(line, nullptr, false);
  if (header.is_discarded() || !header.is_object() || header.value("format", "") != kFormat) {
    return bad("is not a Carapace bundle (its first line is not a bundle header)");
  }
  if (!header.contains("version") || !header["version"].is_number_unsigned()) return bad("has no version");
  uint64_t version = header["version"].get<uint64_t>();
  if (version > kBundleVersion) {
    return Status::invalid_argument("the bundle " + path + " is of version " + std::to_string(version) +
                                    "; this build reads version " + std::to_string(kBundleVersion) +
                                    " and older: use a newer carapace");
  }
  Bundle b;
  b.session = header.value("session", "");
  if (Status valid = keys::validate_session_id(b.session); !valid.ok()) return bad("names no valid session");
  Digest128Builder digest;
  bool ended = false;
  while (std::getline(in, line)) {
    json j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return bad("has a damaged line after event " + std::to_string(b.events.size()));
    }
    if (j.contains("end")) {
      uint64_t count = j.value("events", uint64_t{0});
      if (count != b.events.size()) {
        return bad("says it holds " + std::to_string(count) + " events but holds " +
                   std::to_string(b.events.size()));
      }
      if (j.value("bodies", uint64_t{0}) != b.bodies.size()) {
        return bad("says it holds " + std::to_string(j.value("bodies", uint64_t{0})) + " bodies but holds " +
                   std::to_string(b.bodies.size()));
      }
      if (j.value("digest", "") != digest.finish().hex()) return bad("was changed after it was written (digest mismatch)");
      ended = true;
      break;
    }
    digest.update(line + "\n");
    if (j.contains("body")) {
      BundleBody body;
      if (version < 2 || !j["body"].is_string() || !j.contains("bytes") || !j["bytes"].is_string() ||
          !from_hex(j["bytes"].get<std::string>(), &body.bytes)) {
        return bad("has a malformed body line after body " + std::to_string(b.bodies.size()));
      }
      body.ref = j["body"].get<std::string>();
      if (BodyStore::ref_of(body.bytes) != body.ref) {
        return bad("holds a body whose bytes do not match its key " + body.ref);
      }
      b.bodies.push_back(std::move(body));
      continue;
    }
    if (!b.bodies.empty()) return bad("has an event line after its bodies");
    Event e;
    std::string payload;
    if (!j.contains("seq") || !j["seq"].is_number_unsigned() || !j.contains("type") ||
        !j["type"].is_number_unsigned() || !j.contains("payload") || !j["payload"].is_string() ||
        !from_hex(j["payload"].get<std::string>(), &payload)) {
      return bad("has a malformed event line after event " + std::to_string(b.events.size()));
    }
    e.seq = j["seq"].get<uint64_t>();
    e.ts_us = j.value("ts_us", int64_t{0});
    uint64_t type = j["type"].get<uint64_t>();
    if (e.seq != b.events.size() + 1) return bad("skips from event " + std::to_string(b.events.size()) + " to seq " + std::to_string(e.seq));
    if (type == 0 || type > 0xFFFF || !decode_payload(static_cast<uint16_t>(type), payload, &e.body)) {
      return bad("has an event it cannot decode at seq " + std::to_string(e.seq));
    }
    b.events.push_back(std::move(e));
  }
  if (!ended) return bad("is truncated (it ends after " + std::to_string(b.events.size()) + " events, before its end line)");
  if (b.events.empty()) return bad("holds no events");
  *out = std::move(b);
  return Status();
}

Status import_bundle(EventLog* log, const Bundle& bundle, const std::string& as_id, BodyStore* bodies) {
  const std::string id = as_id.empty() ? bundle.session : as_id;
  CARAPACE_RETURN_IF_ERROR(keys::validate_session_id(id));
  uint64_t last = 0;
  CARAPACE_RETURN_IF_ERROR(log->last_seq(id, &last));
  if (last != 0) {
    return Status::invalid_argument("session '" + id + "' already exists here (" + std::to_string(last) +
                                    " events); import it under another id with --as ID");
  }
  Folder folder;
  std::vector<CheckpointEntry> checkpoints;
  for (const Event& e : bundle.events) {
    Status s = folder.add(e);
    if (!s.ok()) return s.with_context("the bundle's session does not verify; nothing was imported");
    if (const auto* c = get_if<TurnCommitted>(e)) {
      checkpoints.push_back(CheckpointEntry{.seq = e.seq, .turn = c->turn, .state_hash = c->state_hash});
    }
  }
  if (!bundle.bodies.empty()) {
    if (bodies == nullptr) return Status::invalid_argument("the bundle carries bodies but no body store was given");
    for (const BundleBody& body : bundle.bodies) {
      std::string ref;
      Status s = bodies->put(body.bytes, &ref);
      if (!s.ok()) return s.with_context("storing the bundle's body " + body.ref + "; nothing was imported");
    }
  }
  SessionMeta meta = meta_from_state(id, folder.committed(), bundle.events.back().ts_us, nullptr);
  meta.configured_seq = last_configured_seq(bundle.events);
  return log->append(AppendRequest{.session = id,
                                   .events = bundle.events,
                                   .durability = Durability::kSynced,
                                   .meta = &meta,
                                   .checkpoints = checkpoints});
}

}  // namespace carapace
