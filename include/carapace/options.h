// <carapace/options.h>: Config, the runtime's configuration (docs/config.md),
// as Runtime::Options carries it.
#pragma once

#include "runtime/config.h"
