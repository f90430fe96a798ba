// A fault a fault plan injected, reported with the reply it affected (a
// provider's, a tool's, the hooks') so that the session records it as a
// fault.injected event.
#pragma once

#include <string>
#include <tuple>

#include "base/fault_injection.h"
#include "events/codec.h"

namespace carapace {

struct FaultNote {
  std::string point;
  std::string action;
  std::string detail;

  static constexpr auto fields() {
    return std::tuple{codec::Field{1, "point", &FaultNote::point},
                      codec::Field{2, "action", &FaultNote::action},
                      codec::Field{3, "detail", &FaultNote::detail}};
  }
  friend bool operator==(const FaultNote&, const FaultNote&) = default;
};

// The note of `fault`, fired at `point`; `about` (a hook's name) leads the detail.
inline FaultNote fault_note(FaultPoint point, const Fault& fault, const std::string& about = "") {
  return FaultNote{.point = std::string(fault_point_name(point)),
                   .action = std::string(fault_action_name(fault.action)),
                   .detail = about.empty() ? fault.describe() : about + ": " + fault.describe()};
}

}  // namespace carapace
