// Redactor: masks secrets in text before a person or another program reads
// it (log show, trace output, log files). The event log itself keeps what
// the model saw; the redactor stands in front of what is shown.
//
// Known secrets are found by rules on the text's words (runs of
// [A-Za-z0-9_-+/=.~]), without regular expressions, looking only at the
// words a vectorised scan marks as candidates (base/secret_scan.h):
//   - OpenAI and Anthropic keys: sk-..., sk-proj-..., sk-ant-... (20+ chars)
//   - AWS access key ids (AKIA/ASIA/ABIA/ACCA + 16), Google API keys (AIza + 35)
//   - GitHub tokens (ghp_/gho_/ghu_/ghs_/ghr_, github_pat_), Slack tokens (xox?-)
//   - JWTs (eyJ... with three dot-separated parts)
//   - the token after "Bearer"
//   - the value after a secret-looking name and '=' or ':' (api_key, apikey,
//     secret, token, password, passwd, accountkey, access_key, private_key,
//     credential): AWS secret keys, Azure keys, configuration lines
//   - PEM private key blocks (GCP service-account keys among them), also
//     with their line breaks escaped as \n in JSON
//   - a word of 32 or more hexadecimal digits
// plus the configured patterns (RE2 regular expressions, base/pattern.h:
// linear in the text whatever the pattern; the first capture group, if any,
// is what gets masked) and path replacements (the
// home directory becomes "~").
//
// Masking is partial and graduated by the secret's length L: L >= 13 keeps
// 3 characters at each end, 11-12 keeps 2, 8-10 keeps 1, shorter is masked
// whole; the marker in between is always kMarker. Text with nothing to
// mask is not copied.
//
// Thread-safe once built (const methods only).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace carapace {

class Redactor {
 public:
  static constexpr std::string_view kMarker = "\u2026redacted\u2026";  // "…redacted…"

  struct Options {
    std::vector<std::string> patterns;                         // extra secrets, as regular expressions
    std::vector<std::pair<std::string, std::string>> paths;    // path prefix -> replacement
    bool hex_runs = true;                                      // mask words of 32+ hex digits
    // Which words the rules look at: those around the candidates of
    // base/secret_scan.h, found by the fastest kernel this CPU has (or the
    // one named), else every word. Tests compare them all with every_word.
    enum class Scan { fastest, avx2, vbmi, every_word };
    Scan scan = Scan::fastest;
  };

  // The default: known patterns, and $HOME replaced by "~".
  Redactor();
  // Fails, naming the pattern, if a pattern is not a valid regular expression.
  static Status make(Options options, std::unique_ptr<Redactor>* out);
  ~Redactor();
  Redactor(Redactor&&) noexcept;
  Redactor& operator=(Redactor&&) noexcept;

  // Whether `text` holds something to mask; if so, *out gets the masked
  // text (else *out is untouched).
  bool redact(std::string_view text, std::string* out) const;

  // The masked text (a copy only when something was masked).
  std::string operator()(std::string text) const;

  // `secret` masked as the rules above say.
  static std::string mask(std::string_view secret);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace carapace
