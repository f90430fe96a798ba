// <carapace/scheduler.h>: for a program that lends the runtime its own CAF
// actor system (Runtime::Options::system): configure_scheduler(cfg) gives
// that system the scheduler the runtime's own system uses (idle workers on a
// condition variable, a clock that wakes only for its earliest deadline).
#pragma once

#include "actors/actor_scheduler.h"
