#!/bin/sh
# A throwaway CA and a certificate for the Redis host, to try Redis over TLS
# (deploy/compose.tls.yaml). For production use your organization's CA and its usual tooling.
#
#   deploy/redis/make-test-certs.sh deploy/tls [HOSTNAME...]     # names default to redis, localhost
#
# Writes ca.crt, redis.crt, redis.key and ca/ (ca.crt under OpenSSL's hashed name, for
# SSL_CERT_DIR). The CA's key is deleted once the certificate is signed, so this CA can vouch for
# nothing else. redis.key is left readable by all (mode 0644) so the container's redis user can read
# it whatever your uid is: fine for a test certificate, never for a real key (give that one mode 0600
# and owner 999, the image's redis user, or mount it as a secret).
set -eu
dir="${1:?usage: make-test-certs.sh DIR [HOSTNAME...]}"
shift
[ "$#" -gt 0 ] || set -- redis localhost
mkdir -p "$dir/ca"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

san=""
for name in "$@"; do san="${san}DNS:${name},"; done
san="${san}IP:127.0.0.1"

openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -days 825 \
    -subj "/CN=research-worker test Redis CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$work/ca.key" -out "$dir/ca.crt" 2>/dev/null
openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -subj "/CN=$1" \
    -keyout "$dir/redis.key" -out "$work/redis.csr" 2>/dev/null
cat >"$work/redis.ext" <<EXT
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=$san
subjectKeyIdentifier=hash
authorityKeyIdentifier=keyid,issuer
EXT
openssl x509 -req -in "$work/redis.csr" -CA "$dir/ca.crt" -CAkey "$work/ca.key" \
    -CAcreateserial -CAserial "$work/ca.srl" -days 825 -extfile "$work/redis.ext" \
    -out "$dir/redis.crt" 2>/dev/null
chmod 0644 "$dir/ca.crt" "$dir/redis.crt" "$dir/redis.key"
cp "$dir/ca.crt" "$dir/ca/ca.crt"
openssl rehash "$dir/ca"
echo "wrote $dir/ca.crt, $dir/redis.crt, $dir/redis.key and $dir/ca/ for: $*"
