#include "actors/node/node_tls.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <memory>

#include "base/bounded_file.h"
#include "base/text.h"
#include "base/unique_fd.h"

namespace carapace {
namespace {

// A PEM certificate or key is a few KiB; anything larger is not one.
constexpr uint64_t kMaxFileBytes = 64 * 1024;
constexpr size_t kMaxNameLength = 64;
constexpr int kMaxDays = 3650;
constexpr long kMaxOffsetSeconds = kMaxDays * 86400L;

// What the user runs to replace what a message says is wrong.
std::string remake_node_hint(const std::string& dir) {
  return " (make new ones: carapace node certs " + dir + " --ca CA_DIR --name NAME)";
}
std::string remake_ca_hint(const std::string& ca_dir) {
  return " (carapace node certs DIR --ca " + ca_dir + " --name NAME makes one in an empty directory)";
}

template <auto Free>
struct Deleter {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using X509Ptr = std::unique_ptr<X509, Deleter<X509_free>>;
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free_all>>;
using BnPtr = std::unique_ptr<BIGNUM, Deleter<BN_free>>;
using ExtensionPtr = std::unique_ptr<X509_EXTENSION, Deleter<X509_EXTENSION_free>>;
using StorePtr = std::unique_ptr<X509_STORE, Deleter<X509_STORE_free>>;
using StoreCtxPtr = std::unique_ptr<X509_STORE_CTX, Deleter<X509_STORE_CTX_free>>;

// The reason of OpenSSL's newest error. Empties the thread's error queue, so
// that a later, unrelated call does not report this failure as its own.
std::string openssl_reason() {
  const unsigned long err = ERR_peek_last_error();
  const char* reason = err == 0 ? nullptr : ERR_reason_error_string(err);
  std::string text = reason != nullptr ? reason : "no reason given";
  ERR_clear_error();
  return text;
}

// A copy of `s` with `more` appended to its message, under the same code.
Status with_hint(const Status& s, const std::string& more) {
  std::string msg = s.message() + more;
  if (s.is_not_found()) return Status::not_found(std::move(msg));
  if (s.is_invalid_argument()) return Status::invalid_argument(std::move(msg));
  return Status::io_error(std::move(msg));
}

// OpenSSL returns errors, std::string and std::filesystem may throw (out of
// memory): the public functions let nothing escape.
template <typename F>
Status without_exceptions(const char* what, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    return Status::io_error(std::string(what) + " failed: " + e.what());
  }
}

Status check_name(const std::string& name) {
  const bool valid =
      !name.empty() && name.size() <= kMaxNameLength && std::all_of(name.begin(), name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-';
      });
  if (valid) return Status::ok_status();
  // The name comes from a command line: shown cut and without terminal controls.
  return Status::invalid_argument("the name \"" + terminal_safe(name.substr(0, kMaxNameLength + 1)) +
                                  "\" is not 1 to 64 of the characters A-Z a-z 0-9 . _ -");
}

Status check_days(int days) {
  if (days >= 1 && days <= kMaxDays) return Status::ok_status();
  return Status::invalid_argument("the validity of " + std::to_string(days) +
                                  " days is out of range: give 1 to 3650 days");
}

// An I/O error naming `subject`; `err` is passed in so that it is read before
// building the message can touch errno.
Status io_failure(const std::string& subject, const char* what, int err) {
  return Status::io_error(subject + " " + what + ": " + errno_text(err));
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Creates `dir` and its missing parents with mode 0700. Directories that
// exist keep their mode: they may be the user's own.
Status make_private_dir(const std::string& dir) {
  if (dir.empty()) return Status::invalid_argument("the directory to write to is not named");
  std::filesystem::path so_far;
  for (const auto& part : std::filesystem::path(dir)) {
    so_far /= part;
    if (::mkdir(so_far.c_str(), 0700) != 0 && errno != EEXIST) {
      const int err = errno;
      return io_failure(so_far.string(), "cannot be created", err);
    }
  }
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::invalid_argument(dir + " is not a directory: name a directory to write the files in");
  }
  return Status::ok_status();
}

Status write_synced(const std::string& path, const std::string& data, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (!fd) return io_failure(path, "cannot be created", errno);
  // The umask may have taken bits away or left more than a key may have.
  if (::fchmod(fd.get(), mode) != 0) return io_failure(path, "cannot be given its mode", errno);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd.get(), data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return io_failure(path, "cannot be written", errno);
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd.get()) != 0) return io_failure(path, "cannot be synced", errno);
  if (::close(fd.release()) != 0) return io_failure(path, "cannot be closed", errno);
  return Status::ok_status();
}

