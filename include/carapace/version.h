// <carapace/version.h>: the version of these headers (CARAPACE_VERSION_*)
// and of the library linked (carapace::version()); the two differ only when
// a program is built against one install and linked with another.
#pragma once

#include "base/version.h"
