#include "server/security/tls.h"

#include <grpcpp/security/server_credentials.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/cache/file_io.h"
#include "engine/common/status_macros.h"

namespace kiln::server::security {
namespace {

// OpenSSL's queued errors as one line (and the queue emptied).
std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? std::string("unknown OpenSSL error") : out;
}

absl::Status Failed(const char* flag, const std::string& path, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " ", path, ": ", what, " (", OpenSslErrors(), ")"));
}

absl::Status CheckCombination(const TlsFiles& files) {
  if (files.cert.empty() != files.key.empty()) {
    return absl::InvalidArgumentError(
        "TLS needs both --tls-cert and --tls-key (the certificate chain and its private key)");
  }
  if (files.cert.empty() && !files.client_ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls-client-ca needs --tls-cert and --tls-key: mutual TLS is TLS first");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ConfigureSslContext(const TlsFiles& files, SSL_CTX* ctx) {
  RETURN_IF_ERROR(CheckCombination(files));
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1) {
    return Failed("--tls-cert", files.cert, "cannot use it as a PEM certificate chain");
  }
  // Read apart from its use, so that a file that is no key and a key of
  // another certificate get different messages. No passphrase: OpenSSL's
  // default would ask for one on the terminal.
  pem_password_cb* no_passphrase = [](char*, int, int, void*) { return 0; };
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(files.key.c_str(), "r"), BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      bio == nullptr ? nullptr
                     : PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr),
      EVP_PKEY_free);
  if (key == nullptr) {
    return Failed("--tls-key", files.key, "cannot read it as an unencrypted PEM private key");
  }
  if (SSL_CTX_use_PrivateKey(ctx, key.get()) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
    return Failed("--tls-key", files.key, "the key does not belong to --tls-cert's certificate");
  }
  if (files.mutual()) {
    if (SSL_CTX_load_verify_locations(ctx, files.client_ca.c_str(), nullptr) != 1) {
      return Failed("--tls-client-ca", files.client_ca, "cannot read it as PEM CA certificates");
    }
    STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(files.client_ca.c_str());
    if (names == nullptr) {
      return Failed("--tls-client-ca", files.client_ca, "holds no CA certificate");
    }
    SSL_CTX_set_client_CA_list(ctx, names);  // takes ownership
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  }
  return absl::OkStatus();
}

absl::Status ValidateTlsFiles(const TlsFiles& files) {
  RETURN_IF_ERROR(CheckCombination(files));
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()),
                                                        SSL_CTX_free);
  if (ctx == nullptr) return absl::InternalError("cannot create an OpenSSL context");
  return ConfigureSslContext(files, ctx.get());
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const TlsFiles& files) {
  if (!files.enabled()) return grpc::InsecureServerCredentials();
  RETURN_IF_ERROR(ValidateTlsFiles(files));
  grpc::SslServerCredentialsOptions options(
      files.mutual() ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                     : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  ASSIGN_OR_RETURN(pair.private_key, cache::ReadFileToString(files.key));
  ASSIGN_OR_RETURN(pair.cert_chain, cache::ReadFileToString(files.cert));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (files.mutual()) {
    ASSIGN_OR_RETURN(options.pem_root_certs, cache::ReadFileToString(files.client_ca));
  }
  return grpc::SslServerCredentials(options);
}

}  // namespace kiln::server::security
