// One rendering of every report: what the CLI's `--json` prints and what the Node binding
// returns are the same serialization of the same engine report. Each case runs the CLI binary
// and the binding on stores built by the same calls and compares the parsed objects, so a field
// renamed, added or dropped on one side only fails here.
import { spawnSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { writeFile } from 'node:fs/promises'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Store, headerFields } from '../index.js'
import { freshDir, removeDir, tornFragment } from './fixture.ts'

const CLI = join(process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'sessionlog-target'), 'release', 'sessionlog')

const header = (id: string) => ({ version: 0, id, createdAt: 1000, cwd: '/w' })
const turn = (n: number, time: number, close = true) => [
  { type: 'turn/start', time, data: { turn: n } },
  { type: 'user/message', time, data: { id: `u${n}`, role: 'user', content: [{ type: 'text', text: `hello ${n}` }], source: { kind: 'user' } }, surfaceOp: 'append' },
  ...(close ? [{ type: 'turn/end', time: time + 1, data: { turn: n, reason: { kind: 'completed' } } }] : []),
]

/** Run the CLI on the store `dir`; its standard output, or a thrown error naming its stderr. */
function cli(dir: string, args: string[], input?: string): string {
  const run = spawnSync(CLI, ['--db', dir, ...args], { input, encoding: 'utf8' })
  if (run.error) throw run.error
  if (run.status !== 0) throw new Error(`sessionlog ${args.join(' ')} exited ${run.status}: ${run.stderr}`)
  return run.stdout
}

/** The CLI's `--json` output: one object per line. */
function lines(text: string): any[] {
  return text.split('\n').filter(l => l !== '').map(l => JSON.parse(l))
}

/** Open `dir`, run `use`, close. */
async function withOpen<T>(dir: string, use: (store: Store) => Promise<T>): Promise<T> {
  const store = await Store.open(dir, { durability: 'sync' })
  try {
    return await use(store)
  } finally {
    await store.close()
  }
}

/** The same sessions in a store: two closed turns in `a`, an open turn in `b`, a torn tail in `t`. */
async function populate(dir: string): Promise<void> {
  await withOpen(dir, async store => {
    await store.createSession(header('a'))
    await store.append('a', 0, turn(1, 10))
    await store.append('a', 3, turn(2, 20))
    await store.createSession(header('b'))
    await store.append('b', 0, turn(1, 30, false))
    await store.createSession(header('t'))
    await store.append('t', 0, turn(1, 40))
    const bytes = await store.exportBytes('t')
    await store.remove('t')
    await store.importBytes('t.jsonl', Buffer.concat([bytes, tornFragment(bytes)]))
  })
}

