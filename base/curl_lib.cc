// curl's functions, defined here so that the program does not link libcurl:
// each forwards to the function of the same name in libcurl.so.4, opened
// with dlopen the first time any of them is called. Only the functions the
// project calls are here; a new one is a link error until it is added.
//
// Without the library every call fails as curl does on a bad handle:
// CURLE_FAILED_INIT, CURLM_BAD_HANDLE, a null handle, and curl_load_error()
// says why.
#define CURL_DISABLE_TYPECHECK  // curl_easy_setopt and friends as functions, not macros
#include "base/curl_lib.h"

#include <curl/curl.h>
#include <dlfcn.h>

#include <cstdarg>

namespace carapace {
namespace {

constexpr const char* kSoname = "libcurl.so.4";

#define CARAPACE_CURL_FUNCTIONS(X)                                                                               \
  X(curl_global_init) X(curl_easy_init) X(curl_easy_setopt) X(curl_easy_perform) X(curl_easy_getinfo)            \
  X(curl_easy_cleanup) X(curl_easy_reset) X(curl_easy_strerror) X(curl_slist_append) X(curl_slist_free_all)     \
  X(curl_getdate) X(curl_multi_init) X(curl_multi_setopt) X(curl_multi_add_handle) X(curl_multi_remove_handle) \
  X(curl_multi_perform) X(curl_multi_poll) X(curl_multi_wakeup) X(curl_multi_info_read) X(curl_multi_cleanup)

struct Curl {
  std::string error;
#define CARAPACE_CURL_POINTER(name) decltype(&::name) name = nullptr;
  CARAPACE_CURL_FUNCTIONS(CARAPACE_CURL_POINTER)
#undef CARAPACE_CURL_POINTER
};

Curl load() {
  Curl c;
  // Local: its symbols resolve only through the pointers below, never
  // against this program's definitions of the same names.
  void* handle = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    c.error = std::string("cannot load ") + kSoname + " (" + (why ? why : "no reason given") +
              "); install Debian's libcurl4 (scripts/bootstrap.sh does)";
    return c;
  }
  bool missing = false;
#define CARAPACE_CURL_RESOLVE(name)                                              \
  c.name = reinterpret_cast<decltype(&::name)>(::dlsym(handle, #name));          \
  if (c.name == nullptr && !missing) {                                           \
    missing = true;                                                              \
    c.error = std::string(kSoname) + " has no " #name ": a libcurl older than 7.68"; \
  }
  CARAPACE_CURL_FUNCTIONS(CARAPACE_CURL_RESOLVE)
#undef CARAPACE_CURL_RESOLVE
  if (missing) {
    std::string error = std::move(c.error);
    c = Curl{};
    c.error = std::move(error);
  }
  return c;
}

const Curl& curl() {
  static const Curl loaded = load();
  return loaded;
}

// curl_easy_setopt and curl_multi_setopt take one argument after the
// option, whose type the option's number range says (curl.h's CURLOPTTYPE_*).
template <typename Handle, typename Option, typename Code, typename Fn>
Code set_option(Fn fn, Code failed, Handle* h, Option option, va_list ap) {
  if (fn == nullptr) return failed;
  const long n = static_cast<long>(option);
  if (n < CURLOPTTYPE_OBJECTPOINT) return fn(h, option, va_arg(ap, long));
  if (n < CURLOPTTYPE_FUNCTIONPOINT) return fn(h, option, va_arg(ap, void*));
  if (n < CURLOPTTYPE_OFF_T) return fn(h, option, va_arg(ap, void (*)()));
  if (n < CURLOPTTYPE_BLOB) return fn(h, option, va_arg(ap, curl_off_t));
  return fn(h, option, va_arg(ap, void*));
}

}  // namespace

std::string curl_load_error() { return curl().error; }

}  // namespace carapace

using carapace::curl;

// curl's own signatures, which name an enum before the `...`. Clang calls
// va_start after a parameter whose type is promoted undefined; the enums
// are int-sized, passed as an int by the ABIs Debian builds for, and the
// libcurl these forward to takes its variadic argument the same way.
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wvarargs"
#endif

extern "C" {

CURLcode curl_global_init(long flags) {
  return curl().curl_global_init ? curl().curl_global_init(flags) : CURLE_FAILED_INIT;
}
CURL* curl_easy_init(void) { return curl().curl_easy_init ? curl().curl_easy_init() : nullptr; }
CURLcode curl_easy_setopt(CURL* h, CURLoption option, ...) {
  va_list ap;
  va_start(ap, option);
  CURLcode rc = carapace::set_option(curl().curl_easy_setopt, CURLE_FAILED_INIT, h, option, ap);
  va_end(ap);
  return rc;
}
CURLcode curl_easy_perform(CURL* h) { return curl().curl_easy_perform ? curl().curl_easy_perform(h) : CURLE_FAILED_INIT; }
CURLcode curl_easy_getinfo(CURL* h, CURLINFO info, ...) {
  if (curl().curl_easy_getinfo == nullptr) return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, info);
  void* out = va_arg(ap, void*);  // every CURLINFO takes a pointer
  va_end(ap);
  return curl().curl_easy_getinfo(h, info, out);
}
void curl_easy_cleanup(CURL* h) {
  if (curl().curl_easy_cleanup) curl().curl_easy_cleanup(h);
}
void curl_easy_reset(CURL* h) {
  if (curl().curl_easy_reset) curl().curl_easy_reset(h);
}
const char* curl_easy_strerror(CURLcode code) {
  return curl().curl_easy_strerror ? curl().curl_easy_strerror(code) : "libcurl is not loaded";
}
struct curl_slist* curl_slist_append(struct curl_slist* list, const char* text) {
  return curl().curl_slist_append ? curl().curl_slist_append(list, text) : nullptr;
}
void curl_slist_free_all(struct curl_slist* list) {
  if (curl().curl_slist_free_all) curl().curl_slist_free_all(list);
}
time_t curl_getdate(const char* text, const time_t* unused) {
  return curl().curl_getdate ? curl().curl_getdate(text, unused) : -1;
}
CURLM* curl_multi_init(void) { return curl().curl_multi_init ? curl().curl_multi_init() : nullptr; }
CURLMcode curl_multi_setopt(CURLM* m, CURLMoption option, ...) {
  va_list ap;
  va_start(ap, option);
  CURLMcode rc = carapace::set_option(curl().curl_multi_setopt, CURLM_BAD_HANDLE, m, option, ap);
  va_end(ap);
  return rc;
}
CURLMcode curl_multi_add_handle(CURLM* m, CURL* h) {
  return curl().curl_multi_add_handle ? curl().curl_multi_add_handle(m, h) : CURLM_BAD_HANDLE;
}
CURLMcode curl_multi_remove_handle(CURLM* m, CURL* h) {
  return curl().curl_multi_remove_handle ? curl().curl_multi_remove_handle(m, h) : CURLM_BAD_HANDLE;
}
CURLMcode curl_multi_perform(CURLM* m, int* running) {
  return curl().curl_multi_perform ? curl().curl_multi_perform(m, running) : CURLM_BAD_HANDLE;
}
CURLMcode curl_multi_poll(CURLM* m, struct curl_waitfd* fds, unsigned int n, int timeout_ms, int* ret) {
  return curl().curl_multi_poll ? curl().curl_multi_poll(m, fds, n, timeout_ms, ret) : CURLM_BAD_HANDLE;
}
CURLMcode curl_multi_wakeup(CURLM* m) { return curl().curl_multi_wakeup ? curl().curl_multi_wakeup(m) : CURLM_BAD_HANDLE; }
CURLMsg* curl_multi_info_read(CURLM* m, int* left) {
  return curl().curl_multi_info_read ? curl().curl_multi_info_read(m, left) : nullptr;
}
CURLMcode curl_multi_cleanup(CURLM* m) { return curl().curl_multi_cleanup ? curl().curl_multi_cleanup(m) : CURLM_BAD_HANDLE; }

}  // extern "C"
