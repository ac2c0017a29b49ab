#!/bin/sh
# Names this replica's health key after its container (Docker) or pod (Kubernetes) host name unless
# RESEARCH_WORKER_ID is set. The worker's own default is host-pid, which a second process in the same
# container (the health check, `research-worker health`) cannot reproduce; the host name it can.
set -eu
RESEARCH_WORKER_ID="${RESEARCH_WORKER_ID:-$(hostname)}"
export RESEARCH_WORKER_ID
exec "$@"
