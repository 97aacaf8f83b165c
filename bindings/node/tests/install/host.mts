// A DSH host in TypeScript, as a user writes it: scripts/install-test.mjs type-checks it with
// `tsc --noEmit` against the installed `sessionlog` types and DSH's. The `@ts-expect-error`
// lines must stay errors: they fail the check if the package's types go loose (`any`).
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import type { SessionPersistence } from '@deepseek-ai/dsh-session-persistence'
import { SessionlogError, Store, type StoreOptions, type StoredSession } from 'sessionlog-node'
import SessionlogPersistenceDefault, { SessionlogPersistence, withStore, type Config } from 'sessionlog-node/dsh'

export async function run(path: string): Promise<number> {
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  await ctx.plugin(SessionlogPersistence, { path, durability: 'sync' })
  const persistence: SessionPersistence = ctx.sessionPersistence
  const inspection = await persistence.load(SessionId('typed'))
  const config: Config = { path, encoding: 'jsonl.zstd', walRecycling: false, blobFiles: true, directIo: false }
  const same: typeof SessionlogPersistence = SessionlogPersistenceDefault

  const options: StoreOptions = { durability: 'buffered' }
  const store = await Store.open(path, options)
  const stored: StoredSession | undefined = await store.load('typed')
  const bytes: Buffer = await store.exportBytes('typed', { format: 'jsonl.zstd' })
  const exposition: string = await store.metrics()
  await store.close()
  const served: string = await (ctx.sessionPersistence as SessionlogPersistence).metrics()
  const count: number = await withStore(path, async s => (await s.list()).length)
  try {
    await Store.open(path)
  } catch (error) {
    if (error instanceof SessionlogError) console.log(error.code)
  }

  // @ts-expect-error: the store directory is required
  await ctx.plugin(SessionlogPersistence, { durability: 'sync' })
  // @ts-expect-error: durability is 'sync' or 'buffered'
  const wrong: StoreOptions = { durability: 'always' }
  // @ts-expect-error: an encoding DSH does not write
  const odd: Config = { path, encoding: 'gzip' }
  // @ts-expect-error: exportBytes resolves to a Buffer
  const text: string = await store.exportBytes('typed')
  // @ts-expect-error: metrics resolve to the exposition text
  const figures: { appends: number } = await store.metrics()

  void [inspection, config, same, stored, bytes, exposition, served, wrong, odd, text, figures]
  return count
}
