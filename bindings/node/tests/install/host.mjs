// A DSH host as a user writes it, run by scripts/install-test.mjs in a project that installed the
// packed `sessionlog` tarball and DSH's packages from the registry: it writes a session through
// SessionlogPersistence, reloads it in a fresh host, exports it, and checks what it reads back,
// the `.jsonl.zstd` export read by DSH's own JSONL backend as one of its session files.
// Any mismatch throws (a non-zero exit).
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { isDeepStrictEqual } from 'node:util'
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import { MessageId, freezeMessage } from '@deepseek-ai/dsh-llm'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import { SessionlogPersistence, withStore } from 'sessionlog-node/dsh'

/** Fail with what was expected and what came back. */
function check(ok, what, got) {
  if (!ok) throw new Error(`${what}${got === undefined ? '' : `; got ${JSON.stringify(got).slice(0, 300)}`}`)
}

// The package is the installed one, not a checkout's.
const installed = realpathSync(fileURLToPath(import.meta.resolve('sessionlog-node')))
const project = realpathSync(process.cwd())
check(installed.startsWith(join(project, 'node_modules', 'sessionlog-node')), `sessionlog-node resolves inside ${project}/node_modules`, installed)

const dir = mkdtempSync(join(tmpdir(), 'sessionlog-user-store-'))
const id = SessionId('user-host')

/** A DSH host with sessionlog as its persistence: the three lines of the package README. */
async function host(encoding) {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  await ctx.plugin(SessionlogPersistence, { path: dir, durability: 'sync', encoding })
  return ctx
}

try {
  const ctx = await host('jsonl.zstd')
  const session = ctx.sessions.create(id, { meta: { cwd: '/home/dev/project' } })
  session.append('turn/start', { turn: 1 })
  session.append('user/message', freezeMessage({
    id: MessageId('u1'), role: 'user', content: [{ type: 'text', text: 'Which files changed? ünïcödé 🚀' }], source: { kind: 'user' },
  }), { surfaceOp: 'append' })
  session.append('step/start', { turn: 1, step: 1 })
  session.append('assistant/message', {
    turn: 1, step: 1,
    message: freezeMessage({
      id: MessageId('a1'), role: 'assistant', content: [{ type: 'text', text: 'Two: a.txt and b.txt.' }],
      source: { kind: 'model', provider: 'user-test', model: 'user-test' },
    }),
  }, { surfaceOp: 'append' })
  session.append('step/end', { turn: 1, step: 1 })
  session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
  await ctx.sessions.flush(session)
  const written = JSON.parse(JSON.stringify(session.events))
  // The host's /metrics handler appends the store's exposition to its own.
  const exposition = await ctx.sessionPersistence.metrics()
  check(exposition.includes('\n# TYPE sessionlog_appended_events_total counter\nsessionlog_appended_events_total 6\n'),
    'the metrics count the 6 events appended', exposition.slice(0, 600))
  await ctx.fiber.dispose()
  check(written.length === 6, 'the session holds the 6 events appended', written.length)

  // A fresh host reads it back: the same events, seq for seq.
  const again = await host('jsonl.zstd')
  const loaded = await again.sessionPersistence.load(id)
  check(loaded.meta.id === id && loaded.meta.cwd === '/home/dev/project', 'the reloaded header names the session and its cwd', loaded.meta)
  check(isDeepStrictEqual(JSON.parse(JSON.stringify(loaded.events)), written), 'the reloaded events equal the written ones', loaded.events)
  const listed = await again.sessionPersistence.list()
  check(listed.length === 1 && listed[0].id === id, 'list() names the one session', listed)
  const raw = await again.sessionPersistence.readRaw(id)
  await again.fiber.dispose()

  // Export: the session's file as DSH's JSONL writer writes it, and its .jsonl.zstd form.
  await withStore(dir, async (store) => {
    const jsonl = (await store.exportBytes(id, { format: 'jsonl' })).toString('utf8')
    check(jsonl === raw.content, 'the jsonl export equals readRaw()')
    const lines = jsonl.trimEnd().split('\n').map(line => JSON.parse(line))
    check(lines[0].type === 'session' && lines[0].id === id, 'the export starts with the session header', lines[0])
    check(isDeepStrictEqual(lines.slice(1), written), 'the export\'s body lines are the written events', lines.slice(1))
    const zstd = await store.exportBytes(id, { format: 'jsonl.zstd' })

    // DSH's JSONL backend loads the .jsonl.zstd export, put where it keeps its own files.
    const jsonlHost = new Context()
    await jsonlHost.plugin(SessionStore)
    await jsonlHost.plugin(JsonlSessionPersistence, { root: join(dir, 'dsh-jsonl-root'), compression: 'zstd' })
    const file = jsonlHost.sessionPersistence.locate(loaded.meta).path
    mkdirSync(dirname(file), { recursive: true })
    writeFileSync(file, zstd)
    const viaDsh = await jsonlHost.sessionPersistence.load(id)
    check(isDeepStrictEqual(JSON.parse(JSON.stringify(viaDsh.events)), written), 'DSH\'s JSONL backend loads the jsonl.zstd export\'s events', viaDsh.events)
    check((await jsonlHost.sessionPersistence.readRaw(id)).content === jsonl, 'DSH\'s JSONL backend reads the jsonl.zstd export as the jsonl export\'s text')
    await jsonlHost.fiber.dispose()

    const messages = await store.messagesAt(id)
    check(messages.length === 2 && messages[1].content[0].text === 'Two: a.txt and b.txt.', 'messagesAt() is the user message and the answer', messages)
    const report = await store.verify()
    check(report.sessions === 1 && report.problems.length === 0, 'verify() is clean', report)
    console.log(`host: wrote ${written.length} events, reloaded ${loaded.events.length}, exported ${lines.length} lines ` +
      `(${Buffer.byteLength(jsonl)} bytes; ${zstd.length} as jsonl.zstd, which DSH's JSONL backend loads), verify clean; ` +
      `sessionlog from ${installed}`)
  })
} finally {
  rmSync(dir, { recursive: true, force: true })
}
