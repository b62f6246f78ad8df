#!/usr/bin/env bash
# with-managed-settings.sh DIR CMD [ARGS…]: runs CMD with DIR mounted at Claude Code's managed settings
# directory, /etc/claude-code, in a private mount namespace, so a test installs managed settings with
# `gatekeeper claude-code install --path DIR` without touching the machine's own /etc. Needs root
# (unshare -m). The CLI (2.1.330) reads managed settings only from that fixed path on Linux.
set -euo pipefail
[ "$#" -ge 2 ] || { echo "usage: $0 DIR CMD [ARGS...]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "$0: needs root, for a private mount namespace (unshare -m)" >&2; exit 2; }
exec unshare --mount --propagation private bash -c '
set -euo pipefail
dir=$1; shift
if [ ! -d /etc/claude-code ]; then
  # /etc has no claude-code directory to mount over: overlay /etc in this namespace and make one.
  # The scratch space is a tmpfs private to this namespace, on one fixed mount point.
  scratch=${TMPDIR:-/tmp}/.gatekeeper-managed-ns
  mkdir -p "$scratch"
  mount -t tmpfs tmpfs "$scratch"
  mkdir "$scratch/upper" "$scratch/work"
  mount -t overlay overlay -o "lowerdir=/etc,upperdir=$scratch/upper,workdir=$scratch/work" /etc
  mkdir /etc/claude-code
fi
mount --bind "$dir" /etc/claude-code
exec "$@"' with-managed-settings "$@"
