#!/usr/bin/env bash
# Writes a throwaway CA and a serving certificate for local runs of `mosc-guard serve`.
# Usage: certs/gen-dev-certs.sh [OUT_DIR] [SAN ...]   (default: certs/generated 127.0.0.1 localhost)
set -euo pipefail
out=${1:-"$(dirname "$0")/generated"}
shift || true
sans=("${@:-127.0.0.1}")
[ $# -gt 0 ] || sans=(127.0.0.1 localhost)
command -v openssl >/dev/null || { echo "openssl is required" >&2; exit 2; }
mkdir -p "$out"
alt=""
for s in "${sans[@]}"; do
  if [[ $s =~ ^[0-9.]+$ ]]; then alt+="IP:$s,"; else alt+="DNS:$s,"; fi
done
alt=${alt%,}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
  -subj "/CN=mosc-guard dev CA" -keyout "$out/ca.key" -out "$out/ca.crt" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=mosc-guard" \
  -keyout "$out/tls.key" -out "$out/tls.csr" 2>/dev/null
openssl x509 -req -in "$out/tls.csr" -CA "$out/ca.crt" -CAkey "$out/ca.key" -CAcreateserial \
  -days 30 -extfile <(printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$alt") \
  -out "$out/tls.crt" 2>/dev/null
rm -f "$out/tls.csr" "$out/ca.srl"
chmod 600 "$out"/*.key
echo "wrote $out/{ca.crt,tls.crt,tls.key} for $alt"
