// ServeToken: the token `carapace serve` asks of every API request and
// WebSocket (docs/serve.md, "Security"), and where it comes from.
//
// CARAPACE_SERVE_TOKEN when it is set (checked: 16 to 256 URL-safe
// characters). Otherwise the home's `serve.token`: made on first use from
// the kernel's CSPRNG (getrandom, 32 bytes, base64url), written owner-only
// (0600, whatever the umask) through a temporary file and a link, so that
// a reader never sees half of it and two servers starting at once agree on
// one. Later starts reuse it: a page left open, a bookmark and a script keep
// working across a restart, and whoever may read the file may read the home
// anyway. Deleting the file makes a new one at the next start.
//
// An existing file is taken only if it is a regular file (not a symbolic
// link) of the user running carapace that no other user may read or write;
// otherwise it is refused, named, with the command that fixes it.
// Thread-safe: no state.
#pragma once

#include <string>

#include "base/status.h"

namespace carapace::web {

struct ServeToken {
  std::string value;
  bool from_env = false;  // CARAPACE_SERVE_TOKEN
  std::string file;       // the home's serve.token, when it came from there
  bool made = false;      // the file was made by this call
};

// The token for a server over `home` (which prepare_home has checked);
// `env` is CARAPACE_SERVE_TOKEN's value, or null.
Status serve_token(const std::string& home, const char* env, ServeToken* out);

}  // namespace carapace::web
