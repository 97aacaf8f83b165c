// A sessionlog store directory for one test, a real torn tail in it, and a DSH host process to
// SIGKILL mid-run.
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
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

/** The DSH host the crash tests kill (`crash-host.mjs`). */
const CRASH_HOST = fileURLToPath(new URL('./crash-host.mjs', import.meta.url))

/** A crash host's place in a fleet: PostgreSQL's URL, its host name, its lease in ms, its takeover policy. */
export interface CrashHostFleet {
  url: string
  host: string
  lease: number
  takeover?: 'wait' | 'force'
}

/**
 * Start the crash host on `dir` (`sessions` sessions named `<prefix>-<i>`; a host of `fleet` when
 * given); `heard` gets each line it prints, split: `ack <session> <events>`, `refused <session>
 * <code>`, `took <session> <events>` or `stopped`; in a fleet it takes `take <session>` and `stop`
 * on stdin (see crash-host.mjs).
 */
export function crashHost(dir: string, sessions: number, prefix: string, fleet: CrashHostFleet | undefined, heard: (line: string[]) => void): ChildProcess {
  const cluster = fleet === undefined ? [] : ['sync', fleet.url, fleet.host, String(fleet.lease), fleet.takeover ?? 'wait']
  const child = spawn(process.execPath, [CRASH_HOST, dir, String(sessions), prefix, ...cluster], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  let buffered = ''
  child.stdout!.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8')
    const lines = buffered.split('\n')
    buffered = lines.pop() ?? ''
    for (const line of lines) heard(line.split(' '))
  })
  return child
}

/**
 * Run the crash host until `ms` milliseconds after its first acknowledgement, then SIGKILL it;
 * the events acknowledged per session. A refused flush fails the run: nothing here refuses one.
 */
export function runAndKill(dir: string, sessions: number, prefix: string, ms: number, fleet?: CrashHostFleet): Promise<Map<string, number>> {
  return new Promise((resolve, reject) => {
    const acked = new Map<string, number>()
    const child = crashHost(dir, sessions, prefix, fleet, ([tag, id, value]) => {
      if (tag === 'refused') reject(new Error(`the host's flush of ${id} was refused: ${value}`))
      if (tag === 'ack' && id !== undefined) {
        if (acked.size === 0) setTimeout(() => child.kill('SIGKILL'), ms)
        acked.set(id, Math.max(acked.get(id) ?? 0, Number(value)))
      }
    })
    child.on('error', reject)
    child.on('exit', (_code, signal) => {
      if (signal === 'SIGKILL') resolve(acked)
      else reject(new Error(`the host exited on its own (${signal ?? _code})`))
    })
  })
}
