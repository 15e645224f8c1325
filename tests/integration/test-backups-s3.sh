#!/bin/bash
# Backups through an S3-compatible store: test-backups.sh against a real S3 server (s3rver,
# pinned in tests/s3/package-lock.json, installed by scripts/sdk-deps.sh) on loopback,
# cellad started with --backup-store s3://...; see test-backups.sh.
export IT_BACKUP_S3=1
exec bash "$(dirname "$0")/test-backups.sh"
