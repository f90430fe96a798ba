// The redactor: each known kind of secret masked, graduated masking, the
// configured patterns and paths, and text with nothing to mask left alone.
#include "base/redactor.h"

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "base/secret_scan.h"

using namespace carapace;

namespace {

const std::string M(Redactor::kMarker);

std::string redacted(const std::string& text) {
  std::unique_ptr<Redactor> r;
  BOOST_REQUIRE(Redactor::make(Redactor::Options{}, &r).ok());
  return (*r)(text);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(redactor)

BOOST_AUTO_TEST_CASE(masking_is_graduated_by_length) {
  BOOST_TEST(Redactor::mask("abcdefghijklm") == "abc" + M + "klm");  // 13
  BOOST_TEST(Redactor::mask("abcdefghijkl") == "ab" + M + "kl");     // 12
  BOOST_TEST(Redactor::mask("abcdefghijk") == "ab" + M + "jk");      // 11
  BOOST_TEST(Redactor::mask("abcdefghij") == "a" + M + "j");         // 10
  BOOST_TEST(Redactor::mask("abcdefgh") == "a" + M + "h");           // 8
  BOOST_TEST(Redactor::mask("abcdefg") == M);                        // 7
  BOOST_TEST(Redactor::mask("") == M);
}

BOOST_AUTO_TEST_CASE(known_secrets_are_masked) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"key sk-proj-Ab3dEf6hIj9kLm2nOp5q done", "key sk-" + M + "p5q done"},
      {"sk-ant-api03-Xy7Zw2Vu5Ts8Rq1Po4Nm", "sk-" + M + "4Nm"},
      {"id AKIAIOSFODNN7EXAMPLE.", "id AKI" + M + "PLE."},
      {"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "aws_secret_access_key = wJa" + M + "KEY"},
      {"export OPENAI_API_KEY=sk-live-1234567890abcdefghij", "export OPENAI_API_KEY=sk-" + M + "hij"},
      {"ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp" + M + "345"},
      {"github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "git" + M + "nop"},
      {"xoxb-1234567890-abcdefghij", "xox" + M + "hij"},
      {"Authorization: Bearer abc.def-ghi_jkl", "Authorization: Bearer abc" + M + "jkl"},
      {"?t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl", "?t=eyJ" + M + "XJl"},
      {"{\"password\": \"hunter22\"}", "{\"password\": \"h" + M + "2\"}"},
      {"DefaultEndpointsProtocol=https;AccountKey=Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA==;",
       "DefaultEndpointsProtocol=https;AccountKey=Zm9" + M + "A==;"},
      {"digest 0123456789abcdef0123456789ABCDEF end", "digest 012" + M + "DEF end"},
      {"AIzaSyA-0123456789abcdefghijklmnopqrstu", "AIz" + M + "stu"},
  };
  for (const auto& [text, expected] : cases) {
    std::string got = redacted(text);
    BOOST_TEST(got == expected, text << " -> " << got);
  }
}

BOOST_AUTO_TEST_CASE(a_jwt_on_its_own_is_masked) {
  BOOST_TEST(redacted("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl") == "eyJ" + M + "XJl");
}

BOOST_AUTO_TEST_CASE(pem_private_keys_are_masked_also_escaped_in_json) {
  std::string pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n";
  std::string got = redacted(pem);
  BOOST_TEST(got.find("MIIEvQ") == std::string::npos, got);
  BOOST_TEST(got.starts_with("-----BEGIN PRIVATE KEY-----"));
  BOOST_TEST(got.ends_with("-----END PRIVATE KEY-----\n"));
  std::string json = R"({"type": "service_account", "private_key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END RSA PRIVATE KEY-----\n"})";
  got = redacted(json);
  BOOST_TEST(got.find("MIIEvQ") == std::string::npos, got);
  // A public key or certificate is not a secret.
  std::string cert = "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ\n-----END CERTIFICATE-----";
  BOOST_TEST(redacted(cert) == cert);
}

BOOST_AUTO_TEST_CASE(text_without_secrets_is_left_alone) {
  const std::vector<std::string> clean = {
      "",
      "The model read notes/summary.txt and wrote 19 bytes.",
      "max_tokens: 4096, input_tokens: 1200, tokens: 5",
      "\"api_key_env\": \"OPENAI_API_KEY\"",  // a name, not a value
      "skip-this-word is-not-a-secret-at-all",
      "state 3f2a9c81b7de (12 hex digits)",
      "password: hi",  // too short to be one
      "Bearer",
  };
  std::unique_ptr<Redactor> r;
  BOOST_REQUIRE(Redactor::make(Redactor::Options{}, &r).ok());
  for (const auto& text : clean) {
    std::string out = "untouched";
    BOOST_TEST(!r->redact(text, &out), text);
    BOOST_TEST(out == "untouched");
  }
}

BOOST_AUTO_TEST_CASE(configured_patterns_and_paths) {
  std::unique_ptr<Redactor> r;
  Redactor::Options options{.patterns = {"acct-([0-9]{6,})", "internal\\.example\\.com"},
                            .paths = {{"/srv/projects/acme", "<project>"}}};
  BOOST_REQUIRE(Redactor::make(options, &r).ok());
  BOOST_TEST((*r)("account acct-12345678 at internal.example.com") ==
             "account acct-1" + M + "8 at int" + M + "com");
  BOOST_TEST((*r)("wrote /srv/projects/acme/src/a.cc") == "wrote <project>/src/a.cc");
  BOOST_TEST((*r)("wrote /srv/projects/acmes/x") == "wrote /srv/projects/acmes/x");  // not a component
  Status bad = Redactor::make(Redactor::Options{.patterns = {"(unclosed"}}, &r);
  BOOST_TEST(bad.is_invalid_argument());
  BOOST_TEST(bad.message().find("(unclosed") != std::string::npos, bad.message());
}

BOOST_AUTO_TEST_CASE(the_home_directory_becomes_a_tilde) {
  const char* home = std::getenv("HOME");
  if (home == nullptr || home[0] != '/' || home[1] == '\0') return;
  BOOST_TEST(redacted(std::string("see ") + home + "/notes.txt") == "see ~/notes.txt");
}

BOOST_AUTO_TEST_SUITE_END()

// A key a tool printed reaches the next request body JSON-escaped, and the
// answer's stream in pieces: each is found where it hides.
BOOST_AUTO_TEST_SUITE(hidden_secrets)

const std::string kKey = std::string("sk-") + "proj-" + "ABCDEFGHIJKLMNOPQRSTUVWX1234";

bool leaks(const std::string& out) {
  return out.find("DEFGHIJKLMNOPQRSTUVWX") != std::string::npos || out.find("MNOPQRS") != std::string::npos;
}

BOOST_AUTO_TEST_CASE(behind_json_escapes) {
  for (const std::string before : {"\\n", "\\t", "\\r", "\\\"", "\\\\", "\\u0020", "%0A", "%20"}) {
    std::string body = R"({"role":"tool","content":"cat a.txt)" + before + kKey + R"(\n"})";
    std::string out = redacted(body);
    BOOST_TEST(!leaks(out), before << ": " << out);
    BOOST_TEST(out.find(R"({"role":"tool","content":"cat a.txt)" + before) == 0u, before << ": " << out);
    BOOST_TEST(out.find(M) != std::string::npos, out);
  }
  // The key itself escaped, letter by letter or in part.
  std::string spelled = R"("\u0073\u006b-proj-ABCDEFGHIJKLMNOPQRSTUVWX1234")";
  BOOST_TEST(!leaks(redacted(spelled)), redacted(spelled));
  std::string percent = "https://h/x?k=%73k-proj-ABCDEFGHIJKLMNOPQRSTUVWX1234&y=1";
  BOOST_TEST(!leaks(redacted(percent)), redacted(percent));
  // Two levels: tool-call arguments (a JSON string) inside a request body.
  std::string nested = R"({"arguments":"{\"command\":\"echo hi\\n)" + kKey + R"(\"}"})";
  BOOST_TEST(!leaks(redacted(nested)), redacted(nested));
}

BOOST_AUTO_TEST_CASE(split_over_the_events_of_a_stream) {
  auto event = [](const std::string& piece) {
    return R"(data: {"id":"c1","choices":[{"index":0,"delta":{"content":")" + piece + "\"}}]}\n\n";
  };
  std::string body = event("Your key is ") + event(kKey.substr(0, 9)) + event(kKey.substr(9, 10)) +
                     event(kKey.substr(19)) + event(".") + "data: [DONE]\n\n";
  std::string out = redacted(body);
  BOOST_TEST(out.find(kKey.substr(9, 10)) == std::string::npos, out);
  BOOST_TEST(out.find(kKey.substr(19)) == std::string::npos, out);
  BOOST_TEST(out.find("Your key is ") != std::string::npos, out);
  // Anthropic's tool input in pieces, with an escape between.
  std::string anthropic = R"(event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"command\": \"echo )" +
                          kKey.substr(0, 12) + R"("}}

