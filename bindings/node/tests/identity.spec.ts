// Byte identity with DSH's own writer: the same SessionStore operations, once through DSH's
// JSONL backend and once through SessionlogPersistence, give the same file bytes (DSH's file vs
// sessionlog's export), and the sessionlog store verifies clean. In cluster mode the bytes are
// read back by a host with an empty disk, rebuilt from PostgreSQL alone.
import { appendFile, readFile } from 'node:fs/promises'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SessionId, type Session } from '@deepseek-ai/dsh-session'
import { CallId, MessageId, freezeMessage } from '@deepseek-ai/dsh-llm'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import { SessionlogPersistence, withStore } from '../dsh.js'
import { corruptTail, freshDir, removeDir, tornFragment } from './fixture.ts'
import { clusterSpecsRun, postgresForSuite } from './pg.ts'

type Encoding = 'none' | 'zstd'

/** One backend under comparison: how to mount it, read a session's file, and tear a tail. */
interface Side {
  mount: (ctx: Context) => Promise<unknown>
  fileBytes: (ctx: Context, id: string) => Promise<Buffer>
  tearTail: (ctx: Context, id: string) => Promise<void>
  /** sessionlog's `verify` problems (none to check for DSH's own backend). */
  problems?: () => Promise<unknown[]>
}

function jsonlSide(dir: string, compression: Encoding): Side {
  const path = (ctx: Context, id: string) => ctx.sessionPersistence.locate({ version: 0, id: SessionId(id), createdAt: 0, cwd: '/w' })!.path
  return {
    mount: ctx => ctx.plugin(JsonlSessionPersistence, { root: dir, compression }),
    fileBytes: async (ctx, id) => readFile(path(ctx, id)),
    tearTail: async (ctx, id) => appendFile(path(ctx, id), tornFragment(await readFile(path(ctx, id)))),
  }
}

function sessionlogSide(dir: string, compression: Encoding): Side {
  return {
    mount: ctx => ctx.plugin(SessionlogPersistence, {
      path: dir, durability: 'sync', encoding: compression === 'zstd' ? 'jsonl.zstd' : 'jsonl',
    }),
    fileBytes: async (_ctx, id) => withStore(dir, store => store.exportBytes(id)),
    tearTail: async (_ctx, id) => corruptTail(dir, id),
    problems: async () => (await withStore(dir, store => store.verify())).problems,
  }
}

/**
 * SessionlogPersistence as host `a` of the fleet at `url`. Its files are read by another host
 * from an empty directory, so they are what PostgreSQL holds. A fleet cannot tear a tail (each
 * batch commits whole before the local write), so a crash leaves the committed lines alone,
 * which is what DSH's repair of a torn tail leaves too.
 */
function clusterSide(url: string) {
  return (dir: string, compression: Encoding): Side => ({
    mount: ctx => ctx.plugin(SessionlogPersistence, {
      path: dir, encoding: compression === 'zstd' ? 'jsonl.zstd' : 'jsonl', cluster: { url, host: 'a' },
    }),
    fileBytes: async (_ctx, id) => {
      const empty = await freshDir()
      try {
        return await withStore(empty, async (store) => {
          await store.sync([id])
          return store.exportBytes(id)
        }, { cluster: { url, host: 'reader' } })
      } finally {
        await removeDir(empty)
      }
    },
    tearTail: async () => {},
    problems: async () => (await withStore(dir, store => store.verify(), { cluster: { url, host: 'a' } })).problems,
  })
}

let clock = 0
afterEach(() => { vi.restoreAllMocks() })

/** A host on `side` with a deterministic clock. */
async function host(side: Side): Promise<Context> {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  await side.mount(ctx)
  return ctx
}

const user = (s: Session, n: number, text: string) => s.append('user/message', freezeMessage({
  id: MessageId(`${s.id}-u${n}`), role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' },
}), { surfaceOp: 'append' })

