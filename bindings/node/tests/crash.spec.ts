// SIGKILL a DSH host mid-run, repeatedly: every append whose flush resolved is in the store after
// reopen, and DSH's load closes the turn a kill left open.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import { freshDir, mount, removeDir } from './fixture.ts'

const HOST = fileURLToPath(new URL('./crash-host.mjs', import.meta.url))
const ROUNDS = 6
const SESSIONS = 8

/** Run the host until `ms` milliseconds after its first acknowledgement, then SIGKILL it. */
function runAndKill(dir: string, prefix: string, ms: number): Promise<Map<string, number>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [HOST, dir, String(SESSIONS), prefix], { stdio: ['ignore', 'pipe', 'inherit'] })
    const acked = new Map<string, number>()
    let buffered = ''
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString('utf8')
      const lines = buffered.split('\n')
      buffered = lines.pop() ?? ''
      for (const line of lines) {
        const [tag, id, events] = line.split(' ')
        if (tag === 'ack' && id !== undefined) {
          if (acked.size === 0) setTimeout(() => child.kill('SIGKILL'), ms)
          acked.set(id, Math.max(acked.get(id) ?? 0, Number(events)))
        }
      }
    })
    child.on('error', reject)
    child.on('exit', (_code, signal) => {
      if (signal === 'SIGKILL') resolve(acked)
      else reject(new Error(`the host exited on its own (${signal ?? _code})`))
    })
  })
}

describe('a SIGKILLed DSH host', () => {
  it('loses no acknowledged append, and DSH load repairs the open turn', async () => {
    const dir = await freshDir()
    try {
      let checked = 0
      for (let round = 0; round < ROUNDS; round += 1) {
        const acked = await runAndKill(dir, `r${round}`, 150 + round * 60)
        expect(acked.size).toBeGreaterThan(0)
        const ctx = new Context()
        await ctx.plugin(SessionStore)
        const fiber = await mount(ctx, dir)
        for (const [id, events] of acked) {
          const loaded = await ctx.sessionPersistence.load(SessionId(id))
          expect(loaded.events.length).toBeGreaterThanOrEqual(events)
          expect(loaded.events.map(e => e.seq)).toEqual(loaded.events.map((_, i) => i))
          expect(loaded.events.at(-1)?.type).toBe('turn/end')
          checked += 1
        }
        await fiber.dispose()
      }
      expect(checked).toBeGreaterThanOrEqual(ROUNDS)
    } finally {
      await removeDir(dir)
    }
  }, 120_000)
})
