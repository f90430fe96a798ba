// <carapace/hooks.h>: a hook the agent loop consults (HookDefinition, what it
// is told, HookInput, and what it decides, HookDecision).
#pragma once

#include "actors/hook/hooks.h"
