// <carapace/replay.h>: what Runtime::replay reports (docs/replay.md):
// ReplayReport, identical or the first divergence with its field diffs.
#pragma once

#include "replay/replay_report.h"
