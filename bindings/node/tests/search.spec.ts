// The session index kept caught up in the background (`followIndex`): the CLI, reading beside
// the host (it reads the index the host keeps, and never writes it), finds what the host
// appended although the host itself never searched; without the option it does not.
import { spawnSync } from 'node:child_process'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { Store } from '../index.js'
import { freshDir, removeDir } from './fixture.ts'

const CLI = join(process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'sessionlog-target'), 'release', 'sessionlog')

/** The ids `sessionlog search TEXT --json` finds on `dir`, or its refusal's text. */
function searchBeside(dir: string, text: string): string[] | string {
  const run = spawnSync(CLI, ['--db', dir, 'search', text, '--json'], { encoding: 'utf8' })
  if (run.status !== 0) return run.stderr
  const lines = run.stdout.split('\n').filter(l => l !== '').map(l => JSON.parse(l))
  return lines.filter(l => 'id' in l).map(l => l.id)
}

/** Open a host on a fresh store (`followIndex` as given), append a wombat, and poll the CLI
 * beside it for up to `patience` ms; what it found last. */
async function foundBeside(followIndex: boolean, patience: number): Promise<string[] | string> {
  const dir = await freshDir()
  const store = await Store.open(dir, { followIndex })
  try {
    await store.createSession({ version: 0, id: 'w', createdAt: 1, cwd: '/w' })
    await store.append('w', 0, [{ type: 'user/message', time: 2, data: { id: 'u', role: 'user', content: [{ type: 'text', text: 'a wombat in the garden' }], source: { kind: 'user' } }, surfaceOp: 'append' }])
    const until = Date.now() + patience
    let found = searchBeside(dir, 'wombat')
    while (!(Array.isArray(found) && found.length > 0) && Date.now() < until) {
      await new Promise(resolve => setTimeout(resolve, 100))
      found = searchBeside(dir, 'wombat')
    }
    return found
  } finally {
    await store.close()
    await removeDir(dir)
  }
}

describe('followIndex', () => {
  it('keeps the index caught up without a search: a reader beside finds the append', async () => {
    expect(await foundBeside(true, 10_000)).toEqual(['w'])
  }, 30_000)

  it('without it, a reader beside finds nothing until the host searches', async () => {
    const found = await foundBeside(false, 3_000)
    expect(Array.isArray(found) ? found : [], `the CLI said: ${found}`).toEqual([])
  }, 30_000)
})
