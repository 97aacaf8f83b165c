// Cluster mode on a real PostgreSQL (a throwaway server, tests/pg.ts): DSH's own contract suites
// against SessionlogPersistence as a host of a fleet; fencing: a host whose session another host
// took over can never write it again (also a host process paused past its lease and resumed),
// and the fleet holds exactly what was acknowledged; and host failover: three host processes on
// one PostgreSQL, each in turn SIGKILLed mid-append, its sessions taken over and continued by
// another. And the fleet's reports are the CLI's `--json`.
import { spawnSync } from 'node:child_process'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import { meta, oneTurnLog, runPersistenceContract } from '../../../../shared/dsh-contract/contract.ts'
import { runCoordinatorContract } from '../../../../shared/dsh-contract/coordinator-contract.ts'
import { SessionlogPersistence, withStore } from '../dsh.js'
import { Store, type SessionlogError } from '../index.js'
import { crashHost, freshDir, removeDir } from './fixture.ts'
import { clusterSpecsRun, postgresForSuite } from './pg.ts'

/** The CLI, for the reports it prints as Node's results are. */
const CLI = join(process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'sessionlog-target'), 'release', 'sessionlog')

/** What the cluster-mode plugin config takes besides the directory. */
interface Fleet {
  url: string
  host: string
  lease?: number
  takeover?: 'wait' | 'force'
}

/** Mount the backend on `dir` as a host of `fleet`. */
function mount(ctx: Context, dir: string, fleet: Fleet) {
  return ctx.plugin(SessionlogPersistence, { path: dir, cluster: fleet })
}

/** A context with DSH's SessionStore and the backend mounted on `dir` as a host of `fleet`. */
async function host(dir: string, fleet: Fleet) {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  const fiber = await mount(ctx, dir, fleet)
  return { persistence: ctx.sessionPersistence as SessionlogPersistence, fiber }
}

/** The code of the rejection of `promise` (fails the test when it resolves). */
async function rejectionCode(promise: Promise<unknown>): Promise<string | undefined> {
  const error = await promise.then(() => undefined, (e: unknown) => e as SessionlogError)
  expect(error, 'expected a rejection').toBeDefined()
  return error?.code
}

