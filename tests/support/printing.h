// Lets Boost.Test print the project's value types in failure messages.
#pragma once

#include <ostream>

#include "base/digest.h"
#include "base/status.h"

namespace carapace {

inline std::ostream& boost_test_print_type(std::ostream& os, const Status& s) { return os << s.to_string(); }
inline std::ostream& boost_test_print_type(std::ostream& os, const Digest128& d) { return os << d.hex(); }

}  // namespace carapace

// Asserts a Status is OK, printing it otherwise.
#define CHECK_OK(expr)                                                          \
  do {                                                                          \
    ::carapace::Status check_ok_status_ = (expr);                               \
    BOOST_REQUIRE_MESSAGE(check_ok_status_.ok(), check_ok_status_.to_string()); \
  } while (0)
