// The scheduler of Carapace's actor systems: CAF 0.17's work stealing, whose
// idle workers wait on a condition variable, with a clock that wakes its
// thread only when the earliest deadline comes sooner.
//
// CAF 0.17's own clock hands every timer operation to its thread through a
// queue and wakes that thread for each: a request with a timeout costs two
// wakes (set, then cancelled by the answer), a delayed message one. A turn
// of a session sets and cancels several (the model call's timeout, the tool
// call's backstop and deadline), so on two cores the clock thread took the
// CPU from the session's worker several times a turn. Here a set or cancel
// changes the schedule under a mutex, and only a deadline earlier than the
// one the thread waits for wakes it; a cancelled timer is simply removed.
// Timers fire as before: a request's timeout as sec::request_timeout, a
// delayed message as a message, in deadline order, from the clock's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace caf {
class actor_system;
class actor_system_config;
}  // namespace caf

namespace carapace {

// Makes a system built from `cfg` use this scheduler (and idle workers wait
// on a condition variable: "work-stealing.moderate-poll-attempts" 0).
// Call before the actor_system is constructed.
void configure_scheduler(caf::actor_system_config& cfg);

// How many times the clock's thread of `system` woke to look at its
// schedule; nullopt if the system does not use this scheduler.
std::optional<uint64_t> scheduler_clock_wakes(caf::actor_system& system);

// How many timers the clock of `system` holds (time-outs set and not
// cancelled, delayed messages not yet delivered); nullopt if the system does
// not use this scheduler.
std::optional<size_t> scheduler_pending_timers(caf::actor_system& system);

}  // namespace carapace
