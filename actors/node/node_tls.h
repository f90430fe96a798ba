// NodeTls: the certificates with which nodes and hosts authenticate each
// other over mutual TLS, made and checked on disk.
//
// A node CA directory holds ca.crt and ca.key; a node directory holds
// node.crt (signed by that CA), node.key and a copy of ca.crt, everything a
// node or a host needs. Keys are EC P-256, written PEM with mode 0600.
//
// check_node_tls() exists because the TLS library that later loads these
// files aborts on a bad one with a message that names nothing; checking them
// first lets the error say which file is wrong and what to do about it.
//
// Thread-safe: no shared state (OpenSSL 3 is thread-safe). Nothing throws.
#pragma once

#include <string>

#include "base/status.h"

namespace carapace {

// Creates `dir` (mode 0700, with its parents) and writes a self-signed CA
// certificate ca.crt (CN=`name`, valid `days` days) and its key ca.key.
// Refuses when ca.key exists: a CA key is never overwritten.
// `name`: 1..64 of [A-Za-z0-9._-]; `days`: 1..3650.
Status make_node_ca(const std::string& dir, const std::string& name, int days);

// Creates `out_dir` (0700) and writes node.crt (CN=`name`, DNS:`name`, for
// TLS clients and servers, signed by the CA in `ca_dir`, valid `days` days),
// node.key and a copy of the CA's ca.crt. Refuses when node.key exists.
Status make_node_certificate(const std::string& ca_dir, const std::string& out_dir, const std::string& name,
                             int days);

// As make_node_certificate, valid from now + `not_before_offset_seconds` to
// now + `not_after_offset_seconds` (offsets within ±3650 days); tests use
// it to make certificates that have expired or are not valid yet.
Status make_node_certificate_with_validity(const std::string& ca_dir, const std::string& out_dir,
                                           const std::string& name, long not_before_offset_seconds,
                                           long not_after_offset_seconds);

// The absolute paths of a node directory's three files.
struct NodeTlsFiles {
  std::string certificate;  // node.crt
  std::string key;          // node.key
  std::string ca;           // ca.crt
};

// Checks that `dir` holds node.crt, node.key and ca.crt that a TLS library
// will accept: regular files of at most 64 KiB holding PEM, node.key not
// readable by group or others, the key belonging to the certificate, the
// certificate signed by ca.crt and valid now. On success fills `*out` and,
// when given, `*common_name` with the certificate's CN. Errors name the file
// and say what to do: not_found for a missing file, invalid_argument for
// a file that is wrong, io_error when reading fails.
Status check_node_tls(const std::string& dir, NodeTlsFiles* out, std::string* common_name = nullptr);

}  // namespace carapace
