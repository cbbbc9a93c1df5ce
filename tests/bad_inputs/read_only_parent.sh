#!/usr/bin/env bash
# Runs COMMAND with the folder that holds OUT mounted read-only, as a read-only file system gives
# a run folder: in a private mount namespace, so nothing outside sees the mount. Where mounts are
# not allowed it says so and exits 77, which the corpus counts as skipped.
# Usage: read_only_parent.sh OUT COMMAND...
out=$1
shift
if ! unshare --mount --propagation private mount -t tmpfs -o ro,size=64k tmpfs /mnt 2>/dev/null; then
  echo "skip: needs a private mount namespace (unshare --mount) to make a read-only folder"
  exit 77
fi
exec unshare --mount --propagation private bash -c 'mount -t tmpfs -o ro,size=64k tmpfs "$(dirname "$0")" && exec "$@"' "$out" "$@"