event: content_block_delta
data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":")" +
                          kKey.substr(12) + R"(\"}"}}

)";
  BOOST_TEST(!leaks(redacted(anthropic)), redacted(anthropic));
}

BOOST_AUTO_TEST_CASE(cut_short_by_a_cap) {
  std::string shell = "token: " + kKey.substr(0, 15) + "\n[... 1,000 bytes truncated: kept 64 of 1,064 ...]\nend";
  BOOST_TEST(redacted(shell).find(kKey.substr(8, 7)) == std::string::npos, redacted(shell));
  std::string body = "{\"a\":\"" + kKey.substr(0, 14) + "\n[carapace: body cut: the first 20 of its 90 bytes]";
  BOOST_TEST(redacted(body).find(kKey.substr(8, 6)) == std::string::npos, redacted(body));
  // A preview cut it short (log show's summaries).
  std::string preview = "\"{\"content\": \"remember\\n" + kKey.substr(0, 17) + "\u2026\"";
  BOOST_TEST(redacted(preview).find(kKey.substr(8, 9)) == std::string::npos, redacted(preview));
  // Not a cut: words that merely start alike stay.
  BOOST_TEST(redacted("pip install sk-learn\n[... nothing") == "pip install sk-learn\n[... nothing");
  BOOST_TEST(redacted("pip install sk-learn\nthen go") == "pip install sk-learn\nthen go");
}

