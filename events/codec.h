// The tagged field codec: one field list per struct drives binary encoding,
// decoding and JSON rendering.
//
// A struct opts in with a static `fields()` returning a tuple of Field{tag,
// name, &T::member}. The binary form is the Protocol Buffers wire format (no
// .proto compiler involved): each present field is a key varint (tag << 3 |
// kind) followed by a varint, a fixed64 or a length-prefixed byte string.
// Fields equal to their default are omitted; repeated fields repeat their key;
// nested structs are length-prefixed byte strings. A reader skips tags it does
// not know, so fields can be added in any later version without breaking old
// readers, and missing fields decode as their defaults.
//
// Tags are never reused: a removed field's tag is retired, not recycled.
// Header-only and pure; include it only from .cc files that encode or decode.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "base/digest.h"
#include "events/wire.h"

namespace carapace {

// A string whose content is JSON text (tool arguments). Stored as bytes;
// rendered as parsed JSON when it parses.
struct JsonText {
  std::string text;
  friend bool operator==(const JsonText&, const JsonText&) = default;
};

namespace codec {

enum Kind : uint8_t { kVarint = 0, kFixed64 = 1, kBytes = 2 };

template <class C, class M>
struct Field {
  uint32_t tag;
  std::string_view name;
  M C::*member;
};
// Clang before 17 does not deduce an aggregate's template arguments (P1816).
template <class C, class M>
Field(uint32_t, std::string_view, M C::*) -> Field<C, M>;

template <class T>
concept Described = requires {
  T::fields();
};

// A struct's field list, built once at compile time: calling fields() in a
// loop would build the tuple again on every call.
template <Described T>
inline constexpr auto kFieldsOf = T::fields();

template <class T>
struct IsVector : std::false_type {};
template <class T, class A>
struct IsVector<std::vector<T, A>> : std::true_type {};

template <class T>
constexpr bool is_varint_type = std::is_integral_v<T> || std::is_enum_v<T>;  // bool, ints and enums

// A growable byte buffer for encodings that are hashed and thrown away (the
// state hash, message digests): small fields are written in place, where
// std::string::append would copy each from the stack through memcpy.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // Room for `n` more bytes at the end; advance() then keeps what was written.
  [[gnu::always_inline]] char* room(size_t n) {
    if (capacity_ - size_ < n) [[unlikely]]
      grow(n);
    return data_.get() + size_;
  }
  void advance(size_t n) { size_ += n; }
  void append(std::string_view bytes) {
    if (bytes.empty()) return;
    std::memcpy(room(bytes.size()), bytes.data(), bytes.size());
    size_ += bytes.size();
  }
  // Inserts `n` zero bytes at `pos`.
  void insert_zeros(size_t pos, size_t n) {
    room(n);
    std::memmove(data_.get() + pos + n, data_.get() + pos, size_ - pos);
    std::memset(data_.get() + pos, 0, n);
    size_ += n;
  }
  void clear() { size_ = 0; }
  size_t size() const { return size_; }
  char* data() { return data_.get(); }
  std::string_view view() const { return {data_.get(), size_}; }

 private:
  void grow(size_t n) {
    size_t capacity = std::max<size_t>({capacity_ * 2, size_ + n, 256});
    auto bigger = std::make_unique<char[]>(capacity);
    if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_);
    data_ = std::move(bigger);
    capacity_ = capacity;
  }

  std::unique_ptr<char[]> data_;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

template <class Out>
concept Output = std::is_same_v<Out, std::string> || std::is_same_v<Out, Buffer>;

// Appends the encoding of `value` to a std::string or a Buffer; a field whose
// tag is `skip_tag`, or is above `max_tag`, is left out.
template <Output Out, Described T>
void encode(Out& out, const T& value, uint32_t skip_tag = 0, uint32_t max_tag = UINT32_MAX);

template <class M>
bool is_default(const M& v) {
  if constexpr (std::is_same_v<M, bool>)
    return !v;
  else if constexpr (is_varint_type<M>)
    return v == M{};
  else if constexpr (std::is_same_v<M, double>) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    return bits == 0;
  } else if constexpr (std::is_same_v<M, std::string>)
    return v.empty();
  else if constexpr (std::is_same_v<M, JsonText>)
    return v.text.empty();
  else if constexpr (std::is_same_v<M, Digest128>)
    return v.is_zero();
  else if constexpr (IsVector<M>::value)
    return v.empty();
  else
    return v == M{};  // a nested struct, omitted when all its fields are defaults
}

