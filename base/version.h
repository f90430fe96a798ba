// The version of Carapace: these macros are the headers' (the top-level
// CMakeLists.txt refuses to configure when they disagree with its project
// version), carapace::version() is the linked library's.
#pragma once

#define CARAPACE_VERSION_MAJOR 0
#define CARAPACE_VERSION_MINOR 1
#define CARAPACE_VERSION_PATCH 0
#define CARAPACE_VERSION_STRING "0.1.0"

namespace carapace {

// "MAJOR.MINOR.PATCH" of the library this program is linked with.
const char* version();

}  // namespace carapace
