// OpenSSL's per-thread error queue, kept clear for CAF's TLS module.
//
// OpenSSL requires the calling thread's error queue to be empty before an
// SSL I/O call, or SSL_get_error() misreads its result. CAF 0.17.6's
// caf::openssl sessions never clear it, and leave an error there when a
// link breaks (its drain sits in a log statement compiled out). All links
// share the middleman's one multiplexer thread, so a node killed mid-call
// broke every other node's link at its next read: SSL_get_error() saw the
// dead link's error and reported WANT_READ as a failure. This file defines
// SSL_read, SSL_write, SSL_connect and SSL_accept in the program, which
// take precedence over libssl's for every library (CAF's TLS module,
// libcurl): each clears the queue, as OpenSSL documents, then calls
// libssl's own.
#pragma once

namespace carapace {

// Does nothing; a call to it links the definitions into the program.
void keep_openssl_error_queue_clear();

}  // namespace carapace
