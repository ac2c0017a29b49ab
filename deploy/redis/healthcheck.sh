#!/bin/sh
# The Redis container's health check: PING as the redis-exporter user (the default user is off),
# over TLS when start.sh turned it on.
set -eu
set -- -p "${REDIS_PORT:-6379}"
if [ -n "${REDIS_TLS_DIR:-}" ]; then
    set -- "$@" --tls --cacert "$REDIS_TLS_DIR/ca.crt"
fi
REDISCLI_AUTH="$REDIS_EXPORTER_PASSWORD" redis-cli --no-auth-warning --user redis-exporter "$@" ping | grep -q PONG
