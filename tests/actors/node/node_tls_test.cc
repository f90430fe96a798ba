#define BOOST_TEST_MODULE node_tls_test
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "actors/node/node_tls.h"
#include "base/child_process.h"
#include "base/unique_fd.h"
#include "tests/support/child_process.h"
#include "tests/support/printing.h"
#include "tests/support/temp_dir.h"

using namespace carapace;
using carapace::testing::read_text;
using carapace::testing::TempDir;
namespace fs = std::filesystem;

namespace {

constexpr long kDay = 86400;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

unsigned mode_of(const std::string& path) {
  struct stat st {};
  BOOST_REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

bool have_openssl() { return std::system("command -v openssl >/dev/null 2>&1") == 0; }

bool says(const Status& s, const std::string& part) { return s.message().find(part) != std::string::npos; }

// Asserts `s` failed with a message holding each of `parts`.
void check_refused(const Status& s, std::initializer_list<std::string> parts) {
  BOOST_TEST_INFO("status: " << s.to_string());
  BOOST_TEST(!s.ok());
  for (const auto& part : parts) BOOST_TEST(says(s, part), "message lacks \"" << part << "\"");
}

// A CA and a certificate for node-a signed by it.
struct Made {
  TempDir tmp;
  std::string ca = tmp.sub("ca");
  std::string node = tmp.sub("nodes/node-a");
  Made() {
    CHECK_OK(make_node_ca(ca, "test-ca", 30));
    CHECK_OK(make_node_certificate(ca, node, "node-a", 30));
  }
};

}  // namespace

BOOST_FIXTURE_TEST_CASE(made_certificates_check_ok, Made) {
  NodeTlsFiles files;
  std::string cn;
  CHECK_OK(check_node_tls(node, &files, &cn));
  BOOST_TEST(cn == "node-a");
  BOOST_TEST(files.certificate == node + "/node.crt");
  BOOST_TEST(files.key == node + "/node.key");
  BOOST_TEST(files.ca == node + "/ca.crt");
  BOOST_TEST(read_text(files.ca) == read_text(ca + "/ca.crt"));
  BOOST_TEST(mode_of(ca) == 0700u);
  BOOST_TEST(mode_of(tmp.sub("nodes")) == 0700u);
  BOOST_TEST(mode_of(ca + "/ca.key") == 0600u);
  BOOST_TEST(mode_of(node + "/node.key") == 0600u);
  // No temporary file is left behind.
  BOOST_TEST(std::distance(fs::directory_iterator(node), fs::directory_iterator()) == 3);

  // A relative directory is answered with absolute paths.
  const fs::path cwd = fs::current_path();
  fs::current_path(tmp.path());
  Status relative = check_node_tls("nodes/node-a", &files, nullptr);
  fs::current_path(cwd);
  CHECK_OK(relative);
  BOOST_TEST(files.key == node + "/node.key");
}

// The extensions as an outside reader sees them.
BOOST_FIXTURE_TEST_CASE(openssl_reads_the_extensions, Made) {
  if (!have_openssl()) {
    BOOST_WARN_MESSAGE(false, "the openssl command is not installed: the extensions not read");
    return;
  }
  const std::string log = tmp.sub("x509.log");
  const auto show = [&](const std::string& cert) {
    std::remove(log.c_str());
    BOOST_REQUIRE(
        carapace::testing::run_child("/bin/sh", {"-c", "openssl x509 -noout -text -in " + cert}, log)
            .succeeded());
    return read_text(log);
  };
  const std::string ca_text = show(ca + "/ca.crt");
  BOOST_TEST(ca_text.find("Subject: CN = test-ca") != std::string::npos);
  BOOST_TEST(ca_text.find("ASN1 OID: prime256v1") != std::string::npos);
  BOOST_TEST(ca_text.find("X509v3 Basic Constraints: critical") != std::string::npos, ca_text);
  BOOST_TEST(ca_text.find("CA:TRUE") != std::string::npos);
  BOOST_TEST(ca_text.find("Certificate Sign, CRL Sign") != std::string::npos);
  const std::string node_text = show(node + "/node.crt");
  BOOST_TEST(node_text.find("Issuer: CN = test-ca") != std::string::npos);
  BOOST_TEST(node_text.find("Subject: CN = node-a") != std::string::npos);
  BOOST_TEST(node_text.find("CA:FALSE") != std::string::npos);
  BOOST_TEST(node_text.find("Digital Signature, Key Encipherment") != std::string::npos);
  BOOST_TEST(node_text.find("TLS Web Server Authentication, TLS Web Client Authentication") !=
             std::string::npos);
  BOOST_TEST(node_text.find("DNS:node-a") != std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(check_refuses_a_missing_file, Made) {
  fs::remove(node + "/ca.crt");
  Status s = check_node_tls(node, nullptr);
  BOOST_TEST(s.is_not_found());
  check_refused(s, {node + "/ca.crt", "does not exist", "carapace node certs"});

  fs::create_directory(node + "/ca.crt");
  check_refused(check_node_tls(node, nullptr), {node + "/ca.crt", "a directory"});
}

BOOST_FIXTURE_TEST_CASE(check_refuses_a_key_others_can_read, Made) {
  fs::permissions(node + "/node.key", static_cast<fs::perms>(0644));
  Status s = check_node_tls(node, nullptr);
  BOOST_TEST(s.is_invalid_argument());
  check_refused(s, {node + "/node.key", "mode 0644", "chmod 600 " + node + "/node.key"});
  fs::permissions(node + "/node.key", static_cast<fs::perms>(0640));
  check_refused(check_node_tls(node, nullptr), {"mode 0640"});
}

BOOST_FIXTURE_TEST_CASE(check_refuses_the_key_of_another_certificate, Made) {
  const std::string other = tmp.sub("node-b");
  CHECK_OK(make_node_certificate(ca, other, "node-b", 30));
  write_text(node + "/node.key", read_text(other + "/node.key"));
  check_refused(check_node_tls(node, nullptr),
                {node + "/node.key", "is not the key of " + node + "/node.crt"});
}

BOOST_FIXTURE_TEST_CASE(check_refuses_a_certificate_of_another_ca, Made) {
  const std::string other_ca = tmp.sub("other-ca");
  const std::string other = tmp.sub("node-x");
  CHECK_OK(make_node_ca(other_ca, "other-ca", 30));
  CHECK_OK(make_node_certificate(other_ca, other, "node-x", 30));
  CHECK_OK(check_node_tls(other, nullptr));
  write_text(other + "/ca.crt", read_text(ca + "/ca.crt"));
  check_refused(check_node_tls(other, nullptr),
                {other + "/node.crt", "signed by another CA", "\"other-ca\"", "\"test-ca\""});
}

BOOST_FIXTURE_TEST_CASE(check_refuses_an_expired_certificate, Made) {
  const std::string old = tmp.sub("old");
  CHECK_OK(make_node_certificate_with_validity(ca, old, "old", -2 * kDay, -kDay));
  check_refused(check_node_tls(old, nullptr), {old + "/node.crt", "the certificate expired on 20"});

  const std::string future = tmp.sub("future");
  CHECK_OK(make_node_certificate_with_validity(ca, future, "future", kDay, 2 * kDay));
  check_refused(check_node_tls(future, nullptr), {future + "/node.crt", "not valid before", "clock"});
}

BOOST_FIXTURE_TEST_CASE(check_refuses_what_is_not_pem, Made) {
  const std::string cert = read_text(node + "/node.crt");
  write_text(node + "/node.crt", cert.substr(0, cert.size() / 2));
  check_refused(check_node_tls(node, nullptr), {node + "/node.crt", "does not hold a PEM certificate"});
  write_text(node + "/node.crt", cert);

  const std::string key = read_text(node + "/node.key");
  write_text(node + "/node.key", "not a key\n");
  check_refused(check_node_tls(node, nullptr), {node + "/node.key", "does not hold a PEM private key"});
  // A key PEM given where the CA certificate belongs.
  write_text(node + "/node.key", key);
  write_text(node + "/ca.crt", key);
  check_refused(check_node_tls(node, nullptr), {node + "/ca.crt", "does not hold a PEM certificate"});
}

// Refused with a message, without asking for a passphrase on the terminal.
BOOST_FIXTURE_TEST_CASE(check_refuses_an_encrypted_key, Made) {
  if (!have_openssl()) {
    BOOST_WARN_MESSAGE(false, "the openssl command is not installed: no encrypted key to try");
    return;
  }
  const std::string key = node + "/node.key";
  BOOST_REQUIRE(
      carapace::testing::run_child(
          "/bin/sh",
          {"-c", "openssl pkey -in " + key + " -aes256 -passout pass:secret -out " + key + ".enc </dev/null"},
          tmp.sub("pkey.log"))
          .succeeded());
  fs::rename(key + ".enc", key);
  fs::permissions(key, static_cast<fs::perms>(0600));
  check_refused(check_node_tls(node, nullptr), {key, "encrypted with a passphrase"});
}

BOOST_FIXTURE_TEST_CASE(check_refuses_a_large_file, Made) {
  write_text(node + "/node.crt", read_text(node + "/node.crt") + std::string(100 * 1024, '\n'));
  Status s = check_node_tls(node, nullptr);
  BOOST_TEST(s.is_invalid_argument());
  check_refused(s, {node + "/node.crt", "larger than 64 KiB"});
}

BOOST_FIXTURE_TEST_CASE(keys_are_never_overwritten, Made) {
  const std::string ca_key = read_text(ca + "/ca.key");
  const std::string ca_cert = read_text(ca + "/ca.crt");
  check_refused(make_node_ca(ca, "test-ca", 30), {ca + "/ca.key", "never overwritten"});
  BOOST_TEST(read_text(ca + "/ca.key") == ca_key);
  BOOST_TEST(read_text(ca + "/ca.crt") == ca_cert);

  const std::string node_key = read_text(node + "/node.key");
  check_refused(make_node_certificate(ca, node, "node-a", 30), {node + "/node.key", "exists"});
  BOOST_TEST(read_text(node + "/node.key") == node_key);
  CHECK_OK(check_node_tls(node, nullptr));
}

BOOST_AUTO_TEST_CASE(bad_names_and_days_are_refused) {
  TempDir tmp;
  const std::string ca = tmp.sub("ca");
  for (const std::string& name : std::vector<std::string>{"", "a b", "../up", "node/a", std::string(65, 'n'),
                                                          std::string("n\x1b[2J")}) {
    Status s = make_node_ca(ca, name, 30);
    BOOST_TEST(s.is_invalid_argument(), s.to_string());
    BOOST_TEST(says(s, "is not 1 to 64 of the characters"), s.to_string());
  }
  BOOST_TEST(says(make_node_ca(ca, "n\x1b[2J", 30), "n\\x1b[2J"));
  for (int days : {0, -1, 3651}) {
    Status s = make_node_ca(ca, "ca", days);
    BOOST_TEST(s.is_invalid_argument());
    BOOST_TEST(says(s, "validity of " + std::to_string(days) + " days"), s.to_string());
  }
  BOOST_TEST(!fs::exists(ca));

  CHECK_OK(make_node_ca(ca, std::string(64, 'c'), 3650));
  check_refused(make_node_certificate(ca, tmp.sub("n"), "x y", 30), {"\"x y\""});
  check_refused(make_node_certificate(ca, tmp.sub("n"), "n", 0), {"validity of 0 days"});
  check_refused(make_node_certificate_with_validity(ca, tmp.sub("n"), "n", kDay, kDay), {"is empty"});
  BOOST_TEST(!fs::exists(tmp.sub("n")));
  check_refused(make_node_certificate(tmp.sub("no-ca"), tmp.sub("n"), "n", 30),
                {tmp.sub("no-ca") + "/ca.crt", "does not exist"});
  check_refused(check_node_tls("", nullptr), {"not named"});
}

// Mutual TLS through the openssl command line: the files work for a real
// server and client, and a certificate of another CA is refused.
namespace {

int free_port() {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  BOOST_REQUIRE(::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  BOOST_REQUIRE(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  return ntohs(addr.sin_port);
}

bool accepts_connections(int port) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
}

// `openssl s_server -www` over node-a's files, killed when this goes.
// -verify_return_error: without it s_server only logs a client certificate
// that fails to verify, and serves the client all the same.
class Server {
 public:
  Server(const std::string& node, const std::string& log) : port_(free_port()) {
    pid_ = spawn_child_process("/bin/sh",
                               {"-c", "exec openssl s_server -accept 127.0.0.1:" + std::to_string(port_) +
                                          " -cert " + node + "/node.crt -key " + node + "/node.key -CAfile " +
                                          node + "/ca.crt -Verify 1 -verify_return_error -www </dev/null"},
                               log);
    BOOST_REQUIRE(pid_ > 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!accepts_connections(port_)) {
      BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                            "s_server did not start: " << read_text(log));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ~Server() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  int port() const { return port_; }

 private:
  int port_;
  pid_t pid_ = -1;
};

// Sends one HTTP request through `openssl s_client` with `client`'s
// certificate and key, trusting `ca_file`; returns what the client printed.
// -ign_eof reads until the server closes, so a refusal the server sends
// after a TLS 1.3 handshake is seen too.
std::string connect_with(int port, const std::string& client, const std::string& ca_file,
                         const std::string& log, bool* succeeded) {
  std::remove(log.c_str());
  const pid_t pid = spawn_child_process(
      "/bin/sh",
      {"-c",
       "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | openssl s_client -connect 127.0.0.1:" + std::to_string(port) +
           " -servername node-a -verify_hostname node-a -cert " + client + "/node.crt -key " + client +
           "/node.key -CAfile " + ca_file + " -verify_return_error -ign_eof"},
      log);
  BOOST_REQUIRE(pid > 0);
  int status = 0;
  if (!wait_child_process(pid, 5000, &status)) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    BOOST_FAIL("s_client did not finish in 5 s: " << read_text(log));
  }
  *succeeded = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return read_text(log);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The end of a client's output, where its verdict is: enough for a failure message.
std::string tail(const std::string& text) {
  return text.size() > 2000 ? text.substr(text.size() - 2000) : text;
}

}  // namespace

BOOST_FIXTURE_TEST_CASE(certificates_work_for_mutual_tls, Made) {
  if (!have_openssl()) {
    BOOST_WARN_MESSAGE(false, "the openssl command is not installed: mutual TLS not tried");
    return;
  }
  const std::string node_b = tmp.sub("node-b");
  CHECK_OK(make_node_certificate(ca, node_b, "node-b", 30));
  const std::string other_ca = tmp.sub("other-ca");
  const std::string stranger = tmp.sub("stranger");
  CHECK_OK(make_node_ca(other_ca, "other-ca", 30));
  CHECK_OK(make_node_certificate(other_ca, stranger, "node-a", 30));

  Server server(node, tmp.sub("server.log"));
  const std::string log = tmp.sub("client.log");
  bool ok = false;

  std::string out = connect_with(server.port(), node_b, node_b + "/ca.crt", log, &ok);
  BOOST_TEST(ok, tail(out));
  BOOST_TEST(has(out, "Verify return code: 0 (ok)"), tail(out));
  BOOST_TEST(has(out, "HTTP/1.0 200 ok"), tail(out));
  // The server saw node-b's certificate (s_server -www prints it in its page).
  BOOST_TEST((has(out, "CN = node-b") || has(out, "CN=node-b")), tail(out));

  // The server refuses a client certificate of another CA...
  out = connect_with(server.port(), stranger, node_b + "/ca.crt", log, &ok);
  BOOST_TEST(!ok, tail(out));
  BOOST_TEST(!has(out, "200 ok"), tail(out));
  BOOST_TEST(has(out, "unknown ca"), tail(out));

  // ...and a client refuses the server when it trusts another CA.
  out = connect_with(server.port(), stranger, stranger + "/ca.crt", log, &ok);
  BOOST_TEST(!ok, tail(out));
  BOOST_TEST(!has(out, "200 ok"), tail(out));
  BOOST_TEST(has(out, "certificate verify failed"), tail(out));
}