[[gnu::always_inline]] inline size_t store_key(char* p, uint32_t tag, Kind kind) {
  return wire::store_varint(p, (static_cast<uint64_t>(tag) << 3) | kind);
}

// Writes at most `max` (≤ 32) bytes through `write(char*) -> size_t`: in
// place into a Buffer; for a std::string, on the stack and appended once
// (byte by byte, every push_back would reload the string's pointer and size).
template <Output Out, class F>
[[gnu::always_inline]] inline void put_small(Out& out, size_t max, F&& write) {
  if constexpr (std::is_same_v<Out, Buffer>) {
    out.advance(write(out.room(max)));
  } else {
    char buf[32];
    out.append(buf, write(buf));
  }
}

// A field's key and its varint value.
template <Output Out>
[[gnu::always_inline]] inline void put_varint_field(Out& out, uint32_t tag, uint64_t v) {
  put_small(out, 20, [&](char* p) {
    size_t n = store_key(p, tag, kVarint);
    return n + wire::store_varint(p + n, v);
  });
}

template <Output Out>
void put_bytes(Out& out, uint32_t tag, std::string_view bytes) {
  put_small(out, 20, [&](char* p) {
    size_t n = store_key(p, tag, kBytes);
    return n + wire::store_varint(p + n, bytes.size());
  });
  out.append(bytes);
}

// Encodes one value (not a vector) under `tag`.
template <Output Out, class M>
void encode_one(Out& out, uint32_t tag, const M& v) {
  if constexpr (std::is_same_v<M, bool>) {
    put_varint_field(out, tag, v ? 1 : 0);
  } else if constexpr (std::is_enum_v<M>) {
    put_varint_field(out, tag, static_cast<uint64_t>(v));
  } else if constexpr (std::is_integral_v<M> && std::is_signed_v<M>) {
    put_varint_field(out, tag, wire::zigzag(v));
  } else if constexpr (std::is_integral_v<M>) {
    put_varint_field(out, tag, v);
  } else if constexpr (std::is_same_v<M, double>) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    put_small(out, 18, [&](char* p) {
      size_t n = store_key(p, tag, kFixed64);
      for (int i = 0; i < 8; ++i) p[n++] = static_cast<char>(bits >> (8 * i));
      return n;
    });
  } else if constexpr (std::is_same_v<M, std::string>) {
    put_bytes(out, tag, v);
  } else if constexpr (std::is_same_v<M, JsonText>) {
    put_bytes(out, tag, v.text);
  } else if constexpr (std::is_same_v<M, Digest128>) {
    put_small(out, 27, [&](char* p) {
      size_t n = store_key(p, tag, kBytes);
      p[n++] = 16;
      for (int i = 0; i < 8; ++i) p[n++] = static_cast<char>(v.hi >> (56 - 8 * i));
      for (int i = 0; i < 8; ++i) p[n++] = static_cast<char>(v.lo >> (56 - 8 * i));
      return n;
    });
  } else {
    static_assert(Described<M>, "field type has no encoding");
    // Length-prefixed nested message. Reserve one length byte and shift the
    // body if its length needs more (rare: bodies under 128 bytes fit).
    put_small(out, 11, [&](char* p) {
      size_t n = store_key(p, tag, kBytes);
      p[n++] = 0;
      return n;
    });
    size_t len_pos = out.size() - 1;
    size_t body_start = out.size();
    encode(out, v);
    size_t body_len = out.size() - body_start;
    if (body_len < 0x80) [[likely]] {
      out.data()[len_pos] = static_cast<char>(body_len);
      return;
    }
    size_t len_size = wire::varint_size(body_len);
    if constexpr (std::is_same_v<Out, Buffer>) {
      out.insert_zeros(len_pos + 1, len_size - 1);
    } else {
      out.insert(len_pos + 1, len_size - 1, '\0');
    }
    wire::store_varint(out.data() + len_pos, body_len);
  }
}

