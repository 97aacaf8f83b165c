// A DSH host for the crash and power-cut tests: SessionStore + SessionlogPersistence on the store
// in argv[2] (durability argv[5], default sync), argv[3] sessions named `<argv[4]>-<i>`, each
// looping over turns written in two flushed halves (start, then end), so a kill can leave a turn
// open. After each flush resolves it prints `ack <session> <events>`: that many events are
// acknowledged (durable under sync; in cluster mode, committed in PostgreSQL). It runs until
// killed; a session whose flush is refused (in cluster mode, once another host took it over)
// prints `refused <session> <code>` and stops. With argv[6] (PostgreSQL's URL) it is host
// argv[7] of that fleet, with leases of argv[8] ms.
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import { SessionlogPersistence } from '../dsh.js'

const [dir, count, prefix] = [process.argv[2], Number(process.argv[3]), process.argv[4]]
const durability = process.argv[5] ?? 'sync'
const ctx = new Context()
await ctx.plugin(SessionStore)
const [url, host, lease] = process.argv.slice(6)
const cluster = url === undefined ? undefined : { url, host, lease: Number(lease) }
await ctx.plugin(SessionlogPersistence, { path: dir, durability, cluster })

/** Flush `session`, then print its ack; a refused flush prints `refused <session> <code>`. */
async function flushed(session) {
  try {
    await ctx.sessions.flush(session)
  } catch (error) {
    process.stdout.write(`refused ${session.id} ${error?.code ?? error?.name}\n`)
    return false
  }
  process.stdout.write(`ack ${session.id} ${session.events.length}\n`)
  return true
}

async function drive(id) {
  const session = ctx.sessions.create(id, { meta: { cwd: '/crash' } })
  for (let turn = 1; ; turn += 1) {
    session.append('turn/start', { turn })
    session.append('step/start', { turn, step: 1 })
    if (!(await flushed(session))) return
    session.append('step/end', { turn, step: 1 })
    session.append('turn/end', { turn, reason: { kind: 'completed' } })
    if (!(await flushed(session))) return
  }
}

await Promise.all(Array.from({ length: count }, (_, i) => drive(SessionId(`${prefix}-${i}`))))
