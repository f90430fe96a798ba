// redact_bench: the redactor's throughput on realistic agent text, against a
// plain copy of the same text, in the same run.
//
//   build/bench/redact_bench [--mb N] [--rounds N] [--scan fastest|avx2|vbmi] [--quick]
//
// The text (~N MB, default 10) is what an agent's log holds: prose, tool
// output (listings, compiler lines, paths, short hashes), JSON fragments and
// code, with no secret in it; then the same text with a secret every 4 KB
// (an OpenAI key, an AWS key pair, a GitHub token, a JWT, a Bearer header,
// a password in JSON, a 40-hex digest, a PEM key, by turns); then the clean
// text as one JSON string (escapes on every line). The clean text is also
// redacted looking at every word (the redactor before its candidate scan),
// and matched by an RE2::Set of the rules' triggers.
// Each variant is measured in rounds that alternate, so they share the
// machine's noise; the figure is the best round (MB/s). Prints a table, then
// one JSON object as the last line.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <re2/re2.h>
#include <re2/set.h>

#include "base/redactor.h"
#include "base/secret_scan.h"

using namespace carapace;
using Clock = std::chrono::steady_clock;

namespace {

std::string clean_text(size_t bytes, std::mt19937_64& rng) {
  static const std::vector<std::string> pieces = {
      "I'll look at the workspace first and then read the failing test.\n",
      "src/storage/event_log.cc:412:17: warning: unused variable 'batch' [-Wunused-variable]\n",
      "drwxr-xr-x  4 agent agent  4096 Nov 23 10:12 src\n-rw-r--r--  1 agent agent 18234 Nov 23 10:12 README.md\n",
      "{\"role\": \"assistant\", \"content\": \"The build passes; 3 tests fail in replay_test.\", \"tokens\": 812}\n",
      "commit 3f2a9c81b7de: Fix the retry delay when Retry-After is an HTTP date\n",
      "for (const auto& e : events) { if (e.seq > last) last = e.seq; }\n",
      "tests/replay/replayer_test.cc passed in 1.84 s (build/tests/replayer_test)\n",
      "The CSV has 4 rows of measurements: 12.5, 13.1, 12.9 and 14.0 degrees.\n",
      "error: no matching function for call to 'open(const std::string&)'; did you mean 'openat'?\n",
      "GET /v1/models HTTP/1.1 200 OK content-length=512 max_tokens=4096 input_tokens=1200\n",
  };
  std::string out;
  out.reserve(bytes + 256);
  std::uniform_int_distribution<size_t> pick(0, pieces.size() - 1);
  while (out.size() < bytes) out += pieces[pick(rng)];
  return out;
}

std::string with_secrets(std::string text) {
  static const std::vector<std::string> secrets = {
      " OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1w ",
      " aws_access_key_id=AKIAIOSFODNN7EXAMPLE aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY ",
      " ghp_0123456789abcdefghijABCDEFGHIJ012345 ",
      " eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c ",
      " Authorization: Bearer abcdef0123456789.ghijkl ",
      " {\"password\": \"correct-horse-battery\"} ",
      " 0123456789abcdef0123456789abcdef01234567 ",
      "\n-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n",
  };
  std::string out;
  out.reserve(text.size() + text.size() / 40);
  size_t k = 0;
  for (size_t at = 0; at < text.size(); at += 4096) {
    out.append(text, at, 4096);
    out += secrets[k++ % secrets.size()];
  }
  return out;
}

struct Variant {
  std::string name;
  const std::string* text;
  std::function<size_t(const std::string&)> run;  // returns something so the work is not optimised away
  size_t baseline;                                 // the variant it is compared with (a copy of the same text)
  double best_mb_s = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"redact_bench: the redactor against a plain copy of the same text"};
  double mb = 10;
  int rounds = 7;
  bool quick = false;
  app.add_option("--mb", mb, "Size of the text in MB")->check(CLI::Range(0.01, 1000.0));
  app.add_option("--rounds", rounds, "Rounds per variant")->check(CLI::Range(1, 1000));
  app.add_flag("--quick", quick, "A tiny run (CTest runs it so)");
  std::string kernel = "fastest";
  app.add_option("--scan", kernel, "The candidate scan's kernel: fastest, avx2 or vbmi")
      ->check(CLI::IsMember({"fastest", "avx2", "vbmi"}));
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    mb = 0.2;
    rounds = 2;
  }
  std::mt19937_64 rng(7);
  const std::string clean = clean_text(static_cast<size_t>(mb * 1e6), rng);
  const std::string dirty = with_secrets(clean);
  // The same clean text as one JSON string: a newline, a quote or a
  // backslash every line, as a stored request or tool output holds it.
  const std::string escaped = nlohmann::json(clean).dump();
  std::unique_ptr<Redactor> fast;
  {
    Redactor::Options o;
    o.scan = kernel == "avx2"   ? Redactor::Options::Scan::avx2
             : kernel == "vbmi" ? Redactor::Options::Scan::vbmi
                                : Redactor::Options::Scan::fastest;
    if (!Redactor::make(o, &fast).ok()) return 1;
  }
  const Redactor& redactor = *fast;
  std::unique_ptr<Redactor> every_word;
  {
    Redactor::Options o;
    o.scan = Redactor::Options::Scan::every_word;
    if (!Redactor::make(o, &every_word).ok()) return 1;
  }
  // RE2::Set over the built-in rules' triggers, for the record: it answers
  // only whether one matched, not where.
  RE2::Options set_options;
  set_options.set_max_mem(256 << 20);
  RE2::Set set(set_options, RE2::UNANCHORED);
  for (const char* p : {"sk-", "AKIA", "ASIA", "ABIA", "ACCA", "AIza", "gh[pousr]_", "github_pat_", "xox[abeoprs]-",
                        "eyJ", "-----BEGIN ", "(?i)key", "(?i)secret", "(?i)token", "(?i)passw", "(?i)credential",
                        "(?i)auth", "(?i)bearer", "[0-9a-fA-F]{32}"}) {
    set.Add(p, nullptr);
  }
  if (!set.Compile()) return 1;
  size_t masked_dirty = 0;
  {
    std::string out;
    if (redactor.redact(clean, &out) || redactor.redact(escaped, &out)) {
      std::fprintf(stderr, "redact_bench: the clean text has something to mask: a bench bug\n");
      return 1;
    }
    if (!redactor.redact(dirty, &out)) {
      std::fprintf(stderr, "redact_bench: the text with secrets had nothing masked: a bench bug\n");
      return 1;
    }
    for (size_t p = out.find(Redactor::kMarker); p != std::string::npos; p = out.find(Redactor::kMarker, p + 1)) {
      ++masked_dirty;
    }
  }
  auto copy = [](const std::string& t) {
    std::string c = t;
    return c.size() + static_cast<unsigned char>(c[c.size() / 2]);
  };
  auto redact = [&redactor](const std::string& t) {
    std::string out;
    return redactor.redact(t, &out) ? out.size() : t.size();
  };
  auto redact_every_word = [&every_word](const std::string& t) {
    std::string out;
    return every_word->redact(t, &out) ? out.size() : t.size();
  };
  auto set_match = [&set](const std::string& t) {
    std::vector<int> m;
    return set.Match(t, &m) ? m.size() + 1 : 0;
  };
  std::vector<Variant> variants = {
      {"plain copy, no secrets", &clean, copy, 0},
      {"redactor, no secrets (nothing copied)", &clean, redact, 0},
      {"  the same, every word looked at", &clean, redact_every_word, 0},
      {"  RE2::Set of the rules (no positions)", &clean, set_match, 0},
      {"plain copy, a secret every 4 KB", &dirty, copy, 4},
      {"redactor, a secret every 4 KB", &dirty, redact, 4},
      {"plain copy, as one JSON string", &escaped, copy, 6},
      {"redactor, as one JSON string", &escaped, redact, 6},
  };
  size_t sink = 0;
  for (int r = 0; r < rounds; ++r) {
    for (auto& v : variants) {
      auto start = Clock::now();
      sink += v.run(*v.text);
      double s = std::chrono::duration<double>(Clock::now() - start).count();
      v.best_mb_s = std::max(v.best_mb_s, static_cast<double>(v.text->size()) / 1e6 / s);
    }
  }
  std::printf("text: %.1f MB clean, %.1f MB with %zu secrets masked, %.1f MB as a JSON string; best of %d rounds\n",
              static_cast<double>(clean.size()) / 1e6, static_cast<double>(dirty.size()) / 1e6, masked_dirty,
              static_cast<double>(escaped.size()) / 1e6, rounds);
  const bool vbmi = kernel != "avx2" && SecretScan::available(SecretScan::Kernel::vbmi);
  std::printf("candidate scan: %s\n\n", vbmi                                              ? "AVX-512 VBMI"
                                         : SecretScan::available(SecretScan::Kernel::avx2) ? "AVX2"
                                                                                           : "none (every word looked at)");
  std::printf("%-42s %12s %12s\n", "measurement", "MB/s", "vs copy");
  nlohmann::json j{{"mb", clean.size() / 1e6}, {"rounds", rounds}, {"secrets_masked", masked_dirty}};
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& base = variants[variants[i].baseline];
    double ratio = variants[i].best_mb_s / base.best_mb_s;
    std::printf("%-42s %12.1f %11.3fx\n", variants[i].name.c_str(), variants[i].best_mb_s, ratio);
    j[variants[i].name] = variants[i].best_mb_s;
  }
  j["sink"] = sink % 2;
  std::printf("\n%s\n", j.dump().c_str());
  return 0;
}
