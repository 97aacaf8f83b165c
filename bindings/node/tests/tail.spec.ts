// Following a session from Node: `for await (const e of store.tail(id, { from }))` yields the
// stored events, then each as it commits, in order, each once; `break` and an AbortSignal end
// it; an unknown session throws its code.
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { Store, SessionlogError } from '../index.js'
import { freshDir, removeDir } from './fixture.ts'

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
})
