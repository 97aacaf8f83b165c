# Node for the binding's suites (bindings/node), shared by ./x. Sourced, not run.
#
# DSH's suites need Node >= 22. When the machine's Node is older (or absent, with npm present),
# the npm package `node@22` is installed outside the checkout, like the cargo target, and put
# first on PATH.

SESSIONLOG_NODE_HOME="${SESSIONLOG_NODE_HOME:-$HOME/.cache/sessionlog-node}"

# Succeeds when `node` on PATH is version 22 or newer.
node_is_recent() {
  command -v node >/dev/null && node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 22 ? 0 : 1)'
}

# Put a Node >= 22 first on PATH, installing node@22 under $SESSIONLOG_NODE_HOME if needed.
ensure_node() {
  node_is_recent && return 0
  PATH="$SESSIONLOG_NODE_HOME/node_modules/.bin:$PATH"
  export PATH
  node_is_recent && return 0
  command -v npm >/dev/null || { echo "x: npm is required to install Node 22 (apt-get install npm)" >&2; return 1; }
  echo "x: installing Node 22 (npm package node@22) into $SESSIONLOG_NODE_HOME" >&2
  mkdir -p "$SESSIONLOG_NODE_HOME"
  npm install --prefix "$SESSIONLOG_NODE_HOME" --no-save --no-audit --no-fund --loglevel=error node@22 >&2
  # bash remembers where it last found `node` (the old one); forget it.
  hash -r
  node_is_recent || { echo "x: node@22 installed, but node on PATH is $(node --version 2>&1)" >&2; return 1; }
}

# Install the binding's packages (npm ci) and build the addon into it.
build_node_binding() {
  ensure_node
  (cd bindings/node && npm ci --no-audit --no-fund --loglevel=error && npm run --silent build)
}
