// Stop signals: SIGINT and SIGTERM for the `carapace` command.
//
// A command that runs sessions arms them: a SIGINT or SIGTERM then asks it to
// stop, and it stops the way its runtime's destructor does (sessions stopped,
// every tool process killed, the log closed) and exits 128 + the signal, its
// sessions resumable. A command that has not armed them dies of the signal as
// it would without this (its tool processes die with it all the same: their
// guards get PR_SET_PDEATHSIG).
//
// Thread safety: install once, first thing in main, before any thread starts
// (every thread inherits the blocked mask, so only the watcher thread takes
// the signals). The rest may be called from any thread.
#pragma once

namespace carapace::cli {

// Blocks SIGINT and SIGTERM and starts the thread that waits for them.
void install_stop_signals();

// From now on a SIGINT or SIGTERM is remembered, not fatal.
void arm_stop_signals();

// A SIGINT or SIGTERM is fatal again (`chat` at its prompt, where nothing
// runs). One received while armed is still reported by stop_signal().
void disarm_stop_signals();

// The signal received while armed, or 0.
int stop_signal();

// The signal received while armed, or 0; forgotten, so that the next one
// is seen (`chat`, which goes on after a Ctrl-C).
int take_stop_signal();

}  // namespace carapace::cli
