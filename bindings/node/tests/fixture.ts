// A sessionlog store directory for one test, and a real torn tail in it.
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { zstdCompressSync } from 'node:zlib'
import type { Context } from '@deepseek-ai/cordis'
import { SessionlogPersistence, withStore } from '../dsh.js'

/** A fresh, empty store directory. */
export async function freshDir(): Promise<string> {
  return mkdtemp(join(tmpdir(), 'sessionlog-node-'))
}

/** Remove a store directory. */
export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true })
}

/** Mount the backend on `dir`. */
export function mount(ctx: Context, dir: string) {
  return ctx.plugin(SessionlogPersistence, { path: dir, durability: 'sync' })
}

/** The zstd magic number: how a `.jsonl.zstd` log starts. */
const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd])

/**
 * What a crash mid-write leaves after a log's committed bytes: half a record in a `.jsonl` log,
 * half a frame (of a whole record) in a `.jsonl.zstd` one, as DSH's writers would leave them.
 */
export function tornFragment(log: Buffer): Buffer {
  const record = '{"type":"step/end","seq":999,"time":12,"data":{"turn":1,"step":1}}\n'
  if (log.subarray(0, 4).equals(ZSTD_MAGIC)) {
    const frame = zstdCompressSync(Buffer.from(record))
    return frame.subarray(0, frame.length >> 1)
  }
  return Buffer.from(record.slice(0, record.length >> 1))
}

/**
 * Leave a never-committed fragment after session `id`'s committed lines, as a crash mid-write
 * does: the session's stored bytes are re-imported with a partial record appended, so the store
 * holds a real torn tail (its verdict is `torn`) that DSH's load must repair.
 */
export async function corruptTail(dir: string, id: string): Promise<void> {
  await withStore(dir, async (store) => {
    const bytes = await store.exportBytes(id)
    const fragment = tornFragment(bytes)
    await store.remove(id)
    const report = await store.importBytes(`${id}.jsonl`, Buffer.concat([bytes, fragment]))
    if (report.verdict !== 'torn') throw new Error(`expected a torn session, the store says ${report.verdict}`)
  })
}
