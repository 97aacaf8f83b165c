// The header line of a new session log, as DSH's writer authors it: the `session` record with
// its keys in the writer's order and absent optional fields left out (`delegationDepth`
// defaults to 0). sessionlog stores these bytes verbatim as the log's first line.

/**
 * @param {import('./index.js').SessionHeaderFields} header
 * @returns {string} the header line's JSON text, without its newline
 */
export function headerLine(header) {
  const line = { type: 'session', version: header.version, id: header.id, createdAt: header.createdAt }
  for (const key of ['cwd', 'parentSession', 'seedLength', 'origin']) {
    if (header[key] !== undefined) line[key] = header[key]
  }
  line.delegationDepth = header.delegationDepth ?? 0
  if (header.agentPreset !== undefined) line.agentPreset = header.agentPreset
  return JSON.stringify(line)
}

/**
 * The session header a stored header line describes (the `type` tag dropped).
 * @param {string} line the stored header line
 */
export function headerFields(line) {
  const { type: _type, ...fields } = JSON.parse(line)
  return fields
}
