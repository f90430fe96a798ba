// <carapace/runtime.h>: Carapace embedded in a C++ program (docs/embedding.md).
// Includes the whole public surface: the runtime, its options, sessions,
// tools, hooks, providers, events (read-only), replay reports, logging,
// the version and Status.
#pragma once

#include "carapace/events.h"
#include "carapace/hooks.h"
#include "carapace/logging.h"
#include "carapace/options.h"
#include "carapace/provider.h"
#include "carapace/replay.h"
#include "carapace/scheduler.h"
#include "carapace/sessions.h"
#include "carapace/status.h"
#include "carapace/tools.h"
#include "carapace/version.h"
#include "runtime/runtime.h"
