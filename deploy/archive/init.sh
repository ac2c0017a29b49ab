#!/bin/sh
# The evidence archive's bucket on MinIO, and the workers' user with rights on that bucket alone
# (deploy/compose.yaml, service archive-init). Safe to run again: each step is idempotent.
set -eu

mc alias set archive http://minio:9000 research-admin "$MINIO_ROOT_PASSWORD" >/dev/null
mc mb --ignore-existing "archive/$ARCHIVE_BUCKET"
mc admin policy create archive research-archive /archive/policy.json
mc admin user add archive research-archive "$ARCHIVE_SECRET_KEY"
mc admin policy attach archive research-archive --user research-archive >/dev/null 2>&1 || true
echo "archive bucket $ARCHIVE_BUCKET ready for user research-archive"
