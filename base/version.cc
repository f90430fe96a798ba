#include "base/version.h"

namespace carapace {

const char* version() { return CARAPACE_VERSION_STRING; }

}  // namespace carapace
