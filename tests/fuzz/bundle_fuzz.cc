// Fuzz target: the bundle file (read_bundle, replay/bundle.h), what `carapace
// replay FILE` and `bundle import` read from another machine, and what an
// import does next with a bundle that reads: fold its events, as the check
// before an import does (hashes taken on trust, then verified), and write it
// out again.
//
// read_bundle reads a path, and wants a regular file: the input is written
// to a memory file (memfd) and read through /proc/self/fd. A bundle ends
// with a digest of its lines that libFuzzer cannot forge, so each input is
// read as it is, then again with its end line's digest made right.
//
// Checked: a bundle that reads has events with seqs 1, 2, 3..., bodies whose
// refs are their digests, and written out again it reads back the same.
#include <sys/mman.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/bounded_json.h"
#include "base/digest.h"
#include "events/fold.h"
#include "events/payload.h"
#include "replay/bundle.h"
#include "storage/body_store.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using namespace carapace;
namespace fs = std::filesystem;

// Where the input is put for read_bundle: a file in memory, one for the run.
class MemoryFile {
 public:
  MemoryFile() : fd_(::memfd_create("bundle_fuzz", MFD_CLOEXEC)) {
    fuzz::check(fd_ >= 0, "cannot create a memory file");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }

  const std::string& write(std::string_view bytes) {
    fuzz::check(::ftruncate(fd_, 0) == 0, "cannot empty the memory file");
    for (size_t done = 0; done < bytes.size();) {
      ssize_t n = ::pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
      fuzz::check(n > 0, "cannot write the memory file");
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_;
};

// A directory for the bundles written back, removed when the run ends.
class ScratchDir {
 public:
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "carapace-bundle-fuzz-XXXXXX").string();
    fuzz::check(::mkdtemp(pattern.data()) != nullptr, "cannot create a scratch directory");
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const char* name) const { return (fs::path(path_) / name).string(); }

 private:
  std::string path_;
};

// `input` with the digest of its end line (the first line after the header
// that holds "end") computed over the lines between, as write_bundle_file
// does; unchanged when no such line parses.
std::string with_digest_made_right(std::string_view input) {
  std::string out;
  Digest128Builder digest;
  size_t at = input.find('\n');
  if (at == std::string_view::npos) return std::string(input);
  out.append(input.substr(0, at + 1));
  for (size_t from = at + 1; from < input.size();) {
    size_t end = input.find('\n', from);
    std::string_view line =
        input.substr(from, end == std::string_view::npos ? std::string_view::npos : end - from);
    // Only a line that names "end" is parsed: event lines are long and many.
    nlohmann::json j =
        line.find("\"end\"") != std::string_view::npos ? parse_stored_json(line) : nlohmann::json();
    if (j.is_object() && j.contains("end")) {
      j["digest"] = digest.finish().hex();
      out.append(j.dump());
      if (end != std::string_view::npos) out.append(input.substr(end));
      return out;
    }
    digest.update(line);
    digest.update("\n");
    if (end == std::string_view::npos) break;
    out.append(line).append("\n");
    from = end + 1;
  }
  return std::string(input);
}

// Compared as bytes: a payload may hold a NaN, which is not equal to itself.
std::string payload_of(const Event& e) {
  std::string out;
  encode_payload(e.body, out);
  return out;
}

void fold(const Bundle& bundle, bool verify_hashes) {
  Folder folder(Folder::Options{.verify_hashes = verify_hashes});
  for (const Event& e : bundle.events) {
    if (!folder.add(e).ok()) return;
  }
  SessionState state;
  (void)folder.state_with_uncommitted(&state);
}

void read_and_use(MemoryFile& file, std::string_view input) {
  static const ScratchDir scratch;
  Bundle bundle;
  if (!read_bundle(file.write(input), &bundle).ok()) return;
  for (size_t i = 0; i < bundle.events.size(); ++i) {
    fuzz::check(bundle.events[i].seq == i + 1, "a bundle's events do not have seqs 1, 2, 3...");
  }
  for (const BundleBody& body : bundle.bodies) {
    fuzz::check(BodyStore::ref_of(body.bytes) == body.ref, "a bundle's body is not what its ref says");
  }
  fold(bundle, false);
  fold(bundle, true);

  const std::string path = scratch.file("again.bundle");
  fuzz::check(write_bundle_file(bundle, path).ok(), "a bundle that reads cannot be written");
  Bundle again;
  fuzz::check(read_bundle(path, &again).ok(), "a bundle written again does not read");
  bool same = again.session == bundle.session && again.events.size() == bundle.events.size() &&
              again.bodies.size() == bundle.bodies.size();
  for (size_t i = 0; same && i < again.events.size(); ++i) {
    same = again.events[i].seq == bundle.events[i].seq && again.events[i].ts_us == bundle.events[i].ts_us &&
           payload_of(again.events[i]) == payload_of(bundle.events[i]);
  }
  for (size_t i = 0; same && i < again.bodies.size(); ++i) {
    same = again.bodies[i].ref == bundle.bodies[i].ref && again.bodies[i].bytes == bundle.bodies[i].bytes;
  }
  fuzz::check(same, "a bundle written again reads back as another");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static MemoryFile file;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  read_and_use(file, input);
  std::string fixed = with_digest_made_right(input);
  if (fixed != input) read_and_use(file, fixed);
  return 0;
}
