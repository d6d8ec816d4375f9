#!/usr/bin/env bash
# Makes what `security:` needs: a CA, one certificate and key per daemon
# (coordinator, ps-N, standby-N, worker-N, "ps" and "worker" for daemons that
# join a running job, "serve" for the serving daemon,
# and "client" for psctl, predict and the launcher), and one bearer token per
# role (ps, worker, admin, reader).
#
#   deploy/make_certs.sh --out run/certs                       # a local cluster
#   deploy/make_certs.sh --out certs --ps 4 --standby 4 --workers 8 \
#       --hosts ps0.example,ps1.example,10.0.0.7               # several hosts
#
# Every certificate is valid for localhost, 127.0.0.1, "downpour" (for
# security.server_name, where addresses are not known in advance, e.g.
# Kubernetes pod IPs) and each --hosts name or IP (the hosts of the config's
# addresses). Keys and tokens are written mode 0600. The CA's key goes to
# DIR/private/ca.key: it stays with whoever makes certificates, no daemon
# needs it, and `kubectl create secret generic downpour-tls --from-file=DIR`
# (top-level files only) leaves it out. Running again
# keeps an existing CA and tokens (new daemons get certificates from the same
# CA) unless --force. Then set in the config:
#
#   security:
#     tls: true
#     ca_file: run/certs/ca.pem
#     cert_file: run/certs/{name}.pem
#     key_file: run/certs/{name}.key
#     ps_token_file: run/certs/ps.token
#     worker_token_file: run/certs/worker.token
#     admin_token_file: run/certs/admin.token
#     reader_token_file: run/certs/reader.token
#
# Needs openssl. See docs/SECURITY.md.
set -euo pipefail

usage() {
  sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'
  echo "Options: --out DIR (required) --ps N (1) --standby N (1) --workers N (2)"
  echo "         --hosts a,b,c (extra names/IPs) --days N (365) --force"
}

out="" ps=1 standby=1 workers=2 hosts="" days=365 force=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) out="${2:?--out needs a folder}"; shift 2 ;;
    --ps) ps="${2:?}"; shift 2 ;;
    --standby) standby="${2:?}"; shift 2 ;;
    --workers) workers="${2:?}"; shift 2 ;;
    --hosts) hosts="${2:?}"; shift 2 ;;
    --days) days="${2:?}"; shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "make_certs: unknown argument '$1'; see --help" >&2; exit 2 ;;
  esac
done
[[ -n "$out" ]] || { echo "make_certs: --out DIR is required; see --help" >&2; exit 2; }
for n in "$ps" "$standby" "$workers" "$days"; do
  [[ "$n" =~ ^[0-9]+$ ]] || { echo "make_certs: '$n' is not a count" >&2; exit 2; }
done
command -v openssl >/dev/null || {
  echo "make_certs: openssl not found: apt-get install openssl" >&2; exit 1; }

mkdir -p "$out"
umask 077
cd "$out"
if [[ $force -eq 1 ]]; then rm -rf ./*.pem ./*.key ./*.token ./*.srl private; fi
mkdir -p private

san="DNS:localhost,IP:127.0.0.1,DNS:downpour"
IFS=',' read -r -a extra <<<"$hosts"
for h in "${extra[@]}"; do
  [[ -z "$h" ]] && continue
  if [[ "$h" =~ ^[0-9.]+$ || "$h" == *:* ]]; then san+=",IP:$h"; else san+=",DNS:$h"; fi
done

if [[ ! -f ca.pem || ! -f private/ca.key ]]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout private/ca.key -out ca.pem \
    -days "$days" -subj "/CN=Downpour cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  echo "make_certs: made CA $out/ca.pem"
fi

# "ps" and "worker": the daemons that join a running job (ps_server --join
# or --spare, ps_worker --join) have no index yet and present these.
names=(coordinator client serve ps worker)
for ((i = 0; i < ps; i++)); do names+=("ps-$i"); done
for ((i = 0; i < standby; i++)); do names+=("standby-$i"); done
for ((i = 0; i < workers; i++)); do names+=("worker-$i"); done

ext="$(mktemp)"
trap 'rm -f "$ext" ./*.csr' EXIT
cat >"$ext" <<EOF
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$san
EOF
made=0
for name in "${names[@]}"; do
  [[ -f "$name.pem" && -f "$name.key" ]] && continue
  openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" \
    -subj "/CN=downpour-$name" 2>/dev/null
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey private/ca.key \
    -CAserial private/ca.srl -CAcreateserial \
    -out "$name.pem" -days "$days" -extfile "$ext" 2>/dev/null
  rm -f "$name.csr"
  made=$((made + 1))
done
for role in ps worker admin reader; do
  [[ -f "$role.token" ]] || openssl rand -hex 32 >"$role.token"
done
chmod 0644 ca.pem ./*.pem
chmod 0600 ./*.key ./*.token
echo "make_certs: $made new certificate(s) in $out for ${#names[@]} names (SAN $san); tokens for ps, worker, admin, reader"