describe.runIf(clusterSpecsRun())('cluster mode', () => {
  const postgres = postgresForSuite()

  // Every test: its own store directory, on a fleet (a database) of its own.
  runPersistenceContract('sessionlog, cluster mode', async () => {
    const dir = await freshDir()
    const url = await postgres().database()
    const { persistence, fiber } = await host(dir, { url, host: 'a' })
    return {
      persistence,
      dispose: async () => {
        await fiber.dispose()
        await removeDir(dir)
      },
    }
  })

  // No `corruptTail`: the fleet cannot leave a torn tail. Every batch is committed whole to
  // PostgreSQL (one transaction) before the local store writes it, and a local copy is rebuilt
  // from PostgreSQL's batches, so no never-committed fragment is ever stored.
  runCoordinatorContract('sessionlog, cluster mode', async () => {
    const dir = await freshDir()
    const url = await postgres().database()
    return {
      mount: async ctx => mount(ctx, dir, { url, host: 'a' }),
      cleanup: async () => removeDir(dir),
    }
  })

  describe('fencing', () => {
    it('a host whose session was taken over by force is fenced; the fleet holds what was acknowledged', async () => {
      const url = await postgres().database()
      const [dirA, dirB, dirC] = await Promise.all([freshDir(), freshDir(), freshDir()])
      const a = await host(dirA, { url, host: 'a' })
      const b = await host(dirB, { url, host: 'b', takeover: 'force' })
      try {
        const m = meta('fenced', '/w')
        await a.persistence.create(m)
        await a.persistence.append(m.id, oneTurnLog())
        const acknowledgedByA = (await a.persistence.readRaw(m.id))!.content

        // B takes the session over while A's lease runs.
        const taken = await b.persistence.load(m.id)
        expect(taken.events).toHaveLength(6)

        // A's next appends are refused as fenced, and write nothing anywhere.
        const late = [
          { type: 'turn/start', seq: 6, time: 7, data: { turn: 2 } },
          { type: 'step/start', seq: 7, time: 8, data: { turn: 2, step: 1 } },
        ] as const
        expect(await rejectionCode(a.persistence.append(m.id, [...late]))).toBe('SESSIONLOG_FENCED')
        expect(await rejectionCode(a.persistence.append(m.id, [...late]))).toBe('SESSIONLOG_FENCED')
        expect((await b.persistence.readRaw(m.id))!.content).toBe(acknowledgedByA)

        // B continues at seq 6: PostgreSQL's log of the session ends where A's acknowledged ended.
        const closers = [
          { type: 'turn/start', seq: 6, time: 9, data: { turn: 2 } },
          { type: 'turn/end', seq: 7, time: 10, data: { turn: 2, reason: { kind: 'completed' } } },
        ] as const
        await b.persistence.append(m.id, [...closers])
        const acknowledged = (await b.persistence.readRaw(m.id))!.content
        expect(acknowledged.startsWith(acknowledgedByA)).toBe(true)
        expect(acknowledged.split('\n')).toHaveLength(1 + 8 + 1)

        // A host with an empty disk rebuilds the session from PostgreSQL alone, byte for byte.
        const c = await host(dirC, { url, host: 'c', takeover: 'force' })
        try {
          const reloaded = await c.persistence.load(m.id)
          expect(reloaded.events.map(e => e.seq)).toEqual([0, 1, 2, 3, 4, 5, 6, 7])
          expect((await c.persistence.readRaw(m.id))!.content).toBe(acknowledged)
        } finally {
          await c.fiber.dispose()
        }
      } finally {
        await a.fiber.dispose()
        await b.fiber.dispose()
        await Promise.all([dirA, dirB, dirC].map(removeDir))
      }
    })

    it('a store acquires, is refused a session under another host\'s live lease, and takes it by force', async () => {
      const url = await postgres().database()
      const [dirA, dirB] = await Promise.all([freshDir(), freshDir()])
      const a = await Store.open(dirA, { cluster: { url, host: 'a' } })
      const b = await Store.open(dirB, { cluster: { url, host: 'b' } })
      try {
        expect(a.host).toBe('a')
        const header = { version: 0, id: 'owned', createdAt: 1, cwd: '/w' }
        await a.createAsWritten(header, oneTurnLog())
        expect(await rejectionCode(b.acquire('owned'))).toBe('SESSIONLOG_OWNED')

        const acquired = await b.acquire('owned', { force: true })
        expect(acquired).toMatchObject({ owner: 'b', epoch: 2, nextSeq: 6, caughtUp: 1 })
        expect(await rejectionCode(a.append('owned', 6, [{ type: 'turn/start', data: { turn: 2 } }]))).toBe('SESSIONLOG_FENCED')
        expect(await b.append('owned', 6, [{ type: 'turn/start', data: { turn: 2 } }])).toEqual({ firstSeq: 6, count: 1 })

        // A catches up on a session it no longer holds; writes the fleet does not carry are refused.
        expect(await a.sync(['owned'])).toBe(1)
        expect(await a.exportBytes('owned')).toEqual(await b.exportBytes('owned'))
        expect(await rejectionCode(a.repair('owned'))).toBe('SESSIONLOG_NOT_IN_FLEET')

        // An import goes through the fleet: a copy under another id is B's to read byte for byte;
        // a torn file, or an id the fleet holds, is refused.
        const copy = new TextDecoder().decode(await b.exportBytes('owned')).replace('"id":"owned"', '"id":"copied"')
        expect(await a.importBytes('copied.jsonl', new TextEncoder().encode(copy))).toMatchObject({ id: 'copied', verdict: 'clean' })
        expect(await b.sync(['copied'])).toBe(1)
        expect(new TextDecoder().decode(await b.exportBytes('copied'))).toBe(copy)
        expect(await rejectionCode(b.importBytes('torn.jsonl', new TextEncoder().encode(copy.replace('"id":"copied"', '"id":"torn"').slice(0, -2))))).toBe('SESSIONLOG_NOT_IN_FLEET')
        expect(await rejectionCode(b.importBytes('again.jsonl', new TextEncoder().encode(copy)))).toBe('SESSIONLOG_DUPLICATE_SESSION')

        // A forks the session B holds (reading it only): the child is DSH's fork file, on every host.
        expect(await a.fork('owned', 'child', { at: 5 })).toEqual({ id: 'child', seed: 6, endSeed: true, closers: 0 })
        expect(await b.sync(['child'])).toBe(1)
        const child = new TextDecoder().decode(await b.exportBytes('child'))
        expect(child).toEqual(new TextDecoder().decode(await a.exportBytes('child')))
        expect(child.split('\n')[0]).toContain('"parentSession":"owned"')
        expect(child.split('\n')[0]).toContain('"seedLength":6')
        expect(await rejectionCode(a.fork('owned', 'child'))).toBe('SESSIONLOG_FORK')

        // Given up, it is A's again without force.
        expect(await b.release('owned')).toBe(true)
        expect(await a.acquire('owned')).toMatchObject({ owner: 'a', epoch: 3, nextSeq: 7, caughtUp: 0 })
      } finally {
        await a.close()
        await b.close()
        await Promise.all([dirA, dirB].map(removeDir))
      }
    })

    it('a host paused past its lease and taken over is fenced when it resumes; PostgreSQL holds nothing it wrote after', async () => {
      const url = await postgres().database()
      const [dirA, dirB, dirC] = await Promise.all([freshDir(), freshDir(), freshDir()])
      const sessions = ['p-0', 'p-1', 'p-2']
      const acked = new Map<string, number>()
      const ackedAfterResume = new Map<string, number>()
      const refused = new Map<string, string>()
      let resumed = false
      const a = crashHost(dirA, sessions.length, 'p', { url, host: 'a', lease: 1000 }, ([tag, id, value]) => {
        if (tag === 'ack') (resumed ? ackedAfterResume : acked).set(id!, Number(value))
        if (tag === 'refused') refused.set(id!, value!)
      })
      const exited = new Promise(resolve => a.once('exit', resolve))
      const until = async (done: () => boolean) => {
        while (!done()) await new Promise(resolve => setTimeout(resolve, 20))
      }
      const b = await host(dirB, { url, host: 'b' })
      try {
        await until(() => acked.size === sessions.length)
        a.kill('SIGSTOP')
        // B takes the sessions without force once A's lease has run out: its takeover policy is
        // to wait for that (asking again while the lease runs), and a stopped A cannot renew it.
        const taken = new Map<string, string>()
        for (const id of sessions) {
          const loaded = await b.persistence.load(SessionId(id))
          expect(loaded.events.length).toBeGreaterThanOrEqual(acked.get(id)!)
          taken.set(id, (await b.persistence.readRaw(SessionId(id)))!.content)
        }

        resumed = true
        a.kill('SIGCONT')
        await until(() => refused.size === sessions.length)
        expect([...refused.values()]).toEqual(sessions.map(() => 'SESSIONLOG_FENCED'))
        // An ack heard after the resume is of a flush committed before the takeover.
        for (const [id, events] of ackedAfterResume) {
          expect(events).toBeLessThanOrEqual(taken.get(id)!.split('\n').length - 2)
        }

        // PostgreSQL holds what B found at the takeover, and nothing more: a host with an empty
        // disk serves exactly that.
        await withStore(dirC, async (c) => {
          await c.sync(sessions)
          for (const id of sessions) expect((await c.exportBytes(id)).toString('utf8')).toBe(taken.get(id))
        }, { cluster: { url, host: 'c' } })
      } finally {
        a.kill('SIGKILL')
        await exited
        await b.fiber.dispose()
        await Promise.all([dirA, dirB, dirC].map(removeDir))
      }
    }, 60_000)

    it('listing is the fleet\'s: a session removed on one host is gone from every host\'s list and load', async () => {
      const url = await postgres().database()
      const [dirA, dirB] = await Promise.all([freshDir(), freshDir()])
      const a = await Store.open(dirA, { cluster: { url, host: 'a' } })
      const b = await host(dirB, { url, host: 'b' })
      try {
        for (const id of ['kept', 'removed']) await a.createAsWritten({ version: 0, id, createdAt: 1, cwd: '/w' }, oneTurnLog())
        const listed = async () => (await b.persistence.list()).map(h => h.id).sort()
        expect(await listed()).toEqual(['kept', 'removed'])
        // B's store now keeps a copy of both; A removes one from the fleet.
        await a.remove('removed')
        expect(await listed()).toEqual(['kept'])
        expect((await a.list()).map(s => s.id)).toEqual(['kept'])
        await expect(b.persistence.load(SessionId('removed'))).rejects.toThrow(/"removed" not found/)
      } finally {
        await a.close()
        await b.fiber.dispose()
        await Promise.all([dirA, dirB].map(removeDir))
      }
    })

    it('a deposed host serves its own copy no longer than its read bound; a session removed on one host leaves every host\'s store', async () => {
      const url = await postgres().database()
      const [dirA, dirB] = await Promise.all([freshDir(), freshDir()])
      // A renews a minute apart: what it serves after the takeover is its read bound's doing.
      const a = await Store.open(dirA, { cluster: { url, host: 'a', lease: 60_000, readBound: 0 } })
      const b = await Store.open(dirB, { cluster: { url, host: 'b' } })
      try {
        await a.createAsWritten({ version: 0, id: 's', createdAt: 1, cwd: '/w' }, oneTurnLog())
        await a.createAsWritten({ version: 0, id: 'kept', createdAt: 1, cwd: '/w' }, oneTurnLog())
        await b.acquire('s', { force: true })
        expect(await b.append('s', 6, [{ type: 'turn/start', data: { turn: 2 } }])).toEqual({ firstSeq: 6, count: 1 })
        expect(await a.sync(['s'])).toBe(1)
        expect(await a.exportBytes('s')).toEqual(await b.exportBytes('s'))

        // B removes it: that session alone, gone from A's store at A's next sync.
        await b.remove('s')
        expect(await a.sync(['s'])).toBe(0)
        expect(await a.summary('s')).toBeUndefined()
        expect((await a.list()).map(s => s.id)).toEqual(['kept'])
      } finally {
        await a.close()
        await b.close()
        await Promise.all([dirA, dirB].map(removeDir))
      }
    })

    it('a URL PostgreSQL refuses fails the open at once, with the reason and without the password', async () => {
      const dir = await freshDir()
      try {
        const port = new URL(postgres().url).port
        for (const [url, reason] of [
          [`postgres://postgres:s3cret-pw@127.0.0.1:${port}/nosuchdb`, 'database "nosuchdb" does not exist'],
          [`postgres://postgres:s3cret-pw@127.0.0.1:${port}/postgres?sslmode=bogus`, 'sslmode "bogus"'],
        ] as const) {
          const error = await Store.open(dir, { cluster: { url, host: 'a' } }).then(() => undefined, (e: unknown) => e as SessionlogError)
          expect(error?.code).toMatch(/^SESSIONLOG_(UNAVAILABLE|CLUSTER_CONFIG)$/)
          expect(error?.message).toContain(reason)
          expect(error?.message).not.toContain('s3cret-pw')
        }
      } finally {
        await removeDir(dir)
      }
    })

    it('takeover \'wait\' takes a session once its holder gives it up, and refuses while a live holder keeps it', async () => {
      const url = await postgres().database()
      const [dirA, dirB] = await Promise.all([freshDir(), freshDir()])
      const a = await host(dirA, { url, host: 'a', lease: 1000 })
      const b = await host(dirB, { url, host: 'b', lease: 1000 })
      let aMounted = true
      try {
        const m = meta('waited', '/w')
        await a.persistence.create(m)
        await a.persistence.append(m.id, oneTurnLog())

        // A renews its lease while mounted: B's wait ends (one lease and 5 s) without the session.
        const started = Date.now()
        expect(await rejectionCode(b.persistence.load(m.id))).toBe('SESSIONLOG_OWNED')
        expect(Date.now() - started).toBeGreaterThanOrEqual(1000)

        // A unmounts (gives the session up) while B waits, once B's store has been refused the
        // session (A's lease runs): B then takes it.
        await withStore(dirB, async (store) => {
          let refused = 0
          const acquire = store.acquire.bind(store)
          store.acquire = async (...args: Parameters<Store['acquire']>) => {
            try {
              return await acquire(...args)
            } catch (error) {
              if ((error as SessionlogError)?.code === 'SESSIONLOG_OWNED') refused += 1
              throw error
            }
          }
          const loading = b.persistence.load(m.id)
          let settled = false
          loading.then(() => { settled = true }, () => { settled = true })
          while (refused === 0 && !settled) await new Promise(done => setTimeout(done, 20))
          await a.fiber.dispose()
          aMounted = false
          expect((await loading).events).toHaveLength(6)
        })
      } finally {
        if (aMounted) await a.fiber.dispose()
        await b.fiber.dispose()
        await Promise.all([dirA, dirB].map(removeDir))
      }
    }, 30_000)
  })

  describe('host failover', () => {
    it('three host processes on one PostgreSQL: each in turn SIGKILLed mid-append, its sessions taken over and continued by another; every acknowledged append is there once, byte for byte, on every host', async () => {
      const url = await postgres().database()
      const dirs: string[] = []
      /** Events acknowledged per session (the most any host reported). */
      const acked = new Map<string, number>()
      /** Events a session had when its heir loaded it. */
      const took = new Map<string, number>()
      /** Which slot's host process serves each session. */
      const owner = new Map<string, number>()
      const refusals: string[] = []
      const stopped = new Set<number>()
      let incarnation = 0
      const until = async (done: () => boolean) => {
        while (!done()) await new Promise(resolve => setTimeout(resolve, 20))
      }
      /** A host process in `slot` with a fresh disk, starting `sessions` sessions of its own. */
      const start = async (slot: number, sessions: number) => {
        const dir = await freshDir()
        dirs.push(dir)
        incarnation += 1
        const fleet = { url, host: `h${incarnation}`, lease: 1000, takeover: incarnation % 2 === 0 ? 'force' as const : 'wait' as const }
        const child = crashHost(dir, sessions, `s${slot}`, fleet, ([tag, id, value]) => {
          if (tag === 'ack') acked.set(id!, Math.max(acked.get(id!) ?? 0, Number(value)))
          if (tag === 'ack' && !owner.has(id!)) owner.set(id!, slot)
          if (tag === 'took') took.set(id!, Number(value))
          if (tag === 'refused') refusals.push(`${id} ${value}`)
          if (tag === 'stopped') stopped.add(slot)
        })
        return { child, exited: new Promise(resolve => child.once('exit', resolve)) }
      }
      const hosts = await Promise.all([0, 1, 2].map(slot => start(slot, 2)))
      try {
        await until(() => acked.size === 6)
        for (let round = 0; round < 6; round += 1) {
          // Every session moves on, then the victim dies with appends in flight and its lease live.
          const before = new Map(acked)
          await until(() => [...before].every(([id, n]) => acked.get(id)! > n))
          await new Promise(resolve => setTimeout(resolve, 50 + round * 40))
          const victim = round % 3
          hosts[victim]!.child.kill('SIGKILL')
          await hosts[victim]!.exited
          const ackedAtKill = new Map(acked)
          const orphans = [...owner].filter(([, slot]) => slot === victim).map(([id]) => id)
          expect(orphans.length).toBeGreaterThan(0)

          // The next host takes them: each loaded with every acknowledged event, then continued.
          const heir = (victim + 1) % 3
          for (const id of orphans) {
            took.delete(id)
            owner.set(id, heir)
            hosts[heir]!.child.stdin!.write(`take ${id}\n`)
          }
          await until(() => orphans.every(id => took.has(id)) || refusals.length > 0)
          expect(refusals).toEqual([])
          for (const id of orphans) expect(took.get(id)).toBeGreaterThanOrEqual(ackedAtKill.get(id)!)

          // The victim comes back as a new host with an empty disk, and serves the next orphans.
          hosts[victim] = await start(victim, 0)
        }
        await until(() => [...acked.keys()].every(id => acked.get(id)! > (took.get(id) ?? 0)))
        hosts.forEach(h => h.child.stdin!.write('stop\n'))
        await until(() => stopped.size === 3)
        await Promise.all(hosts.map(h => h.exited))
        expect(refusals).toEqual([])
      } finally {
        for (const h of hosts) h.child.kill('SIGKILL')
        await Promise.all(hosts.map(h => h.exited))
      }

      try {
        // PostgreSQL's copy, read by a host with an empty disk: every session whole, each turn
        // once, and exactly the events its last host acknowledged.
        const ids = [...acked.keys()].sort()
        const served = new Map<string, string>()
        await withStore(await freshDir().then((dir) => { dirs.push(dir); return dir }), async (fresh) => {
          await fresh.sync(ids)
          for (const id of ids) {
            const content = (await fresh.exportBytes(id)).toString('utf8')
            const events = content.split('\n').slice(1, -1).map(line => JSON.parse(line) as { type: string, seq: number, data: { turn?: number } })
            expect(events.map(e => e.seq)).toEqual(events.map((_, i) => i))
            const turns = events.filter(e => e.type === 'turn/start').map(e => e.data.turn)
            expect(turns).toEqual(turns.map((_, i) => i + 1))
            expect(events.length).toBe(acked.get(id))
            served.set(id, content)
          }
          expect((await fresh.verify()).problems).toEqual([])
        }, { cluster: { url, host: 'check' } })

        // Every host's disk, the killed ones' too, caught up: the same bytes, verify clean.
        for (const dir of dirs.slice(0, -1)) {
          await withStore(dir, async (store) => {
            await store.sync(ids)
            for (const id of ids) expect((await store.exportBytes(id)).toString('utf8')).toBe(served.get(id))
            expect((await store.verify()).problems).toEqual([])
          }, { cluster: { url, host: 'check' } })
        }
      } finally {
        await Promise.all(dirs.map(removeDir))
      }
    }, 120_000)
  })

  describe('reports', () => {
    it('acquire returns what cluster acquire --json prints', async () => {
      const dirs = await Promise.all([freshDir(), freshDir(), freshDir(), freshDir()])
      const [createdA, createdB, viaNode, viaCli] = dirs
      try {
        // Two fleets written alike: host a creates the session and lets it go.
        const urls = [await postgres().database(), await postgres().database()]
        for (const [url, dir] of [[urls[0], createdA], [urls[1], createdB]] as const) {
          const store = await Store.open(dir, { cluster: { url, host: 'a' } })
          await store.createSession({ version: 0, id: 's', createdAt: 1, cwd: '/w' })
          await store.append('s', 0, [{ type: 'turn/start', time: 2, data: { turn: 1 } }])
          await store.close()
        }
        const run = spawnSync(CLI, ['--db', viaCli, '--cluster', urls[1], '--host', 'b', 'cluster', 'acquire', 's', '--json'], { encoding: 'utf8' })
        expect(run.status, run.stderr).toBe(0)
        const shown = JSON.parse(run.stdout)
        const store = await Store.open(viaNode, { cluster: { url: urls[0], host: 'b' } })
        try {
          expect(await store.acquire('s')).toEqual(shown)
        } finally {
          await store.close()
        }
        expect(shown).toMatchObject({ id: 's', owner: 'b', epoch: 2, nextSeq: 1, deleted: false, caughtUp: expect.any(Number) })
      } finally {
        await Promise.all(dirs.map(removeDir))
      }
    }, 120_000)

    it('search on an empty host finds the sessions two other hosts wrote', async () => {
      const dirs = await Promise.all([freshDir(), freshDir(), freshDir(), freshDir()])
      try {
        const url = await postgres().database()
        for (const [dir, host] of [[dirs[0], 'a'], [dirs[1], 'b']] as const) {
          const store = await Store.open(dir, { cluster: { url, host } })
          await store.createSession({ version: 0, id: `from-${host}`, createdAt: 1, cwd: '/w' })
          await store.append(`from-${host}`, 0, [{ type: 'user/message', time: 2, data: { content: [{ type: 'text', text: `a wombat on host ${host}` }], source: { kind: 'user' }, role: 'user', id: 'u' }, surfaceOp: 'append' }])
          await store.close()
        }
        const empty = await Store.open(dirs[2], { cluster: { url, host: 'c' } })
        try {
          const found = await empty.search({ text: 'wombat' })
          expect(found.sessions.map((s: { id: string }) => s.id).sort()).toEqual(['from-a', 'from-b'])
          const run = spawnSync(CLI, ['--db', dirs[3], '--cluster', url, '--host', 'd', 'search', 'wombat', '--json'], { encoding: 'utf8' })
          expect(run.status, run.stderr).toBe(0)
          const lines = run.stdout.trim().split('\n').map(l => JSON.parse(l))
          expect(found.sessions).toEqual(lines.slice(0, -1).map(({ score, ...rest }) => ({ ...rest, score: expect.any(Number) })))
        } finally {
          await empty.close()
        }
      } finally {
        await Promise.all(dirs.map(removeDir))
      }
    }, 120_000)
  })
})
