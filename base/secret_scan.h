// SecretScan: the places in a text where the redactor's rules could find a
// secret, found at close to memory speed so that the rules run only there.
//
// Every secret the redactor masks by its built-in rules holds one of these
// fingerprints, so every word the rules would mask is a candidate:
//   - a known key's start: sk-, AKI/ASI/ABI/ACC (AWS), AIz (Google),
//     gh[pousr] (GitHub), b_pa (github_pat_), xox (Slack), eyJ (JWT),
//     -BEG (-----BEGIN);
//   - the end of a secret-looking name, in any case, followed by what may
//     end a name ('=' ':' '"' '\'' '.' space tab, or a backslash: an escaped
//     quote): key, ret (secret), ken (token), ord (password), swd (passwd),
//     uth (auth), rer (bearer); and ntia (credential, credentials);
//   - the 32nd byte of a run of hexadecimal digits;
//   - an escape that may decode to one of those bytes or to another escape:
//     \u, \\, % and a hex digit. The other escapes (\n \r \t \b \f \" \/)
//     decode to bytes no fingerprint holds but a name's end, which the
//     backslash after a name covers. So a text with no candidate decodes
//     (base/redaction_view.h) to a text with none, and the redactor skips
//     the decoded view.
// Also reported, for the rest of the redactor's work in the same pass:
// "ata:" (an SSE stream's data: lines), the first four bytes of each
// needle (the paths it replaces), and whether the text holds a backslash
// or a percent sign (escapes a secret may hide behind).
//
// Candidates are a superset: the redactor looks at the word around each one
// with its full rules, and most are words with no secret.
//
// Two kernels: with AVX-512 VBMI, 64 bytes at a time, each of a
// fingerprint's four bytes looked up in a 128-entry table by one permute;
// with AVX2, 32 bytes at a time with nibble tables (the Teddy technique of
// Hyperscan's literal matcher: each byte a set of low and high nibbles,
// looked up with one shuffle each; the sets are crossed, so a few more
// candidates). The AVX2 kernel first looks a block up in one set of 8
// buckets, the fingerprints paired (8 shuffles): most text has no
// candidate there. A block that has one is looked up again in the two sets
// of 8 (16 shuffles), which give its candidates, at about two thirds of
// the cost of the two sets alone on clean text. A byte past ASCII is no
// fingerprint's first byte for either kernel, nor its second for AVX2 (a
// needle that begins with one is found by the redactor's own search). On
// other CPUs available() is false and the redactor looks at every word.
//
// Thread-safety: const methods only.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace carapace {

class SecretScan {
 public:
  // `needles`: more strings to report (their first four bytes; they share
  // one table entry, so a candidate may be none of them).
  enum class Kernel { best, avx2, vbmi };
  explicit SecretScan(const std::vector<std::string>& needles = {}, Kernel kernel = Kernel::best);
  ~SecretScan();
  SecretScan(SecretScan&&) noexcept;
  SecretScan& operator=(SecretScan&&) noexcept;

  // Whether this CPU runs the vectorised scan (`kernel`, or any).
  static bool available(Kernel kernel = Kernel::best);

  struct Found {
    std::vector<size_t> candidates;  // increasing offsets: a fingerprint's first byte, a byte inside a hex run
    bool escapes = false;            // a '\\' or a '%' somewhere
  };
  // Only when available().
  void scan(std::string_view text, Found* out) const;

  struct Tables;

 private:
  std::unique_ptr<Tables> tables_;
  Kernel kernel_;
};

}  // namespace carapace
