// <carapace/sessions.h>: what starts a session (SessionOptions), how it stands
// when its loop stops (SessionOutcome) and the pieces of a streamed response
// (StreamDelta).
#pragma once

#include "actors/messages.h"
#include "runtime/session_options.h"
