# Prometheus's official Python parser (`prometheus_client.parser`, PyPI prometheus-client) for
# the metrics test (tests/metrics.rs), shared by ./x. Sourced, not run.
#
# When python3 cannot import it, the package is installed with pip into a directory outside the
# checkout (like the cargo target and Node 22) and put on PYTHONPATH; it is pure Python, so any
# python3 reads it. pip itself is installed from Debian's packages when missing.

SESSIONLOG_PYTHON_HOME="${SESSIONLOG_PYTHON_HOME:-$HOME/.cache/sessionlog-python}"
PROMETHEUS_CLIENT_VERSION=0.26.0

prometheus_parser_present() {
  python3 -c 'import prometheus_client.parser' 2>/dev/null
}

# Make `python3 -c 'import prometheus_client.parser'` work, installing it if needed.
ensure_prometheus_parser() {
  PYTHONPATH="$SESSIONLOG_PYTHON_HOME${PYTHONPATH:+:$PYTHONPATH}"
  export PYTHONPATH
  prometheus_parser_present && return 0
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! command -v python3 >/dev/null || ! python3 -m pip --version >/dev/null 2>&1; then
    echo "x: installing python3 and pip (for Prometheus's parser in the metrics test)" >&2
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq python3 python3-pip >/dev/null
  fi
  echo "x: installing prometheus-client $PROMETHEUS_CLIENT_VERSION into $SESSIONLOG_PYTHON_HOME" >&2
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore \
    --target "$SESSIONLOG_PYTHON_HOME" "prometheus-client==$PROMETHEUS_CLIENT_VERSION" >&2
  prometheus_parser_present || { echo "x: prometheus-client installed, but python3 cannot import it" >&2; return 1; }
}
