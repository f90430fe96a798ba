// <carapace/events.h>: the events a session appends (Event, its type and
// payloads) and the folded SessionState, as subscribers and
// Runtime::read_events hand them over. Read-only: only a session writes its
// events.
#pragma once

#include "events/events.h"
#include "events/session_state.h"