describe('the CLI --json and the Node binding render the same reports', () => {
  let node = ''
  let shell = ''

  beforeAll(async () => {
    if (!existsSync(CLI)) throw new Error(`${CLI} is missing (cargo build --release)`)
    node = await freshDir()
    shell = await freshDir()
    await populate(node)
    await populate(shell)
  })

  afterAll(async () => {
    await removeDir(node)
    await removeDir(shell)
  })

  it('session summaries: list() and summary() are ls --json', async () => {
    const listed = lines(cli(node, ['ls', '--json'])).map(s => ({ ...s, header: headerFields(s.header) }))
    const { all, a } = await withOpen(node, async store => ({ all: await store.list(), a: await store.summary('a') }))
    const byId = (x: { id: string }, y: { id: string }) => x.id.localeCompare(y.id)
    expect(all.length).toBe(3)
    expect([...all].sort(byId)).toEqual([...listed].sort(byId))
    expect(a).toEqual(listed.find(s => s.id === 'a'))
    expect(Object.keys(a!).sort()).toEqual(['activityAt', 'archived', 'bytes', 'createdAt', 'cwd', 'events', 'format', 'generations', 'header', 'id', 'lines', 'revision', 'verdict'])
  })

  it('verify() is verify --json', async () => {
    const shown = lines(cli(node, ['verify', '--json']))
    const verified = await withOpen(node, store => store.verify())
    expect(shown).toEqual([verified])
    expect(verified).toMatchObject({ sessions: 3, problems: [] })
  })

  it('search() is search --json: its sessions, then {next, watermark}', async () => {
    const shown = lines(cli(node, ['search', 'hello', '--limit', '2', '--json']))
    const page = await withOpen(node, store => store.search({ text: 'hello', limit: 2 }))
    expect(shown).toEqual([...page.sessions, { next: page.next, watermark: page.watermark }])
    expect(page.sessions.map(s => s.id)).toEqual(['t', 'b'])
    expect(page.sessions[0].matches.length).toBeGreaterThan(0)
    const rest = await withOpen(node, store => store.search({ text: 'hello', limit: 2, after: page.next! }))
    expect(rest.sessions.map(s => s.id)).toEqual(['a'])
    expect(rest.next).toBeNull()
    const open = await withOpen(node, store => store.search({ open: true }))
    expect(open.sessions.map(s => s.id)).toEqual(['b'])
    await expect(withOpen(node, store => store.search({ verdict: 'dirty' }))).rejects.toThrow(/verdict "dirty"/)
    await expect(withOpen(node, store => store.search({ colour: 'red' } as any))).rejects.toThrow(/colour/)
  })

  it('messagesAt() and stateAt() are the values messages and state print', async () => {
    const messages = lines(cli(node, ['messages', 'a', '--at', '4']))
    const title = lines(cli(node, ['state', 'a', 'turns']))
    const got = await withOpen(node, async store => ({ messages: await store.messagesAt('a', 4), turns: await store.stateAt('a', 'turns') }))
    expect(messages.length).toBe(2)
    expect(got.messages).toEqual(messages)
    expect([got.turns]).toEqual(title)
  })

  it('eventKinds() is what kinds prints', async () => {
    const shown = lines(cli(node, ['kinds', 'a', '--at', '4']))
    const got = await withOpen(node, store => store.eventKinds('a', 4))
    expect(shown).toEqual([got])
    expect(got).toEqual({ events: 5, kinds: { 'turn/end': 1, 'turn/start': 2, 'user/message': 2 } })
    await expect(withOpen(node, store => store.eventKinds('nobody'))).rejects.toThrow(/nobody/)
  })

  it('importBytes() is an import --json line, less the file, status and error', async () => {
    const bytes = await withOpen(node, store => store.exportBytes('a'))
    const [into, intoByCli] = [await freshDir(), await freshDir()]
    const file = join(intoByCli, 'a.jsonl')
    try {
      await writeFile(file, bytes)
      const [line] = lines(cli(join(intoByCli, 'db'), ['import', '--json', file]))
      const imported = await withOpen(into, store => store.importBytes('a.jsonl', bytes))
      expect(line).toMatchObject({ file, status: 'imported', error: null })
      const { file: _file, status: _status, error: _error, ...report } = line
      expect(imported).toEqual(report)
      expect(Object.keys(imported).sort()).toEqual(['bytes', 'events', 'id', 'lines', 'verdict'])
    } finally {
      await removeDir(into)
      await removeDir(intoByCli)
    }
  })

  it('append(), fork() and repair() are append, fork and repair --json', async () => {
    const batch = turn(2, 50).map(e => JSON.stringify(e)).join('\n')
    const shown = {
      append: lines(cli(shell, ['append', 'b', '--expect-seq', '2', '--json'], turn(1, 31).slice(2).map(e => JSON.stringify(e)).join('\n'))),
      fork: lines(cli(shell, ['fork', 'b', 'child', '--at', '2', '--json'])),
      repair: lines(cli(shell, ['repair', 't', '--json'])),
      appendChild: lines(cli(shell, ['append', 'child', '--json'], batch)),
    }
    const got = await withOpen(node, async store => ({
      append: [await store.append('b', 2, turn(1, 31).slice(2))],
      fork: [await store.fork('b', 'child', { at: 2 })],
      repair: [await store.repair('t')],
      appendChild: [await store.append('child', undefined, turn(2, 50))],
    }))
    expect(got).toEqual(shown)
    expect(got.fork[0]).toMatchObject({ id: 'child', seed: 3 })
    expect(got.repair[0].cutBytes).toBeGreaterThan(0)
  })
})