BOOST_AUTO_TEST_CASE(text_with_escapes_and_no_secret_is_left_alone) {
  for (const std::string& text :
       {std::string(R"({"content":"line 1\nline 2\t\"quoted\" \u00e9 100%25 done"})"),
        std::string("data: {\"choices\":[{\"delta\":{\"content\":\"Hello\"}}]}\n\ndata: [DONE]\n\n")}) {
    std::string out;
    BOOST_TEST(!Redactor().redact(text, &out), out);
  }
}

BOOST_AUTO_TEST_SUITE_END()

// The redactor looks only at the words around the scan's candidates; it must
// mask exactly what it masks looking at every word. Random texts built from
// secrets, names, separators, escapes, streams, cut markers, paths, UTF-8
// and noise, compared kernel by kernel.
BOOST_AUTO_TEST_SUITE(redactor_scan)

BOOST_AUTO_TEST_CASE(the_candidate_scan_masks_what_looking_at_every_word_masks) {
  const char* home = std::getenv("HOME");
  const std::vector<std::string> pieces = {
      hidden_secrets::kKey, "AKIAIOSFODNN7EXAMPLE", "AIzaSyA1234567890abcdefghijklmnopqrstu", "ghp_0123456789abcdefghijABCDEFGHIJ012345",
      "github_pat_11ABCDEFG0123456789_abcdefghij", "xoxb-123456789012-abcdefghij",
      "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.SflKxwRJSMeKKF2QT4fw", "Bearer abcdef0123456789.ghij",
      "bearer", "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----",
      "-----BEGIN RSA PRIVATE KEY-----\\nMIIEvQIBADANBg\\n-----END", "0123456789abcdef0123456789abcdef",
      "0123456789abcdef0123456789abcde", "0123456789abcdef0123456789abcdef0123456789ABCDEF01234567",
      "\"password\": \"hunter22x\"", "{\\\"password\\\": \\\"hunter22x\\\"}", "API_KEY=abcdef123", "token: xyz12345",
      "Secret = 'abcdefgh'", "credentials:abcdefgh", "x-auth: qwertyuiop", "AccountKey=abc/def+ghi==", "passwd",
      "password..", "client_secret", "api-key", "sk-", "AKIA", "eyJ", "ghp_", "sk-learn", "tokens", "keyboard",
      "authority", "monkey", "return", "order", "secretary", "credential", "the", "a.txt", "max_tokens=4096",
      "\n[... 1,000 bytes truncated: kept 64 of 1,064 ...]", "\n[carapace: body cut: x]", "\xe2\x80\xa6", "\\n",
      "\\t", "\\\"", "\\\\", "\\u0073", "\\u006b", "%73", "%0A", "%2", "\\", "%", "\\\\n", "data: {\"choices\":[{\"delta\":{\"content\":\"",
      "\"}}]}\n\n", "data: [DONE]\n\n", "\"partial_json\":\"", "/home/anna", "/home/annabel", home ? home : "/root",
      "ORDER-123456", "/\xc3\xa9t\xc3\xa9/notes", "a\\/b\\/c", "\\u0073k-proj-Zyxwvutsrqponmlkjihgf9876",
      "%73k-proj-Zyxwvutsrqponmlkjihgf9876", "\\u0070assword\\\": \\\"hunter22x", "\xc3\xa9", "\xeb\xe5\xf9", " ", " ", " ", ":", "=", "\"", "'", ".", "\t", "\n", ",", "{", "}", "-", "_", "/"};
  // Each kernel against every word, with and without a pattern of one's own
  // (with one, the decoded view is always scanned).
  struct Pair {
    std::string label;
    std::unique_ptr<Redactor> every_word, fast;
  };
  std::vector<Pair> pairs;
  for (bool with_pattern : {false, true}) {
    for (auto [scan, label] : {std::pair{Redactor::Options::Scan::avx2, "avx2"}, {Redactor::Options::Scan::vbmi, "vbmi"}}) {
      if (!SecretScan::available(scan == Redactor::Options::Scan::avx2 ? SecretScan::Kernel::avx2
                                                                       : SecretScan::Kernel::vbmi)) {
        continue;
      }
      Redactor::Options o;
      o.paths = {{"/home/anna", "<anna>"}, {"/\xc3\xa9t\xc3\xa9", "<summer>"}};  // the second not ASCII
      if (with_pattern) o.patterns = {"ORDER-[0-9]{6}", "a/b/c"};
      Pair pair{std::string(label) + (with_pattern ? " with a pattern" : ""), nullptr, nullptr};
      o.scan = Redactor::Options::Scan::every_word;
      BOOST_REQUIRE(Redactor::make(o, &pair.every_word).ok());
      o.scan = scan;
      BOOST_REQUIRE(Redactor::make(o, &pair.fast).ok());
      pairs.push_back(std::move(pair));
    }
  }
  if (pairs.empty()) return;
  // Pieces with no fingerprint, escapes among them: a text of these and at
  // most one other piece tests when the decoded view may be skipped.
  const std::vector<std::string> noise = {"the", "tokens", "order", "keyboard", "donkeys", "a.txt", "42", "3f2a9c81b7de",
                                          " ", ": ", "=", "\"", "{", "}", ",", "\\n", "\\r", "\\/", "\\\"", "\\\\n",
                                          "\\\\t", "100%", "\xc3\xa9", "\xe2\x80\xa6", "\n"};
  std::mt19937_64 rng(2026);
  size_t masked = 0;
  for (int round = 0; round < 30000; ++round) {
    std::string text;
    if (round % 3 == 2) {
      const size_t count = std::uniform_int_distribution<size_t>(0, 30)(rng);
      for (size_t i = 0; i < count; ++i) text += noise[rng() % noise.size()];
      if (rng() % 2 == 0) text.insert(rng() % (text.size() + 1), pieces[rng() % pieces.size()]);
    } else {
      const size_t count = std::uniform_int_distribution<size_t>(1, round % 100 == 0 ? 2000 : 40)(rng);
      for (size_t i = 0; i < count; ++i) {
        if (rng() % 8 == 0) {
          text += static_cast<char>(std::uniform_int_distribution<int>(1, 255)(rng));
        } else {
          text += pieces[rng() % pieces.size()];
        }
      }
    }
    if (rng() % 4 == 0) text = text.substr(rng() % (text.size() + 1));  // a slice: other offsets
    for (auto& [label, every_word, fast] : pairs) {
      std::string want, got;
      const bool want_changed = every_word->redact(text, &want);
      const bool got_changed = fast->redact(text, &got);
      masked += want_changed;
      BOOST_TEST_REQUIRE((got_changed == want_changed && (!want_changed || got == want)),
                         label << " differs on "
                               << nlohmann::json(text).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace)
                               << "\nevery word: " << want << "\n" << label << ": " << got);
    }
  }
  BOOST_TEST(masked > 10000u);  // the texts hold secrets, not only noise
}

BOOST_AUTO_TEST_SUITE_END()
