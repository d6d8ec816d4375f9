// The `security` section of the config: TLS on every gRPC connection and the
// bearer tokens that give each caller its role (docs/SECURITY.md).
#ifndef DOWNPOUR_COMMON_CONFIG_SECURITY_H_
#define DOWNPOUR_COMMON_CONFIG_SECURITY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace downpour {

struct SecuritySection {
  // Encrypt and authenticate every gRPC connection (daemons, psctl, the
  // launcher) with TLS. Needs ca_file, and cert_file + key_file on every
  // daemon. Default false: plaintext, which each daemon says in its log (a
  // loud warning when it listens on a non-loopback address). See
  // docs/SECURITY.md and deploy/make_certs.sh.
  bool tls = false;
  // PEM files. In cert_file and key_file "{name}" stands for the daemon's
  // name: "coordinator", "ps-0", "standby-1", "worker-2", or "client" for
  // psctl and the launcher (deploy/make_certs.sh writes them so).
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
  // The name clients check every server's certificate against, instead of
  // the host of the address they dial. Set it where daemons are reached at
  // addresses no certificate can name in advance (Kubernetes pod IPs): every
  // certificate deploy/make_certs.sh writes is also valid for "downpour".
  // Default "" (check the address's host).
  std::string server_name;
  // Servers also demand a client certificate signed by ca_file (mutual TLS),
  // so a peer without one cannot even connect. Needs tls. Default false.
  bool mutual_tls = false;
  // Bearer tokens, one file per role holding one token (never inline). When
  // any is set, every call but health checks must carry a token, and what a
  // caller may do depends on its role: "ps" registers, heartbeats and
  // replicates; "worker" registers, heartbeats, pulls and pushes; "admin"
  // reads everything (status, placement, checksums, parameters); "reader"
  // reads status only. Needs tls (a token on a plaintext connection can be
  // read by anyone on the path). Default: none.
  std::string ps_token_file;
  std::string worker_token_file;
  std::string admin_token_file;
  std::string reader_token_file;
  // Plaintext (tls false) on an address other than loopback: a daemon
  // refuses to listen there unless this is true (like Redis's protected
  // mode), and then warns at start that anyone who reaches the port can
  // read the model and push. Default false.
  bool insecure_network = false;
};

// Internal to the config loader (common/config.cc).
namespace config_internal {
struct ConfigField;
// The section's keys bound to `security`, in docs/CONFIG.md's order.
std::vector<ConfigField> SecurityKeys(SecuritySection* security);
// What tls, mutual_tls and the token files need of each other:
// InvalidArgument naming the keys.
absl::Status CheckSecurity(const SecuritySection& security);
}  // namespace config_internal

}  // namespace downpour

#endif  // DOWNPOUR_COMMON_CONFIG_SECURITY_H_
