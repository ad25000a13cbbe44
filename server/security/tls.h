// TLS for both front ends from the same three files: --tls-cert (the server's
// certificate chain, PEM), --tls-key (its private key, PEM) and, for mutual
// TLS, --tls-client-ca (the CA bundle client certificates must chain to; a
// client without such a certificate is refused in the handshake). gRPC gets
// SslServerCredentials, the HTTP endpoint an OpenSSL context (cpp-httplib's
// SSLServer). The files are read once, at start-up: a renewed certificate
// takes a restart (Kubernetes rolls the pods when the Secret is updated).
#pragma once

#include <openssl/ssl.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class ServerCredentials;
}  // namespace grpc

namespace kiln::server::security {

struct TlsFiles {
  std::string cert;       // --tls-cert
  std::string key;        // --tls-key
  std::string client_ca;  // --tls-client-ca: empty, no client certificates asked for
  bool enabled() const { return !cert.empty() || !key.empty() || !client_ca.empty(); }
  bool mutual() const { return !client_ca.empty(); }
};

// Checks the files make a usable server configuration: a certificate and a
// key that belong together (and a readable CA bundle). InvalidArgument naming
// the flag, the file and OpenSSL's reason otherwise; also when only one of
// --tls-cert and --tls-key is given, or --tls-client-ca without them.
absl::Status ValidateTlsFiles(const TlsFiles& files);

// Loads the files into `ctx` (TLS 1.2 at least; with a client CA, a client
// certificate is required and verified). The errors of ValidateTlsFiles.
absl::Status ConfigureSslContext(const TlsFiles& files, SSL_CTX* ctx);

// The gRPC credentials: SslServerCredentials from the files (a client
// certificate required and verified with a client CA), insecure ones when TLS
// is off. The errors of ValidateTlsFiles.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const TlsFiles& files);

}  // namespace kiln::server::security
