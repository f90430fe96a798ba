// DbLock: who holds a RocksDB database's lock, asked of the kernel rather
// than read out of an error message.
//
// RocksDB locks a database with a POSIX record lock on its LOCK file; a
// second process that opens it as a writer fails with an I/O error. probe()
// asks the kernel (F_GETLK) which process holds that lock, so that a refusal
// can say "pid 4242 is writing" and be classified as busy by its cause.
// POSIX locks belong to a process, so the kernel does not report a lock this
// process holds: EventLog tracks its own open writers for that case.
// Thread-safe (no state).
#pragma once

#include <sys/types.h>

#include <string>

namespace carapace {

// The pid of the process holding the lock of the database in `dir`, or 0 if
// none does (or there is no LOCK file yet). This process's own pid when an
// EventLog of this process writes it (carapace serve reads the log it
// writes, and must not take its own sessions for crashed), unless
// `count_this_process` is false (EventLog's own probe, under its list's lock,
// for a database this process does not write: the LOCK file is opened and
// closed, which would drop a lock this process held on it).
pid_t lock_holder(const std::string& dir, bool count_this_process = true);

// Whether an EventLog of this process has `dir` open as its writer
// (storage/event_log.cc keeps the list).
bool written_by_this_process(const std::string& dir);

}  // namespace carapace
