// Following a session in cluster mode, on a real PostgreSQL (a throwaway server, tests/pg.ts):
// `store.tail(id, { from })` on a host with an empty disk yields a session's events while
// another host appends and a third takes it over and appends on, each once, in order, equal to
// what `sessionlog events` prints at the end; a signal ends it while it waits, and a session the
// fleet does not hold throws its code. Its steps share one subscription (one `LISTEN`
// connection), not one each, given up when the tail ends.
import { spawnSync } from 'node:child_process'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { Store, SessionlogError } from '../index.js'
import { freshDir, removeDir } from './fixture.ts'
import { clusterSpecsRun, postgresForSuite } from './pg.ts'

const PSQL = join(process.env.SESSIONLOG_PG_BIN ?? '/usr/lib/postgresql/15/bin', 'psql')

/** `query`'s one number, asked of the database at `url`. */
function counted(url: string, query: string): number {
  const run = spawnSync(PSQL, [url, '-Atc', query], { encoding: 'utf8' })
  if (run.error) throw run.error
  if (run.status !== 0) throw new Error(`psql exited ${run.status}: ${run.stderr}`)
  return Number(run.stdout.trim())
}

/** How many connections PostgreSQL has taken to the database at `url` so far. */
const connectionsMade = (url: string) =>
  counted(url, 'select sessions from pg_stat_database where datname = current_database()')

/** How many connections to the database at `url` are open and listening. */
const listening = (url: string) =>
  counted(url, "select count(*) from pg_stat_activity where datname = current_database() and query ilike 'listen%'")

const CLI = join(process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'sessionlog-target'), 'release', 'sessionlog')

/** `sessionlog --db DIR --cluster URL --host HOST ARGS…`, which must succeed: its lines. */
function cliLines(dir: string, url: string, host: string, args: string[]): string[] {
  const run = spawnSync(CLI, ['--db', dir, '--cluster', url, '--host', host, ...args], { encoding: 'utf8' })
  if (run.error) throw run.error
  if (run.status !== 0) throw new Error(`sessionlog ${args.join(' ')} exited ${run.status}: ${run.stderr}`)
  return run.stdout.split('\n').filter((line) => line !== '')
}

const turn = (n: number) => [
  { type: 'turn/start', time: 10 * n, data: { turn: n } },
  { type: 'turn/end', time: 10 * n + 1, data: { turn: n, reason: { kind: 'completed' } } },
]

/**
 * Run `test` with hosts `a` and `c` of a fresh fleet (each on an empty disk), where `a` has
 * created session `s` and appended its first turn; both are closed after.
 */
async function withHostsAAndC(
  postgres: () => { database(): Promise<string> },
  test: (url: string, a: Store, c: Store) => Promise<void>,
): Promise<void> {
  const url = await postgres().database()
  const [dirA, dirC] = await Promise.all([freshDir(), freshDir()])
  const a = await Store.open(dirA, { cluster: { url, host: 'a' } })
  const c = await Store.open(dirC, { cluster: { url, host: 'c' } })
  try {
    await a.createSession({ version: 0, id: 's', createdAt: 1, cwd: '/w' })
    await a.append('s', 0, turn(1))
    await test(url, a, c)
  } finally {
    await a.close()
    await c.close()
    await Promise.all([dirA, dirC].map(removeDir))
  }
}

describe.runIf(clusterSpecsRun())('Store.tail in cluster mode', () => {
  const postgres = postgresForSuite()

  it('follows a session another host appends, across a takeover, event for event', async () => {
    const url = await postgres().database()
    const dirs = await Promise.all([freshDir(), freshDir(), freshDir(), freshDir()])
    const [a, b, c] = await Promise.all(['a', 'b', 'c'].map((host, i) => Store.open(dirs[i], { cluster: { url, host } })))
    try {
      await a.createSession({ version: 0, id: 's', createdAt: 1, cwd: '/w' })
      const turns = 16
      const seen: { seq: number }[] = []
      const following = (async () => {
        for await (const event of c.tail('s', { from: 0 })) {
          seen.push(event)
          if (seen.length === 2 * turns) break
        }
      })()
      for (let n = 1; n <= turns; n++) {
        if (n === turns / 2 + 1) await b.acquire('s', { force: true })
        await (n <= turns / 2 ? a : b).append('s', 2 * (n - 1), turn(n))
      }
      await following
      expect(seen.map((e) => e.seq)).toEqual([...Array(2 * turns).keys()])
      expect(seen).toEqual((await b.load('s'))?.events)
      // Each event as `sessionlog events` prints it, from a fourth host with an empty disk.
      const printed = cliLines(dirs[3], url, 'd', ['events', 's'])
      expect(seen.map((event) => JSON.stringify(event))).toEqual(printed)
    } finally {
      await Promise.all([a, b, c].map((s) => s.close()))
      await Promise.all(dirs.map(removeDir))
    }
  }, 120_000)

  it('resumes one subscription from step to step: not a connection to PostgreSQL per step', async () => {
    await withHostsAAndC(postgres, async (url, a, c) => {
      const turns = 30
      const seen: unknown[] = []
      const tail = c.tail('s', { from: 0 })
      // The first step subscribes; count the connections made from then on.
      seen.push((await tail.next()).value)
      const before = connectionsMade(url)
      for (let n = 2; n <= turns; n++) {
        await a.append('s', 2 * (n - 1), turn(n))
        // Each batch is taken before the next is appended: a step per batch.
        while (seen.length < 2 * n) seen.push((await tail.next()).value)
      }
      const made = connectionsMade(url) - before
      expect(seen).toEqual((await a.load('s'))?.events)
      // This count's own query is one; the appends' leases and commits reuse theirs.
      expect(made).toBeLessThan(turns / 3)
      expect(listening(url)).toBe(1)
      // Ended, the tail gives its connection up.
      await tail.return(undefined)
      const deadline = Date.now() + 5_000
      while (listening(url) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50))
      expect(listening(url)).toBe(0)
    })
  }, 120_000)

  it('ends when its signal aborts while it waits, and refuses a session the fleet does not hold', async () => {
    await withHostsAAndC(postgres, async (_url, _a, c) => {
      const controller = new AbortController()
      const waiting = (async () => {
        const got: unknown[] = []
        for await (const event of c.tail('s', { from: 2, signal: controller.signal })) got.push(event)
        return got
      })()
      setTimeout(() => controller.abort(), 300)
      expect(await waiting).toEqual([])
      const unknown = (async () => {
        for await (const _ of c.tail('nope')) { /* nothing */ }
      })()
      await expect(unknown).rejects.toSatisfy(
        (e: unknown) => e instanceof SessionlogError && e.code === 'SESSIONLOG_UNKNOWN_SESSION',
      )
    })
  })
})