const answer = (s: Session, turn: number, content: unknown[]) => s.append('assistant/message', {
  turn, step: 1,
  message: freezeMessage({
    id: MessageId(`${s.id}-a${turn}`), role: 'assistant', content,
    source: { kind: 'model', provider: 'mock', model: 'mock' },
  } as never),
} as never, { surfaceOp: 'append' })

/** One completed turn: a prompt and a one-step text answer. */
function completedTurn(s: Session, turn: number, prompt: string, reply: string) {
  s.append('turn/start', { turn })
  user(s, turn, prompt)
  s.append('step/start', { turn, step: 1 })
  answer(s, turn, [{ type: 'text', text: reply }])
  s.append('step/end', { turn, step: 1 })
  s.append('turn/end', { turn, reason: { kind: 'completed' } })
}

/** The scenarios: each drives a host and names the sessions whose files are compared. */
const scenarios: Record<string, (ctx: Context, side: Side) => Promise<string[]>> = {
  async turns(ctx) {
    const s = ctx.sessions.create(SessionId('turns'), { meta: { cwd: '/w' } })
    for (let turn = 1; turn <= 3; turn += 1) {
      completedTurn(s, turn, `question ${turn} — with "quotes", \\ and ünïcödé 🚀`, `answer ${turn}`)
      await ctx.sessions.flush(s)
    }
    return ['turns']
  },
  async 'tool calls'(ctx) {
    const s = ctx.sessions.create(SessionId('tools'), { meta: { cwd: '/w' } })
    s.append('turn/start', { turn: 1 })
    user(s, 1, 'read the file')
    s.append('step/start', { turn: 1, step: 1 })
    answer(s, 1, [{ type: 'tool-call', id: CallId('call-1'), name: 'read', arguments: '{"path":"a.txt"}' }])
    s.append('tool/call', { turn: 1, step: 1, callId: CallId('call-1'), name: 'read', arguments: '{"path":"a.txt"}' })
    s.append('tool/result', {
      turn: 1, step: 1,
      message: freezeMessage({
        id: MessageId('tools-r1'), role: 'user',
        content: [{ type: 'tool-result', toolCallId: CallId('call-1'), content: [{ type: 'text', text: 'hello' }], isError: false }],
        source: { kind: 'tool', callId: CallId('call-1') },
      } as never),
    } as never, { surfaceOp: 'append', sourceEventSeqs: [4] })
    s.append('step/end', { turn: 1, step: 1 })
    s.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    await ctx.sessions.flush(s)
    return ['tools']
  },
  async 'chunk runs'(ctx) {
    const s = ctx.sessions.create(SessionId('chunks'), { meta: { cwd: '/w' } })
    s.append('turn/start', { turn: 1 })
    user(s, 1, 'stream please')
    s.append('step/start', { turn: 1, step: 1 })
    s.append('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'block-start', index: 0, blockType: 'text' } } as never)
    for (const text of ['Hel', 'lo, ', 'wor', 'ld']) {
      s.append('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text } } as never)
    }
    await ctx.sessions.flush(s)
    for (const text of ['!', ' bye']) {
      s.append('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text } } as never)
    }
    answer(s, 1, [{ type: 'text', text: 'Hello, world! bye' }])
    s.append('step/end', { turn: 1, step: 1 })
    s.append('turn/end', { turn: 1, reason: { kind: 'completed' } })
    await ctx.sessions.flush(s)
    return ['chunks']
  },
  async 'crash-repaired session'(ctx, side) {
    const s = ctx.sessions.create(SessionId('crashed'), { meta: { cwd: '/w' } })
    s.append('turn/start', { turn: 1 })
    user(s, 1, 'interrupted')
    s.append('step/start', { turn: 1, step: 1 })
    await ctx.sessions.flush(s)
    await ctx.fiber.dispose()
    const probe = await host(side)
    await side.tearTail(probe, 'crashed')
    await probe.fiber.dispose()
    const again = await host(side)
    await again.sessionPersistence.load(SessionId('crashed'))
    await again.fiber.dispose()
    return ['crashed']
  },
  async 'fork seed'(ctx) {
    const s = ctx.sessions.create(SessionId('parent'), { meta: { cwd: '/w' } })
    for (let turn = 1; turn <= 2; turn += 1) completedTurn(s, turn, `prompt ${turn}`, `reply ${turn}`)
    await ctx.sessions.flush(s)
    const child = ctx.sessions.fork(s, 5, SessionId('child'))
    child.append('turn/start', { turn: 3 })
    child.append('turn/end', { turn: 3, reason: { kind: 'completed' } })
    await ctx.sessions.flush(child)
    return ['parent', 'child']
  },
}

/** Run `scenario` on a fresh `side`, return each compared session's file bytes. */
async function run(makeSide: (dir: string, c: Encoding) => Side, compression: Encoding, scenario: string) {
  const dir = await freshDir()
  try {
    clock = 1_760_000_000_000
    vi.spyOn(Date, 'now').mockImplementation(() => (clock += 7))
    const side = makeSide(dir, compression)
    const ctx = await host(side)
    const ids = await scenarios[scenario]!(ctx, side)
    await ctx.fiber.dispose().catch(() => {})
    const reader = await host(side)
    const files = await Promise.all(ids.map(id => side.fileBytes(reader, id)))
    await reader.fiber.dispose()
    const problems = (await side.problems?.()) ?? []
    vi.restoreAllMocks()
    return { files, problems }
  } finally {
    await removeDir(dir)
  }
}

/** The scenario through DSH's JSONL backend and through `makeSide`: the same bytes, verify clean. */
async function expectIdentical(makeSide: (dir: string, c: Encoding) => Side, compression: Encoding, scenario: string) {
  const dsh = await run(jsonlSide, compression, scenario)
  const ours = await run(makeSide, compression, scenario)
  expect(ours.problems).toEqual([])
  expect(ours.files.length).toBe(dsh.files.length)
  for (const [i, file] of ours.files.entries()) {
    if (compression === 'none') expect(file.toString('utf8')).toBe(dsh.files[i]!.toString('utf8'))
    expect(Buffer.compare(file, dsh.files[i]!)).toBe(0)
  }
}

const EXTENSION = { none: '.jsonl', zstd: '.jsonl.zstd' } as const

for (const compression of ['none', 'zstd'] as const) {
  describe(`sessionlog writes DSH's bytes (${EXTENSION[compression]})`, () => {
    for (const scenario of Object.keys(scenarios)) {
      it(scenario, () => expectIdentical(sessionlogSide, compression, scenario))
    }
  })
}

describe('a DSH host serves the store\'s metrics', () => {
  it('counts the events and bytes DSH appended through the backend', async () => {
    const dir = await freshDir()
    try {
      const ctx = await host(sessionlogSide(dir, 'none'))
      await scenarios.turns!(ctx, sessionlogSide(dir, 'none'))
      const text = await (ctx.sessionPersistence as unknown as SessionlogPersistence).metrics()
      const sample = (name: string) => Number(text.split('\n').find(l => l.startsWith(`${name} `))?.split(' ')[1])
      const log = (await withStore(dir, store => store.exportBytes('turns'))).toString('utf8')
      const events = log.trimEnd().split('\n').length - 1
      expect(sample('sessionlog_appended_events_total')).toBe(events)
      expect(sample('sessionlog_appended_bytes_total')).toBe(Buffer.byteLength(log) - (log.indexOf('\n') + 1))
      expect(sample('sessionlog_sessions_created_total')).toBe(1)
      await ctx.fiber.dispose()
    } finally {
      await removeDir(dir)
    }
  })
})

describe.runIf(clusterSpecsRun())('cluster mode', () => {
  const postgres = postgresForSuite()

  for (const compression of ['none', 'zstd'] as const) {
    describe(`the fleet holds DSH's bytes (${EXTENSION[compression]})`, () => {
      for (const scenario of Object.keys(scenarios)) {
        it(scenario, async () => expectIdentical(clusterSide(await postgres().database()), compression, scenario))
      }
    })
  }
})
