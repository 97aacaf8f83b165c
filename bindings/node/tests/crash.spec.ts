// SIGKILL a DSH host mid-run, repeatedly: every append whose flush resolved is in the store after
// reopen, and DSH's load closes the turn a kill left open.
import { describe, expect, it } from 'vitest'
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import { freshDir, mount, removeDir, runAndKill } from './fixture.ts'

const ROUNDS = 6
const SESSIONS = 8

describe('a SIGKILLed DSH host', () => {
  it('loses no acknowledged append, and DSH load repairs the open turn', async () => {
    const dir = await freshDir()
    try {
      let checked = 0
      for (let round = 0; round < ROUNDS; round += 1) {
        const acked = await runAndKill(dir, SESSIONS, `r${round}`, 150 + round * 60)
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
