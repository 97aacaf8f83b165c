// DSH's own backend contract suites, read in place, run against SessionlogPersistence.
import { Context } from '@deepseek-ai/cordis'
import SessionStore from '@deepseek-ai/dsh-session'
import { runPersistenceContract } from '../../../../shared/dsh-contract/contract.ts'
import { runCoordinatorContract } from '../../../../shared/dsh-contract/coordinator-contract.ts'
import { corruptTail, freshDir, mount, removeDir } from './fixture.ts'

runPersistenceContract('sessionlog', async () => {
  const dir = await freshDir()
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  const fiber = await mount(ctx, dir)
  return {
    persistence: ctx.sessionPersistence,
    dispose: async () => {
      await fiber.dispose()
      await removeDir(dir)
    },
  }
})

// One store directory per fixture, reopened by every mount, as DSH's JSONL fixture shares a root.
runCoordinatorContract('sessionlog', async () => {
  const dir = await freshDir()
  return {
    mount: async ctx => mount(ctx, dir),
    corruptTail: async id => corruptTail(dir, id),
    cleanup: async () => removeDir(dir),
  }
})
