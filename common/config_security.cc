// The `security` section's keys and their rules.
#include "common/config_security.h"

#include "common/config_field.h"

namespace downpour::config_internal {

std::vector<ConfigField> SecurityKeys(SecuritySection* s) {
  return {BoolField("security.tls", &s->tls),
          StringField("security.ca_file", &s->ca_file),
          StringField("security.cert_file", &s->cert_file),
          StringField("security.key_file", &s->key_file),
          StringField("security.server_name", &s->server_name),
          BoolField("security.mutual_tls", &s->mutual_tls),
          StringField("security.ps_token_file", &s->ps_token_file),
          StringField("security.worker_token_file", &s->worker_token_file),
          StringField("security.admin_token_file", &s->admin_token_file),
          StringField("security.reader_token_file", &s->reader_token_file),
          BoolField("security.insecure_network", &s->insecure_network)};
}

absl::Status CheckSecurity(const SecuritySection& security) {
  const bool any_token =
      !security.ps_token_file.empty() || !security.worker_token_file.empty() ||
      !security.admin_token_file.empty() || !security.reader_token_file.empty();
  if (!security.tls) {
    if (any_token) {
      return absl::InvalidArgumentError(
          "security.*_token_file needs security.tls: true (a bearer token sent "
          "over plaintext can be read by anyone on the path); turn TLS on "
          "(deploy/make_certs.sh makes the files) or remove the token files");
    }
    if (security.mutual_tls) {
      return absl::InvalidArgumentError(
          "security.mutual_tls needs security.tls: true");
    }
    return absl::OkStatus();
  }
  if (security.ca_file.empty()) {
    return absl::InvalidArgumentError(
        "security.tls needs security.ca_file (the CA that signed every "
        "daemon's certificate; deploy/make_certs.sh writes ca.pem)");
  }
  if (security.cert_file.empty() != security.key_file.empty()) {
    return absl::InvalidArgumentError(
        "security.cert_file and security.key_file go together: set both or "
        "neither");
  }
  return absl::OkStatus();
}

}  // namespace downpour::config_internal
