#include "base/redactor.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <optional>

#include "base/pattern.h"
#include "base/redaction_view.h"
#include "base/secret_scan.h"

namespace carapace {
namespace {

struct Span {
  size_t begin;
  size_t end;
};

constexpr std::array<bool, 256> word_table() {
  std::array<bool, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c) t[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = true;
  for (int c = '0'; c <= '9'; ++c) t[c] = true;
  for (char c : std::string_view("_-+/=.~")) t[static_cast<unsigned char>(c)] = true;
  return t;
}
constexpr std::array<bool, 256> kWord = word_table();

bool is_word(char c) { return kWord[static_cast<unsigned char>(c)]; }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_upper_alnum(char c) { return (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

bool ends_with_ci(std::string_view s, std::string_view suffix) {
  if (s.size() < suffix.size()) return false;
  s = s.substr(s.size() - suffix.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (lower(s[i]) != suffix[i]) return false;
  }
  return true;
}

bool equals_ci(std::string_view s, std::string_view word) {
  return s.size() == word.size() && ends_with_ci(s, word);
}

// A name whose value is a secret: OPENAI_API_KEY, "password", AccountKey, ...
bool secret_name(std::string_view name) {
  if (name.size() < 4) return false;
  switch (lower(name.back())) {
    case 'y': case 't': case 'n': case 'd': case 'l': case 's': case 'h': break;
    default: return false;
  }
  // Trailing quote or punctuation of a JSON key is not part of the word.
  static constexpr std::string_view kNames[] = {"api_key",    "apikey",      "api-key",      "secret",
                                                "secret_key", "token",       "password",     "passwd",
                                                "accountkey", "access_key",  "private_key",  "credential",
                                                "credentials", "client_secret", "auth"};
  for (std::string_view n : kNames) {
    if (ends_with_ci(name, n)) return true;
  }
  return false;
}

// Whether the word as a whole is a known kind of secret.
bool secret_word(std::string_view w, bool hex_runs) {
  const size_t n = w.size();
  if (n < 16) return false;
  switch (w[0]) {
    case 's':
      if (starts_with(w, "sk-") && n >= 20) return true;
      break;
    case 'A':
      if (n == 20 && (starts_with(w, "AKIA") || starts_with(w, "ASIA") || starts_with(w, "ABIA") ||
                      starts_with(w, "ACCA")) &&
          std::all_of(w.begin() + 4, w.end(), is_upper_alnum)) {
        return true;
      }
      if (n == 39 && starts_with(w, "AIza")) return true;
      break;
    case 'g':
      if (n >= 40 && w[3] == '_' &&
          (starts_with(w, "ghp_") || starts_with(w, "gho_") || starts_with(w, "ghu_") || starts_with(w, "ghs_") ||
           starts_with(w, "ghr_"))) {
        return true;
      }
      if (n >= 30 && starts_with(w, "github_pat_")) return true;
      break;
    case 'x':
      if (n >= 15 && starts_with(w, "xox") && w[4] == '-' && std::string_view("abeoprs").find(w[3]) != w.npos) {
        return true;
      }
      break;
    case 'e':
      if (starts_with(w, "eyJ") && n >= 20) {
        size_t first = w.find('.');
        size_t second = first == w.npos ? w.npos : w.find('.', first + 1);
        if (second != w.npos && second > first + 1 && second + 1 < n && w.find('.', second + 1) == w.npos) {
          return true;
        }
      }
      break;
    default:
      break;
  }
  return hex_runs && n >= 32 && std::all_of(w.begin(), w.end(), is_hex);
}

// Whether the start of a known kind of secret begins `w`: cut short (by a
// tool's output cap, a body's store cap) it is too short for secret_word, and
// is masked all the same where it ends at such a cut.
bool secret_prefix(std::string_view w) {
  for (std::string_view p : {"sk-", "AKIA", "ASIA", "AIza", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
                             "xoxb-", "xoxp-", "xoxa-", "xoxs-", "xoxe-", "xoxr-", "xoxo-", "eyJ"}) {
    if (starts_with(w, p) && w.size() > p.size()) return true;
  }
  return false;
}

// Whether a cut marker follows at `at`: the shell tool's output cap
// ("\n[... N bytes truncated"), the body store's ("\n[carapace: body cut"),
// a preview's ellipsis.
bool cut_after(std::string_view text, size_t at) {
  std::string_view rest = text.substr(std::min(at, text.size()));
  // A preview's ellipsis (quote_preview), the body store's marker.
  if (starts_with(rest, "\xe2\x80\xa6") || starts_with(rest, "\n[carapace: body cut")) return true;
  if (!starts_with(rest, "\n[... ") || rest.size() < 7 || rest[6] < '0' || rest[6] > '9') return false;
  return rest.substr(0, 48).find(" bytes truncated") != std::string_view::npos;
}

// A PEM private key block, from the end of its BEGIN line to the END line:
// the one whose "-----BEGIN " is at `at`, if it is one. Returns where the
// next block may begin.
size_t pem_block(std::string_view text, size_t at, std::vector<Span>* spans) {
  // The header ends within 64 bytes of the start.
  const size_t close = text.substr(at + 11, 58).find("-----");
  if (close == text.npos) return at + 1;
  const size_t header_end = at + 11 + close;
  if (!text.substr(at + 11, close).ends_with("PRIVATE KEY")) return at + 1;
  const size_t body = header_end + 5;
  size_t end = text.find("-----END", body);
  if (end == text.npos) end = text.size();
  if (end > body) spans->push_back({body, end});
  return end + 1;
}

void find_pem(std::string_view text, std::vector<Span>* spans) {
  size_t at = text.find("-----BEGIN ");
  while (at != text.npos) at = text.find("-----BEGIN ", pem_block(text, at, spans));
}

// Whether the scan reports `path`: the VBMI kernel reports no byte past ASCII.
bool ascii_head(std::string_view path) {
  return std::all_of(path.begin(), path.begin() + static_cast<std::ptrdiff_t>(std::min<size_t>(4, path.size())),
                     [](char c) { return static_cast<unsigned char>(c) < 128; });
}

}  // namespace

struct Redactor::Impl {
  std::vector<Pattern> patterns;
  std::vector<std::pair<std::string, std::string>> paths;
  bool hex_runs = true;
  std::optional<SecretScan> scan;  // when the CPU has one of its kernels

  // After the paths are known.
  void prepare(Options::Scan how) {
    scan.reset();
    const SecretScan::Kernel kernel = how == Options::Scan::avx2   ? SecretScan::Kernel::avx2
                                      : how == Options::Scan::vbmi ? SecretScan::Kernel::vbmi
                                                                   : SecretScan::Kernel::best;
    if (how == Options::Scan::every_word || !SecretScan::available(kernel)) return;
    std::vector<std::string> needles;
    for (const auto& [from, to] : paths) needles.push_back(from);
    scan.emplace(needles, kernel);
  }

  // The rules for the word that begins at `start`; returns where the next
  // word may begin (past the word, or past the value it names).
  size_t scan_word(std::string_view text, size_t start, std::vector<Span>* spans) const {
    const size_t n = text.size();
    size_t i = start;
    while (i < n && is_word(text[i])) ++i;
    std::string_view w = text.substr(start, i - start);
    while (w.size() > 1 && w.back() == '.') w.remove_suffix(1);  // the end of a sentence
    if (secret_word(w, hex_runs) || (cut_after(text, start + w.size()) && secret_prefix(w))) {
      spans->push_back({start, start + w.size()});
      return i;
    }
    // NAME=value inside one word (an environment line, a connection
    // string, a query parameter): the value is a secret by its name or by its form.
    if (size_t eq = w.find('='); eq != w.npos && eq > 0 && eq + 1 < w.size()) {
      const size_t value = start + eq + 1;
      const size_t value_end = start + w.size();
      if (secret_name(w.substr(0, eq)) ? value_end - value >= 6 : secret_word(w.substr(eq + 1), hex_runs)) {
        spans->push_back({value, value_end});
      }
      return i;
    }
    // "Bearer TOKEN", and NAME: value / "NAME": "value" / NAME = value.
    // The separator is looked for first: most words have none.
    if (i == n) return i;
    const char next = text[i];
    if (next != ' ' && next != '"' && next != '\'' && next != ':' && next != '\t') return i;
    const bool bearer = next == ' ' && w.size() == 6 && equals_ci(w, "bearer");
    size_t j = i;
    size_t limit = std::min(n, i + 6);
    bool separated = bearer;
    while (j < limit && (text[j] == ' ' || text[j] == '"' || text[j] == '\'' || text[j] == ':' ||
                         (text[j] == '=' && !bearer) || text[j] == '\t')) {
      if (text[j] == ':' || text[j] == '=') separated = true;
      ++j;
    }
    if (!separated || j == i || (!bearer && !secret_name(w))) return i;
    size_t value_end = j;
    while (value_end < n && is_word(text[value_end])) ++value_end;
    if (value_end - j < (bearer ? 8u : 6u)) return i;
    spans->push_back({j, value_end});
    return value_end;
  }

  // What the scan of a text found besides its secrets.
  struct Seen {
    bool escapes = false;     // RedactionView::may_hide
    bool stream = false;      // a "data:" line may be there
    bool path = false;        // a path to replace is there
    bool candidates = true;   // the scan found a candidate (true when every word is looked at)
  };

  // Spans of the secrets in `text`; *seen (if given) is filled.
  void find(std::string_view text, std::vector<Span>* spans, Seen* seen = nullptr) const {
    const size_t n = text.size();
    if (scan) {
      // Only the words around a candidate (base/secret_scan.h): every word
      // the rules mask holds one.
      SecretScan::Found found;
      scan->scan(text, &found);
      size_t done = 0;
      size_t pem_next = 0;  // where the next PEM block may begin
      Seen local;
      for (size_t at : found.candidates) {
        const std::string_view rest = text.substr(at);
        if (at >= 4 && at - 4 >= pem_next && text.substr(at - 4, 11) == "-----BEGIN ") {
          pem_next = pem_block(text, at - 4, spans);
        }
        local.stream = local.stream || (at > 0 && text.substr(at - 1).starts_with("data:"));
        for (size_t k = 0; k < paths.size() && !local.path; ++k) local.path = rest.starts_with(paths[k].first);
        if (at < done) continue;
        size_t start = at;
        while (start > done && is_word(text[start - 1])) --start;
        done = scan_word(text, start, spans);
      }
      if (seen != nullptr) {
        local.escapes = found.escapes;
        local.candidates = !found.candidates.empty();
        for (size_t k = 0; k < paths.size() && !local.path; ++k) {
          if (!ascii_head(paths[k].first)) local.path = text.find(paths[k].first) != text.npos;
        }
        *seen = local;
      }
    } else {
      if (text.find("-----BEGIN ") != text.npos) find_pem(text, spans);
      for (size_t i = 0; i < n;) {
        while (i < n && !is_word(text[i])) ++i;
        if (i == n) break;
        i = scan_word(text, i, spans);
      }
      if (seen != nullptr) {
        seen->escapes = RedactionView::may_hide(text);
        seen->stream = text.find("data:") != text.npos;
        for (const auto& [from, to] : paths) seen->path = seen->path || text.find(from) != text.npos;
      }
    }
    for (const Pattern& p : patterns) {
      size_t b = 0, e = 0;
      for (size_t from = 0; from <= n && p.find(text, from, &b, &e, &from);) {
        if (e > b) spans->push_back({b, e});
      }
    }
  }
};

Redactor::Redactor() : impl_(std::make_unique<Impl>()) {
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] == '/' && home[1] != '\0') impl_->paths.emplace_back(home, "~");
  impl_->prepare(Options::Scan::fastest);
}

Redactor::~Redactor() = default;
Redactor::Redactor(Redactor&&) noexcept = default;
Redactor& Redactor::operator=(Redactor&&) noexcept = default;

Status Redactor::make(Options options, std::unique_ptr<Redactor>* out) {
  auto r = std::make_unique<Redactor>();
  for (size_t i = 0; i < options.patterns.size(); ++i) {
    Pattern compiled;
    Status s = Pattern::compile(options.patterns[i], &compiled);
    if (!s.ok())
      return Status::invalid_argument("redaction pattern " + std::to_string(i + 1) + ": " + s.message());
    r->impl_->patterns.push_back(std::move(compiled));
  }
  for (auto& path : options.paths) {
    if (path.first.empty()) return Status::invalid_argument("a redaction path replacement has an empty path");
    r->impl_->paths.push_back(std::move(path));
  }
  // The longest prefix first, so /home/ann/work wins over /home/ann.
  std::stable_sort(r->impl_->paths.begin(), r->impl_->paths.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  r->impl_->hex_runs = options.hex_runs;
  r->impl_->prepare(options.scan);
  *out = std::move(r);
  return Status();
}

std::string Redactor::mask(std::string_view secret) {
  const size_t n = secret.size();
  const size_t keep = n >= 13 ? 3 : n >= 11 ? 2 : n >= 8 ? 1 : 0;
  std::string out;
  out.reserve(2 * keep + kMarker.size());
  out.append(secret.substr(0, keep));
  out.append(kMarker);
  out.append(secret.substr(n - keep));
  return out;
}

bool Redactor::redact(std::string_view text, std::string* out) const {
  // Each secret found, as the source range it covers and what replaces it.
  struct Replacement {
    size_t begin;
    size_t end;
    std::string with;
  };
  std::vector<Replacement> found;
  std::vector<Span> spans;
  Impl::Seen seen;
  impl_->find(text, &spans, &seen);
  for (const Span& s : spans) found.push_back({s.begin, s.end, mask(text.substr(s.begin, s.end - s.begin))});
  // What a plain scan cannot see: a secret behind escapes (`\nsk-...`, up to
  // two levels: a JSON string inside a JSON string), or split over the events
  // of a stream. Each is masked where it came from: its first source range
  // takes the mask, the others are left out.
  auto scan = [&](const RedactionView& view, const RedactionView* inner) {
    std::vector<Span> hidden;
    impl_->find(view.text(), &hidden);
    for (const Span& h : hidden) {
      std::vector<std::pair<size_t, size_t>> ranges;
      if (inner == nullptr) {
        ranges = view.source_ranges(h.begin, h.end);
      } else {
        for (const auto& [b, e] : view.source_ranges(h.begin, h.end)) {
          for (const auto& r : inner->source_ranges(b, e)) ranges.push_back(r);
        }
      }
      for (size_t k = 0; k < ranges.size(); ++k) {
        found.push_back({ranges[k].first, ranges[k].second,
                         k == 0 ? mask(std::string_view(view.text()).substr(h.begin, h.end - h.begin)) : ""});
      }
    }
  };
  // The decoded text is built only when it may show a secret: a rule needs
  // a fingerprint, and one that is not in the text as it is has a byte an
  // escape made, which the scan reports (base/secret_scan.h).
  if (seen.escapes && (seen.candidates || !impl_->patterns.empty())) {
    RedactionView once = RedactionView::decoded(text);
    scan(once, nullptr);
    if (RedactionView::may_hide(once.text())) scan(RedactionView::decoded(once.text()), &once);
  }
  if (seen.stream) {
    RedactionView stream;
    if (RedactionView::streamed(text, &stream)) {
      scan(stream, nullptr);
      // Tool-call arguments in pieces are a JSON text: their escapes too.
      if (RedactionView::may_hide(stream.text())) scan(RedactionView::decoded(stream.text()), &stream);
    }
  }
  if (found.empty() && !seen.path) return false;
  std::sort(found.begin(), found.end(), [](const Replacement& a, const Replacement& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end > b.end);
  });
  std::string result;
  result.reserve(text.size());
  size_t at = 0;
  for (size_t k = 0; k < found.size();) {
    Replacement r = std::move(found[k++]);
    bool merged = false;
    while (k < found.size() && found[k].begin < r.end) {  // overlapping finds: one mask over them all
      r.end = std::max(r.end, found[k++].end);
      merged = true;
    }
    if (merged) r.with = mask(text.substr(r.begin, r.end - r.begin));
    result.append(text.substr(at, r.begin - at));
    result.append(r.with);
    at = r.end;
  }
  result.append(text.substr(at));
  // Masks make no path that was not in the text (they keep a secret's ends).
  for (size_t k = 0; seen.path && k < impl_->paths.size(); ++k) {
    const auto& [from, to] = impl_->paths[k];
    for (size_t p = result.find(from); p != std::string::npos; p = result.find(from, p + to.size())) {
      // Only a whole path component: /home/ann, not /home/anna.
      size_t after = p + from.size();
      if (after < result.size() && result[after] != '/' && is_word(result[after]) && result[after] != '.') continue;
      result.replace(p, from.size(), to);
    }
  }
  if (result == text) return false;
  *out = std::move(result);
  return true;
}

std::string Redactor::operator()(std::string text) const {
  std::string out;
  if (redact(text, &out)) return out;
  return text;
}

}  // namespace carapace
