// <carapace/logging.h>: where the library's log lines go — by default
// warnings and errors on stderr, nothing on stdout; a sink callback or an
// spdlog logger of the program's own takes them over (docs/embedding.md).
#pragma once

#include "base/log_sink.h"
