// Following a session from Node: `for await (const e of store.tail(id, { from }))` yields the
// stored events, then each as it commits, in order, each once; `break` and an AbortSignal end
// it; an unknown session throws its code. And from another process while a Node host appends:
// `sessionlog tail ID --from 0 --follow` prints exactly what `sessionlog events ID` prints, and a
// tail restarted from the last seq + 1 goes on without a gap.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Store, SessionlogError } from '../index.js'
import { freshDir, removeDir } from './fixture.ts'

const CLI = join(process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'sessionlog-target'), 'release', 'sessionlog')

/** How long a test waits for the lines a tail must print. */
const LINE_WAIT_MS = 20_000

/** `sessionlog --db DB ARGS…`, which must succeed: its standard output's lines. */
function cliLines(db: string, args: string[]): string[] {
  const run = spawnSync(CLI, ['--db', db, ...args], { encoding: 'utf8' })
  if (run.error) throw run.error
  if (run.status !== 0) throw new Error(`sessionlog ${args.join(' ')} exited ${run.status}: ${run.stderr}`)
  return run.stdout.split('\n').filter((line) => line !== '')
}

/** A running `sessionlog --db DB tail ARGS…`: the lines it printed so far, and a wait for more. */
class TailProcess {
  readonly lines: string[] = []
  private readonly child: ChildProcess
  private stderr = ''
  private exited: Promise<void>
  private done = false
  private waiter?: () => void

  constructor(db: string, args: string[]) {
    this.child = spawn(CLI, ['--db', db, 'tail', ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    createInterface({ input: this.child.stdout! }).on('line', (line) => {
      this.lines.push(line)
      this.waiter?.()
    })
    this.child.stderr!.on('data', (chunk) => { this.stderr += chunk })
    this.exited = new Promise((resolve) => this.child.once('exit', () => {
      this.done = true
      this.waiter?.()
      resolve()
    }))
  }

  /** Wait until it printed `count` lines in all (it fails the test past LINE_WAIT_MS). */
  async upTo(count: number): Promise<string[]> {
    const deadline = Date.now() + LINE_WAIT_MS
    while (this.lines.length < count) {
      if (this.done) throw new Error(`tail exited ${this.child.exitCode}: ${this.stderr}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error(`tail printed ${this.lines.length} of ${count} lines: ${this.stderr}`)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left)
        this.waiter = () => { clearTimeout(timer); resolve() }
      })
    }
    return this.lines.slice(0, count)
  }

  /** Stop it (it follows until interrupted). */
  async stop(): Promise<void> {
    if (!this.done) this.child.kill('SIGTERM')
    await this.exited
  }
}

const header = (id: string) => ({ version: 0, id, createdAt: 1000, cwd: '/w' })
const turn = (n: number, time: number) => [
  { type: 'turn/start', time, data: { turn: n } },
  { type: 'turn/end', time: time + 1, data: { turn: n, reason: { kind: 'completed' } } },
]

describe('Store.tail', () => {
  let dir: string
  beforeEach(async () => { dir = await freshDir() })
  afterEach(async () => { await removeDir(dir) })

  it('yields stored events, then live ones as they commit, each once, and ends on break', async () => {
    const store = await Store.open(dir, { durability: 'buffered' })
    await store.createSession(header('a'))
    await store.append('a', 0, turn(1, 10))
    const seen: number[] = []
    const following = (async () => {
      for await (const event of store.tail('a', { from: 1 })) {
        seen.push(event.seq)
        if (event.seq === 7) break
      }
    })()
    for (let n = 2; n <= 4; n++) await store.append('a', 2 * (n - 1), turn(n, 10 * n))
    await following
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7])
    const stored = (await store.load('a'))?.events.slice(1, 8)
    const again: unknown[] = []
    for await (const event of store.tail('a', { from: 1 })) {
      again.push(event)
      if (again.length === 7) break
    }
    expect(again).toEqual(stored)
    await store.close()
  })

  it('ends when its signal aborts, even while waiting, and refuses an unknown session', async () => {
    const store = await Store.open(dir, { durability: 'buffered' })
    await store.createSession(header('a'))
    const controller = new AbortController()
    const waiting = (async () => {
      const got: unknown[] = []
      for await (const event of store.tail('a', { from: 5, signal: controller.signal })) got.push(event)
      return got
    })()
    controller.abort()
    expect(await waiting).toEqual([])
    const unknown = (async () => {
      for await (const _ of store.tail('nope')) { /* nothing */ }
    })()
    await expect(unknown).rejects.toSatisfy(
      (e: unknown) => e instanceof SessionlogError && e.code === 'SESSIONLOG_UNKNOWN_SESSION',
    )
    await store.close()
  })

  it('`sessionlog tail --follow` in another process prints what `sessionlog events` prints while a Node host appends, and resumes without a gap', async () => {
    const store = await Store.open(dir, { durability: 'buffered' })
    await store.createSession(header('a'))
    const tail = new TailProcess(dir, ['a', '--from', '0', '--follow'])
    try {
      for (let n = 1; n <= 20; n++) await store.append('a', 2 * (n - 1), turn(n, 10 * n))
      const first = await tail.upTo(40)
      await tail.stop()
      expect(tail.lines).toEqual(first)
      expect(first).toEqual(cliLines(dir, ['events', 'a']))
      const resumed = new TailProcess(dir, ['a', '--from', '40', '--follow'])
      try {
        for (let n = 21; n <= 30; n++) await store.append('a', 2 * (n - 1), turn(n, 10 * n))
        const rest = await resumed.upTo(20)
        expect([...first, ...rest]).toEqual(cliLines(dir, ['events', 'a']))
      } finally {
        await resumed.stop()
      }
    } finally {
      await tail.stop()
      await store.close()
    }
  })
})
