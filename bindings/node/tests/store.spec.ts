// The addon's own API: group commit, stable error codes, reopen, export, seek reads.
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Store, SessionlogError } from '../index.js'
import { freshDir, removeDir } from './fixture.ts'

const header = (id: string) => ({ version: 0, id, createdAt: 1000, cwd: '/w' })
const turn = (n: number, time: number) => [
  { type: 'turn/start', time, data: { turn: n } },
  { type: 'turn/end', time: time + 1, data: { turn: n, reason: { kind: 'completed' } } },
]

describe('sessionlog Store', () => {
  let dir: string
  beforeEach(async () => { dir = await freshDir() })
  afterEach(async () => { await removeDir(dir) })

  it('group-commits concurrent appends of many sessions into fewer writes, each durable', async () => {
    const store = await Store.open(dir, { durability: 'sync' })
    const ids = Array.from({ length: 64 }, (_, i) => `s${i}`)
    for (const id of ids) await store.createSession(header(id))
    const before = store.commitStats()
    const receipts = await Promise.all(ids.map(id => store.append(id, 0, turn(1, 10))))
    const after = store.commitStats()
    expect(receipts.every(r => r.firstSeq === 0 && r.count === 2)).toBe(true)
    expect(after.appends - before.appends).toBe(64)
    expect(after.writes - before.writes).toBeLessThan(64)
    await store.close()
    const reopened = await Store.open(dir)
    for (const id of ids) expect((await reopened.load(id))?.events.map(e => e.seq)).toEqual([0, 1])
    await reopened.close()
  })

  it('recycles WAL files by default under sync, not when told or buffered, and keeps every write', async () => {
    const recycled = async () => {
      const names = (await readdir(dir)).filter(n => n.startsWith('OPTIONS-')).sort()
      const text = await readFile(join(dir, names[names.length - 1] as string), 'utf8')
      return /^\s*recycle_log_file_num=(\d+)$/m.exec(text)?.[1]
    }
    let store = await Store.open(dir)
    expect(await recycled()).toBe('4')
    await store.createSession(header('w'))
    await store.append('w', 0, turn(1, 10))
    await store.close()
    store = await Store.open(dir, { walRecycling: false })
    expect(await recycled()).toBe('0')
    await store.append('w', 2, turn(2, 20))
    await store.close()
    store = await Store.open(dir, { durability: 'buffered' })
    expect(await recycled()).toBe('0')
    await store.close()
    store = await Store.open(dir)
    expect((await store.load('w'))?.events.map(e => e.seq)).toEqual([0, 1, 2, 3])
    await store.close()
  })

  it('keeps the events\' blocks in blob files when asked, and reads them with or without', async () => {
    const blobFiles = async () =>
      (await readdir(dir)).filter(n => n.endsWith('.blob')).length
    let store = await Store.open(dir, { blobFiles: true })
    await store.createSession(header('b'))
    const text = 'x'.repeat(2000)
    await store.append('b', 0, [{
      type: 'user/message',
      time: 10,
      data: { content: [{ type: 'text', text }], source: { kind: 'user' }, role: 'user', id: 'm1' },
      surfaceOp: 'append',
    }])
    await store.close()
    // Reopening replays the WAL into an SST flush: the 2 KB block goes to a blob file.
    store = await Store.open(dir, { blobFiles: true })
    expect(await blobFiles()).toBeGreaterThan(0)
    await store.close()
    store = await Store.open(dir)
    const loaded = await store.load('b')
    expect(loaded?.events.map(e => e.seq)).toEqual([0])
    expect(JSON.stringify(loaded?.events[0]?.data)).toContain(text)
    await store.append('b', 1, turn(1, 20))
    await store.close()
    store = await Store.open(dir, { blobFiles: true })
    expect((await store.load('b'))?.events.map(e => e.seq)).toEqual([0, 1, 2])
    await store.close()
  })

  it('flushes and compacts with direct I/O unless told not to, and reads the same either way', async () => {
    let store = await Store.open(dir, { directIo: false })
    expect(store.directIo).toBe(false)
    await store.createSession(header('d'))
    await store.append('d', 0, turn(1, 10))
    await store.close()
    // Reopening replays the WAL into a flush, now with direct I/O where the filesystem takes it
    // (CI's ext4 does).
    store = await Store.open(dir)
    if (process.env.CI) expect(store.directIo).toBe(true)
    expect((await store.load('d'))?.events.map(e => e.seq)).toEqual([0, 1])
    await store.append('d', 2, turn(2, 20))
    await store.close()
    expect(store.directIo).toBe(false)
    store = await Store.open(dir, { directIo: false })
    expect((await store.load('d'))?.events.map(e => e.seq)).toEqual([0, 1, 2, 3])
    await store.close()
  })

  it('keeps the order of one session\'s appends issued together', async () => {
    const store = await Store.open(dir)
    await store.createSession(header('one'))
    await Promise.all([1, 2, 3].map(n => store.append('one', (n - 1) * 2, turn(n, n * 10))))
    const loaded = await store.load('one')
    expect(loaded?.events.map(e => (e.data as { turn: number }).turn)).toEqual([1, 1, 2, 2, 3, 3])
    await store.close()
  })

  it('rejects with the engine message and a stable code', async () => {
    const store = await Store.open(dir)
    await store.createSession(header('e'))
    await store.append('e', 0, turn(1, 10))
    const stale = await store.append('e', 0, turn(2, 20)).catch((e: unknown) => e)
    expect(stale).toBeInstanceOf(SessionlogError)
    expect(stale).toMatchObject({ code: 'SESSIONLOG_STALE_SEQ' })
    expect((stale as Error).message).toContain('session "e"')
    const unknown = await store.exportBytes('nope').catch((e: unknown) => e)
    expect(unknown).toMatchObject({ code: 'SESSIONLOG_UNKNOWN_SESSION' })
    expect(await store.load('nope')).toBeUndefined()
    const locked = await Store.open(dir).catch((e: unknown) => e)
    expect(locked).toMatchObject({ code: 'SESSIONLOG_LOCKED' })
    await store.close()
    const closed = await store.load('e').catch((e: unknown) => e)
    expect(closed).toMatchObject({ code: 'SESSIONLOG_CLOSED' })
  })

  it('exports the bytes DSH writes, seeks by seq, forks and projects', async () => {
    const store = await Store.open(dir)
    await store.createSession(header('x'))
    await store.append('x', 0, turn(1, 10))
    await store.append('x', 2, turn(2, 20))
    const text = (await store.exportBytes('x')).toString('utf8')
    const lines = text.trimEnd().split('\n')
    expect(JSON.parse(lines[0] as string)).toEqual({ type: 'session', version: 0, id: 'x', createdAt: 1000, cwd: '/w', delegationDepth: 0 })
    expect(lines.slice(1).map(l => JSON.parse(l).seq)).toEqual([0, 1, 2, 3])
    expect((await store.readFrom('x', 3))?.events.map(e => e.seq)).toEqual([3])
    const r1 = await store.revision('x')
    await store.append('x', 4, turn(3, 30))
    expect(await store.revision('x')).not.toBe(r1)
    const fork = await store.fork('x', 'x-child', { at: 1 })
    expect(fork).toMatchObject({ id: 'x-child', seed: 2 })
    expect((await store.list()).map(s => s.id).sort()).toEqual(['x', 'x-child'])
    expect(Array.isArray(await store.messagesAt('x'))).toBe(true)
    expect((await store.verify()).problems).toEqual([])
    await store.close()
  })

  it('serves its metrics as Prometheus text, counting the appends made and refused', async () => {
    const store = await Store.open(dir)
    const ids = ['m1', 'm2', 'm3']
    for (const id of ids) await store.createSession(header(id))
    await Promise.all(ids.map(id => store.append(id, 0, turn(1, 10))))
    const stale = await store.append('m1', 0, turn(2, 20)).catch((e: unknown) => e)
    expect(stale).toMatchObject({ code: 'SESSIONLOG_STALE_SEQ' })
    const text = await store.metrics()
    const lines = text.trimEnd().split('\n')
    const samples = new Map(lines.filter(l => !l.startsWith('#')).map(l => {
      const at = l.lastIndexOf(' ')
      return [l.slice(0, at), Number(l.slice(at + 1))] as const
    }))
    // Each creation is an append of an empty first batch.
    expect(samples.get('sessionlog_appends_total')).toBe(6)
    expect(samples.get('sessionlog_sessions_created_total')).toBe(3)
    expect(samples.get('sessionlog_appended_events_total')).toBe(6)
    let bytes = 0
    for (const id of ids) {
      const log = (await store.exportBytes(id, { format: 'jsonl' })).toString('utf8')
      bytes += Buffer.byteLength(log) - (log.indexOf('\n') + 1)
    }
    expect(samples.get('sessionlog_appended_bytes_total')).toBe(bytes)
    expect(samples.get('sessionlog_append_refusals_total{reason="stale_seq"}')).toBe(1)
    expect(samples.get('sessionlog_append_refusals_total{reason="rejected"}')).toBe(0)
    // Every metric is introduced by its help, then its type; the text ends without `# EOF`, so a
    // host can append it to its own exposition.
    const types = lines.filter(l => l.startsWith('# TYPE '))
    expect(types.length).toBeGreaterThan(20)
    for (const type of types) {
      const name = type.split(' ')[2]
      expect(lines[lines.indexOf(type) - 1]).toMatch(new RegExp(`^# HELP ${name} \\S`))
    }
    expect(text).not.toContain('# EOF')
    await store.close()
    expect(await store.metrics().catch((e: unknown) => e)).toMatchObject({ code: 'SESSIONLOG_CLOSED' })
  })

  it('registers image/offload only when asked, and judges a log holding one as DSH does', async () => {
    const v4 = { type: 'session', version: 4, id: 'img', createdAt: 1, isSeeded: false, delegationDepth: 0 }
    const image = { type: 'image', attachment: { attachmentId: 'sha256:aa', mediaType: 'image/png', bytes: 1, width: 1, height: 1 } }
    const events = [
      { type: 'turn/start', time: 1, data: { turn: 1 } },
      { type: 'step/start', time: 1, data: { turn: 1, step: 1 } },
      { type: 'system/message', time: 1, data: { turn: 1, step: 1, message: { id: 's', role: 'system', content: [], source: { kind: 'system-prompt' } } }, surfaceOp: 'append' },
      { type: 'user/message', time: 1, data: { id: 'u', role: 'user', content: [{ type: 'text', text: 'look' }, image], source: { kind: 'user' } }, surfaceOp: 'append' },
      { type: 'image/offload', time: 2, data: { targets: [{ seq: 3, imageIndexes: [0] }] } },
    ]
    const host = await Store.open(dir, { messageProjections: ['image/offload'] })
    await host.createSession(JSON.stringify(v4))
    await host.append('img', 0, events)
    const log = await host.exportBytes('img')
    await host.close()

    const plainDir = await freshDir()
    try {
      const plain = await Store.open(plainDir)
      const report = await plain.importBytes('img.v4.jsonl', log)
      expect(report.verdict).toBe('corrupt: invalid seed event at index 4: session event "image/offload" requires a message projection; load its owning plugin or supply its projection definition')
      await plain.close()
      await removeDir(plainDir)
      const withIt = await Store.open(plainDir, { messageProjections: ['image/offload'] })
      expect((await withIt.importBytes('img.v4.jsonl', log)).verdict).toBe('clean')
      await withIt.close()
      const unknown = await Store.open(plainDir, { messageProjections: ['image/blur' as 'image/offload'] }).catch((e: unknown) => e)
      expect(String(unknown)).toContain('"image/blur" is not a built-in message projection')
    } finally {
      await removeDir(plainDir)
    }
  })
})
