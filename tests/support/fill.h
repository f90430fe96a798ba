// fill(): sets every field of a described struct (events/codec.h) to a
// non-default value derived from `salt`, recursively, so round-trip tests
// cover every field of every type without listing them by hand.
#pragma once

#include <string>
#include <type_traits>

#include "events/codec.h"

namespace carapace::testing {

template <class M>
void fill(M& v, uint64_t salt) {
  if constexpr (codec::IsVector<M>::value) {
    v.resize(2);
    fill(v[0], salt + 1);
    fill(v[1], salt + 2);
  } else if constexpr (std::is_same_v<M, bool>) {
    v = true;
  } else if constexpr (std::is_enum_v<M>) {
    v = static_cast<M>(1 + salt % 2);
  } else if constexpr (std::is_integral_v<M> && std::is_signed_v<M>) {
    v = -static_cast<M>(1000 + salt);
  } else if constexpr (std::is_integral_v<M>) {
    v = static_cast<M>(300 + salt * 977);
  } else if constexpr (std::is_same_v<M, double>) {
    v = 0.125 + static_cast<double>(salt);
  } else if constexpr (std::is_same_v<M, std::string>) {
    v = "value \xc3\xbc " + std::to_string(salt) + std::string(salt % 3 == 0 ? 200 : 3, 'x');
  } else if constexpr (std::is_same_v<M, JsonText>) {
    v.text = R"({"key":)" + std::to_string(salt) + "}";
  } else if constexpr (std::is_same_v<M, Digest128>) {
    v = Digest128{salt + 1, ~salt};
  } else {
    uint64_t i = 0;
    std::apply([&](const auto&... f) { (fill(v.*(f.member), salt * 31 + ++i), ...); }, M::fields());
  }
}

}  // namespace carapace::testing
