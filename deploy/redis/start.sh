#!/bin/sh
# Starts redis-server with deploy/redis/users.acl, rendered: comment lines dropped and each
# @NAME_SHA256@ replaced by the SHA-256 of the password in $NAME. The rendered file lives in /tmp
# (mode 0600) and holds hashes only. Arguments are passed on to redis-server.
#
# Optional TLS: with REDIS_TLS_DIR set to a directory holding redis.crt, redis.key and ca.crt,
# Redis speaks TLS only, on REDIS_PORT (6379), and plain TCP is off. Clients authenticate with
# their ACL password as before (no client certificates needed), over rediss://.
set -eu

template="${REDIS_ACL_TEMPLATE:-/usr/local/etc/redis/users.acl}"
rendered="${REDIS_ACL_FILE:-/tmp/redis-users.acl}"

require_password() {
    # $1: the variable's name, $2: its value
    if [ "${#2}" -lt 16 ]; then
        echo "redis start: $1 must be set to a password of at least 16 characters" >&2
        exit 2
    fi
    case "$2" in
        *[![:print:]]* | *' '*)
            echo "redis start: $1 must not contain spaces or control characters" >&2
            exit 2
            ;;
    esac
}
sha256() { printf '%s' "$1" | sha256sum | cut -d ' ' -f 1; }

require_password REDIS_WORKER_PASSWORD "${REDIS_WORKER_PASSWORD:-}"
require_password REDIS_DASHBOARD_PASSWORD "${REDIS_DASHBOARD_PASSWORD:-}"
require_password REDIS_EXPORTER_PASSWORD "${REDIS_EXPORTER_PASSWORD:-}"

umask 077
sed -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' \
    -e "s/@REDIS_WORKER_PASSWORD_SHA256@/$(sha256 "$REDIS_WORKER_PASSWORD")/" \
    -e "s/@REDIS_DASHBOARD_PASSWORD_SHA256@/$(sha256 "$REDIS_DASHBOARD_PASSWORD")/" \
    -e "s/@REDIS_EXPORTER_PASSWORD_SHA256@/$(sha256 "$REDIS_EXPORTER_PASSWORD")/" \
    "$template" >"$rendered"

if [ -n "${REDIS_TLS_DIR:-}" ]; then
    set -- "$@" --port 0 --tls-port "${REDIS_PORT:-6379}" \
        --tls-cert-file "$REDIS_TLS_DIR/redis.crt" \
        --tls-key-file "$REDIS_TLS_DIR/redis.key" \
        --tls-ca-cert-file "$REDIS_TLS_DIR/ca.crt" \
        --tls-auth-clients no
fi
exec redis-server "$@" --aclfile "$rendered"
