#include <boost/test/unit_test.hpp>

#include <random>

#include "base/crc32c.h"
#include "base/digest.h"
#include "events/wire.h"

using namespace carapace;

BOOST_AUTO_TEST_SUITE(wire_tests)

BOOST_AUTO_TEST_CASE(varint_round_trips_edge_values) {
  for (uint64_t v : {uint64_t{0}, uint64_t{1}, uint64_t{127}, uint64_t{128}, uint64_t{16383}, uint64_t{16384},
                     uint64_t{1} << 35, UINT64_MAX - 1, UINT64_MAX}) {
    std::string buf;
    wire::put_varint(buf, v);
    BOOST_TEST(buf.size() == wire::varint_size(v));
    std::string_view in = buf;
    uint64_t out = 0;
    BOOST_TEST(wire::get_varint(in, &out));
    BOOST_TEST(out == v);
    BOOST_TEST(in.empty());
  }
}

BOOST_AUTO_TEST_CASE(varint_rejects_truncated_and_overlong) {
  std::string buf;
  wire::put_varint(buf, UINT64_MAX);
  for (size_t n = 0; n < buf.size(); ++n) {
    std::string_view in(buf.data(), n);
    uint64_t out = 42;
    BOOST_TEST(!wire::get_varint(in, &out));
    BOOST_TEST(out == 42u);
    BOOST_TEST(in.size() == n);  // nothing consumed
  }
  std::string overlong(10, '\xff');
  overlong += '\x01';
  std::string_view in = overlong;
  uint64_t out;
  BOOST_TEST(!wire::get_varint(in, &out));
}

BOOST_AUTO_TEST_CASE(zigzag_round_trips) {
  for (int64_t v : {int64_t{0}, int64_t{-1}, int64_t{1}, INT64_MIN, INT64_MAX}) {
    BOOST_TEST(wire::unzigzag(wire::zigzag(v)) == v);
  }
  BOOST_TEST(wire::zigzag(-1) == 1u);
}

BOOST_AUTO_TEST_CASE(big_endian_keys_sort_numerically) {
  std::string a, b;
  wire::put_fixed64_be(a, 255);
  wire::put_fixed64_be(b, 256);
  BOOST_TEST((a < b));
  BOOST_TEST(wire::load_fixed64_be(b.data()) == 256u);
}

BOOST_AUTO_TEST_CASE(crc32c_matches_known_vectors) {
  BOOST_TEST(crc32c::value("123456789") == 0xe3069283u);
  BOOST_TEST(crc32c::value(std::string(32, '\0')) == 0x8a9136aau);
  BOOST_TEST(crc32c::extend_portable(0, "123456789", 9) == 0xe3069283u);
}

BOOST_AUTO_TEST_CASE(crc32c_hardware_and_portable_agree) {
  std::mt19937_64 rng(3);
  for (size_t len : {0, 1, 7, 8, 9, 63, 64, 1000, 4097}) {
    std::string data(len, '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    uint32_t seed = static_cast<uint32_t>(rng());
    BOOST_TEST(crc32c::extend(seed, data.data(), len) == crc32c::extend_portable(seed, data.data(), len));
    // Extending piecewise equals one pass.
    uint32_t split =
        crc32c::extend(crc32c::extend(0, data.data(), len / 2), data.data() + len / 2, len - len / 2);
    BOOST_TEST(split == crc32c::extend(0, data.data(), len));
  }
}

BOOST_AUTO_TEST_CASE(crc_mask_round_trips) {
  for (uint32_t v : {0u, 1u, 0xdeadbeefu, 0xffffffffu}) {
    BOOST_TEST(crc32c::unmask(crc32c::mask(v)) == v);
    BOOST_TEST(crc32c::mask(v) != v);
  }
}

BOOST_AUTO_TEST_CASE(digest_hex_and_bytes_round_trip) {
  Digest128 d = digest128("hello");
  Digest128 back;
  BOOST_TEST(Digest128::from_hex(d.hex(), &back));
  BOOST_TEST((back == d));
  BOOST_TEST(Digest128::from_bytes(d.bytes(), &back));
  BOOST_TEST((back == d));
  BOOST_TEST(!Digest128::from_hex("xyz", &back));
  Digest128Builder builder;
  builder.update("hel");
  builder.update("lo");
  BOOST_TEST((builder.finish() == d));
}

BOOST_AUTO_TEST_SUITE_END()
