// libcurl, loaded on first use: the program calls curl's functions as usual
// (base/curl_lib.cc defines them), and they open libcurl.so.4 the first
// time one is called. libcurl brings 26 shared libraries (TLS, Kerberos,
// LDAP, SSH...) whose loading cost every process 12 to 15 ms at start; most
// commands never speak HTTP (bench/README.md, `many_sessions.sh`).
#pragma once

#include <string>

namespace carapace {

// Empty once libcurl is loaded (loading it if it was not); else why it
// could not be, naming the file and what to install.
std::string curl_load_error();

}  // namespace carapace
