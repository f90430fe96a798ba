#include "actors/node/openssl_error_queue.h"

#include <dlfcn.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdlib>

namespace carapace {

void keep_openssl_error_queue_clear() {}

namespace {

template <typename Fn>
Fn next(const char* name) {
  void* f = ::dlsym(RTLD_NEXT, name);
  if (f == nullptr) std::abort();  // libssl is linked in: it cannot be missing
  return reinterpret_cast<Fn>(f);
}

}  // namespace
}  // namespace carapace

extern "C" {

int SSL_read(SSL* ssl, void* buf, int num) {
  static const auto real = carapace::next<int (*)(SSL*, void*, int)>("SSL_read");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_write(SSL* ssl, const void* buf, int num) {
  static const auto real = carapace::next<int (*)(SSL*, const void*, int)>("SSL_write");
  ERR_clear_error();
  return real(ssl, buf, num);
}

int SSL_connect(SSL* ssl) {
  static const auto real = carapace::next<int (*)(SSL*)>("SSL_connect");
  ERR_clear_error();
  return real(ssl);
}

int SSL_accept(SSL* ssl) {
  static const auto real = carapace::next<int (*)(SSL*)>("SSL_accept");
  ERR_clear_error();
  return real(ssl);
}

}  // extern "C"
