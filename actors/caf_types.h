// The actor system's vocabulary: atoms, typed actor interfaces (CAF 0.17
// style), and how messages are inspected for serialization.
//
// Every message type is inspectable (none is whitelisted as unsafe), so the
// same typed messages can cross nodes through CAF's io middleman later. A
// struct with a field list is inspected field by field; an Event travels as
// its type number and its encoded payload (events/payload.h).
//
// Heavy: includes CAF. Include it from actor implementation files only.
#pragma once

#include <caf/all.hpp>

#include <tuple>

#include "actors/hook/hooks.h"
#include "actors/messages.h"
#include "events/payload.h"

namespace carapace {

// ---- atoms (at most 10 characters) ------------------------------------------
using start_atom = caf::atom_constant<caf::atom("start")>;
using wait_atom = caf::atom_constant<caf::atom("wait")>;
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using durable_atom = caf::atom_constant<caf::atom("durable")>;
using subscribe_atom = caf::atom_constant<caf::atom("subscribe")>;
using deliver_atom = caf::atom_constant<caf::atom("deliver")>;
using worker_atom = caf::atom_constant<caf::atom("worker")>;
using flush_atom = caf::atom_constant<caf::atom("flush")>;
using close_atom = caf::atom_constant<caf::atom("close")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;
using expire_atom = caf::atom_constant<caf::atom("expire")>;

// ---- inspection --------------------------------------------------------------
template <class Inspector, codec::Described T>
typename Inspector::result_type inspect(Inspector& f, T& x) {
  return std::apply([&](auto... field) { return f(x.*(field.member)...); }, T::fields());
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, JsonText& x) {
  return f(x.text);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Digest128& x) {
  return f(x.hi, x.lo);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Event& x) {
  uint16_t type = x.type_number();
  std::string payload;
  if constexpr (Inspector::reads_state) encode_payload(x.body, payload);
  auto load = [&]() -> caf::error {
    if (!decode_payload(type, payload, &x.body)) return caf::make_error(caf::sec::invalid_argument);
    return caf::none;
  };
  return f(x.seq, x.ts_us, type, payload, caf::meta::load_callback(load));
}

// An event a session appended, for its subscribers.
struct EventNotice {
  std::string session_id;
  Event event;

  static constexpr auto fields() {
    return std::tuple{codec::Field{1, "session_id", &EventNotice::session_id},
                      codec::Field{2, "event", &EventNotice::event}};
  }
};

// ---- typed interfaces ----------------------------------------------------------

// Receives the pieces of a streamed model response.
using DeltaSinkActor = caf::typed_actor<caf::reacts_to<StreamDelta>>;

// One LLM backend; the reply arrives after the (possibly simulated) latency.
using ProviderActor = caf::typed_actor<caf::replies_to<ProviderRequest, DeltaSinkActor>::with<ProviderReply>>;
using ProviderSupervisorActor = ProviderActor::extend<caf::replies_to<worker_atom>::with<ProviderActor>>;

// Runs tool calls.
using ToolActor = caf::typed_actor<caf::replies_to<ToolInvocation>::with<ToolOutcome>>;
// cancel: trip the stop tokens of a session's calls in flight; expire: a
// call's time-out (its own timer).
using ToolSupervisorActor = ToolActor::extend<caf::replies_to<worker_atom, std::string>::with<ToolActor>,
                                              caf::reacts_to<cancel_atom, std::string>,
                                              caf::reacts_to<expire_atom, uint64_t, bool>>;

// Runs the hooks matching an input and resolves their decisions.
using HookActor = caf::typed_actor<caf::replies_to<HookInput>::with<HookVerdict>>;

// Hears a session's events as they are appended, and its streamed deltas.
// Answers flush once it has handled everything sent to it before; quits on
// close, which its session sends after everything else when it closes.
using SubscriberActor = caf::typed_actor<caf::reacts_to<EventNotice>, caf::reacts_to<StreamDelta>,
                                         caf::replies_to<flush_atom>::with<bool>, caf::reacts_to<close_atom>>;

// One agent session: the only writer of its events.
using SessionActor =
    caf::typed_actor<caf::reacts_to<start_atom>,                        // run from where the log stands
                     caf::replies_to<UserInput>::with<InputAck>,        // another user message, once durable
                     caf::replies_to<ApprovalAnswer>::with<ApprovalReply>,  // a decision, once durable
                     caf::replies_to<wait_atom>::with<SessionOutcome>,  // answered once the loop stops
                     caf::reacts_to<subscribe_atom, SubscriberActor>,
                     caf::reacts_to<StreamDelta>,                     // from the provider
                     caf::reacts_to<retry_atom, uint64_t, uint32_t>,  // backoff elapsed: turn, attempt
                     // a durable write completed: token, ok, error
                     caf::reacts_to<durable_atom, uint64_t, bool, std::string>,
                     caf::reacts_to<close_atom>>;  // quit if idle (its memory is released)

}  // namespace carapace