// Writes `data` to dir/name through a synced temporary file, so that a crash
// leaves the old file or the new one, never a part of one. With
// `keep_existing` an existing dir/name stays and the write fails: link(),
// unlike rename(), refuses to replace a name, so two makers racing cannot
// overwrite a key either.
Status write_file_atomically(const std::string& dir, const std::string& name, const std::string& data,
                             mode_t mode, bool keep_existing) {
  const std::string path = dir + "/" + name;
  const std::string tmp = dir + "/." + name + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());  // left by a crash of this pid's predecessor, if any
  Status written = write_synced(tmp, data, mode);
  if (!written.ok()) {
    ::unlink(tmp.c_str());
    return written;
  }
  const int placed = keep_existing ? ::link(tmp.c_str(), path.c_str()) : ::rename(tmp.c_str(), path.c_str());
  const int err = errno;
  ::unlink(tmp.c_str());  // after link() the file keeps its name; after rename() tmp is gone already
  if (placed != 0 && err == EEXIST) {
    return Status::invalid_argument(path + " appeared while it was being written: it was left as it is");
  }
  if (placed != 0) return io_failure(path, "cannot be written", err);
  // The new name is durable once the directory is.
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd || ::fsync(dir_fd.get()) != 0) return io_failure(dir, "cannot be synced", errno);
  return Status::ok_status();
}

std::string time_text(const ASN1_TIME* t) {
  std::tm tm{};
  if (t == nullptr || ASN1_TIME_to_tm(t, &tm) != 1) return "an unreadable date";
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string common_name_of(const X509_NAME* name) {
  const int at = X509_NAME_get_index_by_NID(name, NID_commonName, -1);
  if (at < 0) return "";
  unsigned char* utf8 = nullptr;
  const int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, at)));
  if (n < 0) {
    ERR_clear_error();
    return "";
  }
  std::string cn(reinterpret_cast<char*>(utf8), static_cast<size_t>(n));
  OPENSSL_free(utf8);
  return cn;
}

std::string pem_text(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

Status certificate_pem(X509* cert, std::string* out) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return Status::io_error("cannot encode a certificate: " + openssl_reason());
  }
  *out = pem_text(bio.get());
  return Status::ok_status();
}

// Unencrypted PKCS#8: a node starts unattended, with nobody to type a passphrase.
Status key_pem(EVP_PKEY* key, std::string* out) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return Status::io_error("cannot encode a key: " + openssl_reason());
  }
  *out = pem_text(bio.get());
  return Status::ok_status();
}

Status parse_certificate(const std::string& path, const std::string& pem, const std::string& hint,
                         X509Ptr* out) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio) out->reset(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (!*out) {
    ERR_clear_error();  // OpenSSL's reason ("no start line") says less than this
    return Status::invalid_argument(path + " does not hold a PEM certificate (-----BEGIN CERTIFICATE-----)" +
                                    hint);
  }
  return Status::ok_status();
}

// Refuses to decrypt: without it OpenSSL would ask for a passphrase on the terminal.
int no_passphrase(char*, int, int, void*) { return -1; }

Status parse_key(const std::string& path, const std::string& pem, const std::string& hint, PkeyPtr* out) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio) out->reset(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  if (*out) return Status::ok_status();
  ERR_clear_error();  // OpenSSL's reason for text that is no key is "unsupported"
  if (pem.find("ENCRYPTED") != std::string::npos) {
    return Status::invalid_argument(
        path + " is encrypted with a passphrase, which a node cannot type: decrypt it (openssl pkey -in " +
        path + " -out " + path + ")" + hint);
  }
  return Status::invalid_argument(path + " does not hold a PEM private key (-----BEGIN PRIVATE KEY-----)" +
                                  hint);
}

Status read_file(const std::string& path, const char* what, const std::string& hint, std::string* out) {
  Status s = read_bounded_file(path, kMaxFileBytes, what, out);
  return s.ok() ? s : with_hint(s, hint);
}