template <Output Out, Described T>
void encode(Out& out, const T& value, uint32_t skip_tag, uint32_t max_tag) {
  std::apply(
      [&](const auto&... f) {
        (
            [&] {
              const auto& v = value.*(f.member);
              using M = std::remove_cvref_t<decltype(v)>;
              if (f.tag == skip_tag || f.tag > max_tag || is_default(v)) return;
              if constexpr (IsVector<M>::value) {
                for (const auto& item : v) encode_one(out, f.tag, item);
              } else {
                encode_one(out, f.tag, v);
              }
            }(),
            ...);
      },
      kFieldsOf<T>);
}

// Decodes `in` into *out (which should hold defaults). Unknown tags are
// skipped, and so are the tags set in `skip_tags` (bit t: tag t, below 64):
// their values are stepped over, framing checked, content not decoded.
// Returns false if the bytes are malformed or a known field has the wrong kind.
template <Described T>
bool decode(std::string_view in, T* out, uint64_t skip_tags = 0);

// Decodes one value of the field's type from `in` given the wire kind.
template <class M>
bool decode_one(Kind kind, std::string_view& in, M* v) {
  if constexpr (is_varint_type<M>) {
    uint64_t raw;
    if (kind != kVarint || !wire::get_varint(in, &raw)) return false;
    if constexpr (std::is_same_v<M, bool>) {
      *v = raw != 0;
    } else if constexpr (std::is_enum_v<M>) {
      *v = static_cast<M>(raw);
    } else if constexpr (std::is_signed_v<M>) {
      *v = static_cast<M>(wire::unzigzag(raw));
    } else {
      *v = static_cast<M>(raw);
    }
    return true;
  } else if constexpr (std::is_same_v<M, double>) {
    if (kind != kFixed64 || in.size() < 8) return false;
    uint64_t bits = wire::load_fixed64_le(in.data());
    std::memcpy(v, &bits, 8);
    in.remove_prefix(8);
    return true;
  } else {
    std::string_view bytes;
    if (kind != kBytes || !wire::get_bytes(in, &bytes)) return false;
    if constexpr (std::is_same_v<M, std::string>) {
      v->assign(bytes);
      return true;
    } else if constexpr (std::is_same_v<M, JsonText>) {
      v->text.assign(bytes);
      return true;
    } else if constexpr (std::is_same_v<M, Digest128>) {
      return Digest128::from_bytes(bytes, v);
    } else {
      return decode(bytes, v);
    }
  }
}

inline bool skip_value(Kind kind, std::string_view& in) {
  switch (kind) {
    case kVarint: {
      uint64_t ignored;
      return wire::get_varint(in, &ignored);
    }
    case kFixed64:
      if (in.size() < 8) return false;
      in.remove_prefix(8);
      return true;
    case kBytes: {
      std::string_view ignored;
      return wire::get_bytes(in, &ignored);
    }
  }
  return false;
}

template <Described T>
bool decode(std::string_view in, T* out, uint64_t skip_tags) {
  while (!in.empty()) {
    uint64_t key;
    if (!wire::get_varint(in, &key)) return false;
    auto tag = static_cast<uint32_t>(key >> 3);
    auto raw_kind = static_cast<uint8_t>(key & 7);
    if (raw_kind > kBytes) return false;
    auto kind = static_cast<Kind>(raw_kind);
    if (tag < 64 && ((skip_tags >> tag) & 1) != 0) {
      if (!skip_value(kind, in)) return false;
      continue;
    }
    int outcome = 0;  // 0 = no field has this tag, 1 = decoded, -1 = malformed
    std::apply(
        [&](const auto&... f) {
          (void)((f.tag == tag ? (
                                     outcome =
                                         [&] {
                                           auto& v = out->*(f.member);
                                           using M = std::remove_cvref_t<decltype(v)>;
                                           if constexpr (IsVector<M>::value) {
                                             typename M::value_type item{};
                                             if (!decode_one(kind, in, &item)) return -1;
                                             v.push_back(std::move(item));
                                             return 1;
                                           } else {
                                             return decode_one(kind, in, &v) ? 1 : -1;
                                           }
                                         }(),
                                     true)
                               : false) ||
                 ...);
        },
        kFieldsOf<T>);
    if (outcome < 0) return false;
    if (outcome == 0 && !skip_value(kind, in)) return false;
  }
  return true;
}

}  // namespace codec
}  // namespace carapace
