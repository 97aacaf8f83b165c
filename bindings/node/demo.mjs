// A DSH host writing through sessionlog: DSH's SessionStore with SessionlogPersistence mounted,
// one session driven through a turn with a tool call, flushed, then reloaded by a fresh host.
// Prints the stored log's lines (DSH's JSONL, byte for byte) and what the store answers.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import { MessageId, freezeMessage } from '@deepseek-ai/dsh-llm'
import { SessionlogPersistence, withStore } from 'sessionlog-node/dsh'

const dir = mkdtempSync(join(tmpdir(), 'sessionlog-dsh-demo-'))
const cut = text => (text.length > 150 ? `${text.slice(0, 147)}...` : text)

async function host() {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  await ctx.plugin(SessionlogPersistence, { path: dir, durability: 'sync' })
  return ctx
}

try {
  console.log(`== a DSH host with sessionlog as its persistence (store: ${dir})`)
  const ctx = await host()
  const session = ctx.sessions.create(SessionId('demo-dsh'), { meta: { cwd: '/tmp/demo' } })
  session.append('turn/start', { turn: 1 })
  session.append('user/message', freezeMessage({
    id: MessageId('u1'), role: 'user', content: [{ type: 'text', text: 'List the files.' }], source: { kind: 'user' },
  }), { surfaceOp: 'append' })
  session.append('step/start', { turn: 1, step: 1 })
  session.append('assistant/message', {
    turn: 1, step: 1,
    message: freezeMessage({
      id: MessageId('a1'), role: 'assistant', content: [{ type: 'text', text: 'Two files: a.txt, b.txt.' }],
      source: { kind: 'model', provider: 'demo', model: 'demo' },
    }),
  }, { surfaceOp: 'append' })
  session.append('step/end', { turn: 1, step: 1 })
  session.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
  await ctx.sessions.flush(session)
  console.log('== flushed: the stored log, as DSH\'s JSONL writer would have written it')
  const raw = await ctx.sessionPersistence.readRaw(SessionId('demo-dsh'))
  for (const line of raw.content.trimEnd().split('\n')) console.log(cut(line))
  await ctx.fiber.dispose()

  console.log('== a fresh host loads it back')
  const again = await host()
  const loaded = await again.sessionPersistence.load(SessionId('demo-dsh'))
  console.log(`${loaded.events.length} events, last: ${loaded.events.at(-1).type}`)
  await again.fiber.dispose()

  await withStore(dir, async (store) => {
    console.log('== what the model saw, from the store\'s projection')
    for (const m of await store.messagesAt('demo-dsh')) console.log(cut(JSON.stringify(m)))
    const report = await store.verify()
    console.log(`verify: ${report.sessions} session(s), ${report.problems.length} problem(s)`)
  })
} finally {
  rmSync(dir, { recursive: true, force: true })
}