bool add_extension(X509* cert, X509V3_CTX* ctx, int nid, const std::string& value) {
  ExtensionPtr ext(X509V3_EXT_conf_nid(nullptr, ctx, nid, value.c_str()));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

// Builds a certificate for the public half of `key`, named `name`, signed by
// `issuer_key` as `issuer`, or self-signed (a CA) when `issuer` is null.
Status build_certificate(const std::string& name, EVP_PKEY* key, X509* issuer, EVP_PKEY* issuer_key,
                         long not_before_offset, long not_after_offset, X509Ptr* out) {
  X509Ptr cert(X509_new());
  BnPtr serial(BN_new());
  const bool is_ca = issuer == nullptr;
  X509V3_CTX ctx;
  X509_NAME* subject = cert ? X509_get_subject_name(cert.get()) : nullptr;
  // 128 random bits: certificates of one CA must not share a serial, and
  // nothing here keeps a counter.
  bool built =
      cert && serial && X509_set_version(cert.get(), X509_VERSION_3) == 1 &&
      BN_rand(serial.get(), 128, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr &&
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), not_before_offset) != nullptr &&
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), not_after_offset) != nullptr &&
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0) == 1 &&
      X509_set_issuer_name(cert.get(), is_ca ? subject : X509_get_subject_name(issuer)) == 1 &&
      X509_set_pubkey(cert.get(), key) == 1;
  if (built) {
    X509V3_set_ctx(&ctx, is_ca ? cert.get() : issuer, cert.get(), nullptr, nullptr, 0);
    built = add_extension(cert.get(), &ctx, NID_subject_key_identifier, "hash");
  }
  if (built && is_ca) {
    built = add_extension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:TRUE") &&
            add_extension(cert.get(), &ctx, NID_key_usage, "critical,keyCertSign,cRLSign");
  } else if (built) {
    built = add_extension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE") &&
            add_extension(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
            add_extension(cert.get(), &ctx, NID_ext_key_usage, "serverAuth,clientAuth") &&
            add_extension(cert.get(), &ctx, NID_subject_alt_name, "DNS:" + name) &&
            add_extension(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always");
  }
  built = built && X509_sign(cert.get(), is_ca ? key : issuer_key, EVP_sha256()) > 0;
  if (!built) return Status::io_error("cannot make the certificate of " + name + ": " + openssl_reason());
  *out = std::move(cert);
  return Status::ok_status();
}

PkeyPtr new_key() { return PkeyPtr(EVP_EC_gen("P-256")); }

Status make_ca(const std::string& dir, const std::string& name, int days) {
  CARAPACE_RETURN_IF_ERROR(check_name(name));
  CARAPACE_RETURN_IF_ERROR(check_days(days));
  const std::string key_path = dir + "/ca.key";
  if (file_exists(key_path)) {
    return Status::invalid_argument(
        key_path + " exists, and a CA key is never overwritten: make the new CA in another directory");
  }
  CARAPACE_RETURN_IF_ERROR(make_private_dir(dir));
  PkeyPtr key = new_key();
  if (!key) return Status::io_error("cannot make a P-256 key: " + openssl_reason());
  X509Ptr cert;
  CARAPACE_RETURN_IF_ERROR(build_certificate(name, key.get(), nullptr, nullptr, 0, days * 86400L, &cert));
  std::string cert_text, key_text;
  CARAPACE_RETURN_IF_ERROR(certificate_pem(cert.get(), &cert_text));
  CARAPACE_RETURN_IF_ERROR(key_pem(key.get(), &key_text));
  // The key first: it is the file that must never be replaced.
  CARAPACE_RETURN_IF_ERROR(write_file_atomically(dir, "ca.key", key_text, 0600, /*keep_existing=*/true));
  return write_file_atomically(dir, "ca.crt", cert_text, 0644, /*keep_existing=*/false);
}

Status make_certificate(const std::string& ca_dir, const std::string& out_dir, const std::string& name,
                        long not_before_offset, long not_after_offset) {
  CARAPACE_RETURN_IF_ERROR(check_name(name));
  const auto in_range = [](long offset) {
    return offset >= -kMaxOffsetSeconds && offset <= kMaxOffsetSeconds;
  };
  if (!in_range(not_before_offset) || !in_range(not_after_offset) || not_after_offset <= not_before_offset) {
    return Status::invalid_argument("the validity from " + std::to_string(not_before_offset) + " s to " +
                                    std::to_string(not_after_offset) +
                                    " s from now is empty or longer than 3650 days away");
  }
  const std::string key_path = out_dir + "/node.key";
  if (file_exists(key_path)) {
    return Status::invalid_argument(
        key_path + " exists and is not overwritten: write the new certificate to another directory");
  }
  const std::string ca_cert_path = ca_dir + "/ca.crt";
  const std::string ca_key_path = ca_dir + "/ca.key";
  const std::string hint = remake_ca_hint(ca_dir);
  std::string ca_cert_text, ca_key_text;
  CARAPACE_RETURN_IF_ERROR(read_file(ca_cert_path, "the CA certificate", hint, &ca_cert_text));
  CARAPACE_RETURN_IF_ERROR(read_file(ca_key_path, "the CA key", hint, &ca_key_text));
  X509Ptr ca;
  PkeyPtr ca_key;
  CARAPACE_RETURN_IF_ERROR(parse_certificate(ca_cert_path, ca_cert_text, hint, &ca));
  CARAPACE_RETURN_IF_ERROR(parse_key(ca_key_path, ca_key_text, hint, &ca_key));
  if (X509_check_private_key(ca.get(), ca_key.get()) != 1) {
    ERR_clear_error();
    return Status::invalid_argument(ca_key_path + " is not the key of " + ca_cert_path +
                                    ": keep the pair made together" + hint);
  }
  if (X509_check_ca(ca.get()) == 0) {
    return Status::invalid_argument(ca_cert_path + " is not a CA certificate (basicConstraints CA:TRUE)" +
                                    hint);
  }
  // A certificate signed by an expired CA would not verify anywhere.
  if (X509_cmp_current_time(X509_get0_notAfter(ca.get())) <= 0) {
    return Status::invalid_argument(ca_cert_path + ": the CA certificate expired on " +
                                    time_text(X509_get0_notAfter(ca.get())) + hint);
  }
  CARAPACE_RETURN_IF_ERROR(make_private_dir(out_dir));
  PkeyPtr key = new_key();
  if (!key) return Status::io_error("cannot make a P-256 key: " + openssl_reason());
  X509Ptr cert;
  CARAPACE_RETURN_IF_ERROR(
      build_certificate(name, key.get(), ca.get(), ca_key.get(), not_before_offset, not_after_offset, &cert));
  std::string cert_text, key_text;
  CARAPACE_RETURN_IF_ERROR(certificate_pem(cert.get(), &cert_text));
  CARAPACE_RETURN_IF_ERROR(key_pem(key.get(), &key_text));
  CARAPACE_RETURN_IF_ERROR(
      write_file_atomically(out_dir, "node.key", key_text, 0600, /*keep_existing=*/true));
  CARAPACE_RETURN_IF_ERROR(
      write_file_atomically(out_dir, "node.crt", cert_text, 0644, /*keep_existing=*/false));
  return write_file_atomically(out_dir, "ca.crt", ca_cert_text, 0644, /*keep_existing=*/false);
}

// Why `cert` does not verify against `ca`, said for the person who has to fix it.
Status verify_failure(int err, X509* failed_at, X509* cert, X509* ca, const NodeTlsFiles& files,
                      const std::string& hint) {
  const bool at_ca = failed_at != nullptr && X509_cmp(failed_at, ca) == 0;
  const std::string& which = at_ca ? files.ca : files.certificate;
  switch (err) {
    case X509_V_ERR_CERT_HAS_EXPIRED:
      return Status::invalid_argument(which + ": the certificate expired on " +
                                      time_text(X509_get0_notAfter(failed_at)) + hint);
    case X509_V_ERR_CERT_NOT_YET_VALID:
      return Status::invalid_argument(which + ": the certificate is not valid before " +
                                      time_text(X509_get0_notBefore(failed_at)) +
                                      " (check this machine's clock; if it is right, wait or make new ones)");
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
    case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
    case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
    case X509_V_ERR_CERT_SIGNATURE_FAILURE:
    case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
    case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
      return Status::invalid_argument(files.certificate + ": the certificate was signed by another CA (\"" +
                                      terminal_safe(common_name_of(X509_get_issuer_name(cert))) +
                                      "\") than " + files.ca + " (\"" +
                                      terminal_safe(common_name_of(X509_get_subject_name(ca))) +
                                      "\"): put the ca.crt of the CA that signed it beside it" + hint);
    default:
      return Status::invalid_argument(which + ": the certificate does not verify against " + files.ca + ": " +
                                      X509_verify_cert_error_string(err) + hint);
  }
}

Status check_files(const std::string& dir, NodeTlsFiles* out, std::string* common_name) {
  if (dir.empty()) return Status::invalid_argument("the directory of the node's certificates is not named");
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::absolute(dir, ec).lexically_normal();
  if (ec) return Status::io_error(dir + ": " + ec.message());
  NodeTlsFiles files{(base / "node.crt").string(), (base / "node.key").string(), (base / "ca.crt").string()};
  const std::string hint = remake_node_hint(base.string());

  std::string cert_text, key_text, ca_text;
  CARAPACE_RETURN_IF_ERROR(read_file(files.certificate, "the node certificate", hint, &cert_text));
  CARAPACE_RETURN_IF_ERROR(read_file(files.key, "the node key", hint, &key_text));
  CARAPACE_RETURN_IF_ERROR(read_file(files.ca, "the CA certificate", hint, &ca_text));
  X509Ptr cert, ca;
  PkeyPtr key;
  CARAPACE_RETURN_IF_ERROR(parse_certificate(files.certificate, cert_text, hint, &cert));
  CARAPACE_RETURN_IF_ERROR(parse_certificate(files.ca, ca_text, hint, &ca));

  struct stat st {};
  if (::stat(files.key.c_str(), &st) != 0) return io_failure(files.key, "cannot be examined", errno);
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return Status::invalid_argument(files.key + " is open to other users (mode " + mode +
                                    "): run chmod 600 " + files.key);
  }
  CARAPACE_RETURN_IF_ERROR(parse_key(files.key, key_text, hint, &key));
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return Status::invalid_argument(files.key + " is not the key of " + files.certificate +
                                    ": keep the files made together" + hint);
  }

  StorePtr store(X509_STORE_new());
  StoreCtxPtr ctx(X509_STORE_CTX_new());
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca.get()) != 1 ||
      X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr) != 1) {
    return Status::io_error("cannot check " + files.certificate + ": " + openssl_reason());
  }
  // Also checks the dates of both certificates against this machine's clock.
  if (X509_verify_cert(ctx.get()) != 1) {
    const int err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return verify_failure(err, X509_STORE_CTX_get_current_cert(ctx.get()), cert.get(), ca.get(), files, hint);
  }
  // The same certificate serves a node as a server and as a client.
  if (X509_check_purpose(cert.get(), X509_PURPOSE_SSL_SERVER, 0) != 1 ||
      X509_check_purpose(cert.get(), X509_PURPOSE_SSL_CLIENT, 0) != 1) {
    ERR_clear_error();
    return Status::invalid_argument(
        files.certificate +
        " is not for both TLS servers and clients (extendedKeyUsage serverAuth,clientAuth)" + hint);
  }
  if (common_name != nullptr) *common_name = common_name_of(X509_get_subject_name(cert.get()));
  if (out != nullptr) *out = std::move(files);
  return Status::ok_status();
}

}  // namespace

Status make_node_ca(const std::string& dir, const std::string& name, int days) {
  return without_exceptions("making the node CA", [&] { return make_ca(dir, name, days); });
}

Status make_node_certificate(const std::string& ca_dir, const std::string& out_dir, const std::string& name,
                             int days) {
  return without_exceptions("making the node certificate", [&] {
    CARAPACE_RETURN_IF_ERROR(check_days(days));
    return make_certificate(ca_dir, out_dir, name, 0, days * 86400L);
  });
}

Status make_node_certificate_with_validity(const std::string& ca_dir, const std::string& out_dir,
                                           const std::string& name, long not_before_offset_seconds,
                                           long not_after_offset_seconds) {
  return without_exceptions("making the node certificate", [&] {
    return make_certificate(ca_dir, out_dir, name, not_before_offset_seconds, not_after_offset_seconds);
  });
}

Status check_node_tls(const std::string& dir, NodeTlsFiles* out, std::string* common_name) {
  return without_exceptions("checking the node certificates",
                            [&] { return check_files(dir, out, common_name); });
}

}  // namespace carapace
