// The vectorised candidate scan, kernel by kernel: every fingerprint, hex
// run, escape and needle is reported wherever it falls (across the 32- and
// 64-byte blocks and in the tail), and clean text gives nothing.
#include "base/secret_scan.h"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace carapace;

namespace {

std::vector<SecretScan::Kernel> kernels() {
  std::vector<SecretScan::Kernel> out;
  for (auto k : {SecretScan::Kernel::avx2, SecretScan::Kernel::vbmi}) {
    if (SecretScan::available(k)) out.push_back(k);
  }
  return out;
}

const char* name(SecretScan::Kernel k) { return k == SecretScan::Kernel::vbmi ? "vbmi" : "avx2"; }

SecretScan::Found scan(const SecretScan& s, const std::string& text) {
  SecretScan::Found f;
  s.scan(text, &f);
  return f;
}

// Failures counted, the first described: a broken kernel fails thousands of
// cases, and one line says enough.
struct Failures {
  int count = 0;
  std::string first;
  void check(bool ok, const std::string& what) {
    if (!ok && count++ == 0) first = what;
  }
};

bool candidate_in(const SecretScan::Found& f, size_t begin, size_t end) {
  for (size_t at : f.candidates) {
    if (at >= begin && at < end) return true;
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(secret_scan)

BOOST_AUTO_TEST_CASE(every_fingerprint_at_every_offset) {
  if (kernels().empty()) {
    BOOST_TEST_MESSAGE("this CPU has neither AVX2 nor AVX-512 VBMI: the redactor looks at every word");
    return;
  }
  const std::vector<std::string> samples = {
      "sk-proj-abc",  "AKIAIOSFODNN7",  "ASIAX",      "ABIAX",       "ACCAX",      "AIzaSy",   "ghp_x",
      "gho_x",        "ghu_x",          "ghs_x",      "ghr_x",       "github_pat_x", "xoxb-1",  "xoxp-1",
      "eyJhbGci",     "-----BEGIN RSA", "data: {}",   "api_key=",    "APIKEY:",    "Api-Key\"", "secret'",
      "SECRET.",      "token ",         "Token\t",    "password:",   "PassWord=",  "passwd=",  "credential=",
      "Credentials:", "auth:",          "X-AUTH=",    "Bearer abc",  "bearer.",    "/home/anna",
      "token\\\"",   "\\u0073",        "\\\\n",      "%73",         "%2F"};
  Failures failures;
  for (auto k : kernels()) {
    SecretScan s({"/home/anna"}, k);
    for (const std::string& sample : samples) {
      for (size_t offset = 0; offset < 140; ++offset) {
        for (size_t after : {0, 1, 7, 40}) {
          std::string text = std::string(offset, ' ') + sample + std::string(after, ' ');
          auto f = scan(s, text);
          const bool escaped = sample.find_first_of("\\%") != std::string::npos;
          failures.check(candidate_in(f, offset, offset + sample.size()) && f.escapes == escaped,
                         std::string(name(k)) + ": '" + sample + "' at " + std::to_string(offset) + " with " +
                             std::to_string(after) + " after");
        }
      }
    }
  }
  BOOST_TEST(failures.count == 0, failures.count << " failures, the first: " << failures.first);
}

BOOST_AUTO_TEST_CASE(clean_text_has_no_candidate) {
  const std::string clean =
      "I'll look at the workspace first and then read the failing test.\n"
      "drwxr-xr-x  4 agent agent  4096 Nov 23 10:12 src\n"
      "commit 3f2a9c81b7de: Fix the retry delay when the tokens run out\n"
      "The keyboard, the donkeys and the author returned in order.\n";
  for (auto k : kernels()) {
    SecretScan s({"/home/anna"}, k);
    std::string text;
    for (int i = 0; i < 50; ++i) text += clean;
    auto f = scan(s, text);
    BOOST_TEST(f.candidates.empty(), name(k) << ": " << f.candidates.size() << " candidates, the first at "
                                             << (f.candidates.empty() ? 0 : f.candidates[0]));
    BOOST_TEST(!f.escapes);
  }
}

BOOST_AUTO_TEST_CASE(a_hex_run_of_32_is_a_candidate_and_31_is_not) {
  Failures failures;
  for (auto k : kernels()) {
    SecretScan s({}, k);
    for (size_t length : {31, 32, 33, 63, 64, 65, 100, 200}) {
      for (size_t offset = 0; offset < 140; ++offset) {
        for (size_t after : {0, 1, 50}) {
          std::string run;
          for (size_t i = 0; i < length; ++i) run += "0123456789abcdefDEADBEEF"[i % 24];
          std::string text = std::string(offset, 'q') + run + std::string(after, 'q');
          auto f = scan(s, text);
          failures.check(length < 32 ? f.candidates.empty() : candidate_in(f, offset, offset + length),
                         std::string(name(k)) + ": a run of " + std::to_string(length) + " at " +
                             std::to_string(offset) + " with " + std::to_string(after) + " after");
        }
      }
    }
    // Two runs in one block, the first too short.
    std::string two = "q" + std::string(20, 'a') + "q" + std::string(33, 'b') + "q";
    failures.check(candidate_in(scan(s, two), 22, 55), std::string(name(k)) + ": two runs");
  }
  BOOST_TEST(failures.count == 0, failures.count << " failures, the first: " << failures.first);
}

BOOST_AUTO_TEST_CASE(escapes_are_seen_anywhere) {
  Failures failures;
  for (auto k : kernels()) {
    SecretScan s({}, k);
    for (char c : {'\\', '%'}) {
      for (size_t length : {1, 31, 32, 35, 64, 67, 130}) {
        for (size_t at = 0; at < length; ++at) {
          std::string text(length, 'q');
          text[at] = c;
          failures.check(scan(s, text).escapes, std::string(name(k)) + ": '" + c + "' at " + std::to_string(at) +
                                                    " of " + std::to_string(length));
        }
      }
    }
    BOOST_TEST(!scan(s, std::string(200, 'q')).escapes);
    BOOST_TEST(scan(s, "").candidates.empty());
  }
  BOOST_TEST(failures.count == 0, failures.count << " failures, the first: " << failures.first);
}

BOOST_AUTO_TEST_CASE(bytes_past_ascii_are_no_candidates) {
  for (auto k : kernels()) {
    SecretScan s({}, k);
    // "key:" and a hex run with the top bit set, and UTF-8 text.
    std::string text;
    for (int i = 0; i < 20; ++i) text += "\xeb\xe5\xf9\xba \xe2\x80\xa6 \xc3\xa9t\xc3\xa9 ";
    text += std::string(40, '\xb1');
    auto f = scan(s, text);
    BOOST_TEST(f.candidates.empty(), name(k) << ": " << f.candidates.size());
    BOOST_TEST(!f.escapes);
  }
}

BOOST_AUTO_TEST_SUITE_END()
