#include "storage/wal_scan.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/crc32c.h"

namespace carapace {
namespace {

constexpr uint64_t kBlockSize = 32768;
constexpr uint64_t kHeaderSize = 7;            // checksum, length, type
constexpr uint64_t kRecyclableHeaderSize = 11;  // and the log number

bool recyclable(uint8_t type) { return (type >= 5 && type <= 8) || type == 11; }
bool known(uint8_t type) { return type >= 1 && type <= 11; }

uint32_t fixed32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | static_cast<uint32_t>(u[1]) << 8 | static_cast<uint32_t>(u[2]) << 16 |
         static_cast<uint32_t>(u[3]) << 24;
}

bool all_zero(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) { return c == 0; });
}

}  // namespace

WalScan scan_wal(std::string_view bytes) {
  WalScan r;
  r.bytes = bytes.size();
  uint64_t at = 0;
  auto damage = [&](std::string why) {
    r.damaged = true;
    r.offset = at;
    r.reason = std::move(why);
    return r;
  };
  while (at < bytes.size()) {
    uint64_t left_in_block = kBlockSize - at % kBlockSize;
    if (left_in_block < kHeaderSize) {  // a block's trailer
      at += left_in_block;
      continue;
    }
    if (bytes.size() - at < kHeaderSize) {
      if (all_zero(bytes.substr(at))) break;
      r.cut_short = true;
      r.offset = at;
      r.reason = "a record header cut short";
      return r;
    }
    const char* h = bytes.data() + at;
    uint32_t length = static_cast<uint8_t>(h[4]) | static_cast<uint32_t>(static_cast<uint8_t>(h[5])) << 8;
    auto type = static_cast<uint8_t>(h[6]);
    if (type == 0 && length == 0) {
      // Preallocated, never written: the rest of the file must be zeros.
      if (all_zero(bytes.substr(at))) break;
      return damage("a zero record followed by data");
    }
    if (!known(type)) return damage("an unknown record type " + std::to_string(type));
    uint64_t header = recyclable(type) ? kRecyclableHeaderSize : kHeaderSize;
    if (header + length > left_in_block) {
      return damage("a record length of " + std::to_string(length) + " that runs past its block");
    }
    if (at + header + length > bytes.size()) {
      r.cut_short = true;
      r.offset = at;
      r.reason = "a record cut short by the end of the file";
      return r;
    }
    uint32_t crc = crc32c::extend(0, h + 6, 1);
    crc = crc32c::extend(crc, h + kHeaderSize, header - kHeaderSize + length);
    if (crc32c::unmask(fixed32(h)) != crc) return damage("a checksum mismatch");
    ++r.records;
    at += header + length;
  }
  return r;
}

void read_wal_records(std::string_view bytes, const std::function<void(std::string_view)>& record,
                      uint64_t* damaged) {
  uint64_t at = 0;
  std::string pieces;
  bool in_pieces = false;
  while (at + kHeaderSize <= bytes.size()) {
    uint64_t left_in_block = kBlockSize - at % kBlockSize;
    if (left_in_block < kHeaderSize) {
      at += left_in_block;
      continue;
    }
    const char* h = bytes.data() + at;
    uint32_t length = static_cast<uint8_t>(h[4]) | static_cast<uint32_t>(static_cast<uint8_t>(h[5])) << 8;
    auto type = static_cast<uint8_t>(h[6]);
    if (type == 0 && length == 0) {
      at += left_in_block;  // preallocated space
      continue;
    }
    uint64_t header = recyclable(type) ? kRecyclableHeaderSize : kHeaderSize;
    bool fits = known(type) && header + length <= left_in_block && at + header + length <= bytes.size();
    bool intact = false;
    if (fits) {
      uint32_t crc = crc32c::extend(0, h + 6, 1);
      crc = crc32c::extend(crc, h + kHeaderSize, header - kHeaderSize + length);
      intact = crc32c::unmask(fixed32(h)) == crc;
    }
    if (!intact) {
      if (at + header + length > bytes.size() && known(type)) break;  // a torn tail
      ++*damaged;
      in_pieces = false;
      pieces.clear();
      // Resynchronise at the next offset in this block where an intact record
      // starts (its CRC32C makes a false start vanishingly unlikely), rather
      // than give up the rest of the block as RocksDB's reader does.
      uint64_t block_end = std::min<uint64_t>(at + left_in_block, bytes.size());
      uint64_t next = block_end;
      for (uint64_t c = at + 1; c + kHeaderSize <= block_end; ++c) {
        const char* ch = bytes.data() + c;
        uint32_t len = static_cast<uint8_t>(ch[4]) | static_cast<uint32_t>(static_cast<uint8_t>(ch[5])) << 8;
        auto t = static_cast<uint8_t>(ch[6]);
        if (!known(t)) continue;
        uint64_t hs = recyclable(t) ? kRecyclableHeaderSize : kHeaderSize;
        if (c + hs + len > block_end) continue;
        uint32_t crc = crc32c::extend(0, ch + 6, 1);
        crc = crc32c::extend(crc, ch + kHeaderSize, hs - kHeaderSize + len);
        if (crc32c::unmask(fixed32(ch)) == crc) {
          next = c;
          break;
        }
      }
      at = next;
      continue;
    }
    std::string_view payload(h + header, length);
    switch (type) {
      case 1: case 5:  // full
        in_pieces = false;
        pieces.clear();
        record(payload);
        break;
      case 2: case 6:  // first
        pieces.assign(payload);
        in_pieces = true;
        break;
      case 3: case 7:  // middle
        if (in_pieces) pieces.append(payload);
        break;
      case 4: case 8:  // last
        if (in_pieces) {
          pieces.append(payload);
          record(pieces);
        }
        in_pieces = false;
        pieces.clear();
        break;
      default:  // metadata records (compression, timestamp sizes)
        break;
    }
    at += header + length;
  }
}

Status scan_wal_file(const std::string& path, WalScan* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error("cannot read " + path);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::io_error("cannot read " + path);
  *out = scan_wal(bytes);
  return Status();
}

std::string describe_wal_damage(const std::string& db_dir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> wals;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(db_dir, ec)) {
    if (entry.path().extension() == ".log") wals.push_back(entry.path());
  }
  std::sort(wals.begin(), wals.end());  // zero-padded numbers: oldest first
  for (const auto& wal : wals) {
    WalScan scan;
    if (!scan_wal_file(wal.string(), &scan).ok() || !scan.damaged) continue;
    return "file " + wal.filename().string() + ": " + scan.reason + " in the record at byte " +
           std::to_string(scan.offset) + " of " + std::to_string(scan.bytes);
  }
  return "";
}

}  // namespace carapace
