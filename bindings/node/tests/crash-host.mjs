// A DSH host for the crash and power-cut tests: SessionStore + SessionlogPersistence on the store
// in argv[2] (durability argv[5], default sync), argv[3] sessions named `<argv[4]>-<i>`, each
// looping over turns written in two flushed halves (start, then end), so a kill can leave a turn
// open. After each flush resolves it prints `ack <session> <events>`: that many events are
// acknowledged (durable under sync; in cluster mode, committed in PostgreSQL). It runs until
// killed; a session whose flush is refused (in cluster mode, once another host took it over)
// prints `refused <session> <code>` and stops. With argv[6] (PostgreSQL's URL) it is host
// argv[7] of that fleet, with leases of argv[8] ms and takeover policy argv[9] (default wait),
// and takes commands on stdin, a line each:
// - `take <session>`: load the session (acquiring it, catching up from PostgreSQL, DSH closing
//   an open turn), print `took <session> <events>`, and continue it with the same turns;
// - `stop`: finish every session's flush in flight, unmount, print `stopped` and exit.
import { createInterface } from 'node:readline'
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import { SessionlogPersistence } from '../dsh.js'

const [dir, count, prefix] = [process.argv[2], Number(process.argv[3]), process.argv[4]]
const durability = process.argv[5] ?? 'sync'
const ctx = new Context()
await ctx.plugin(SessionStore)
const [url, host, lease, takeover] = process.argv.slice(6)
const cluster = url === undefined ? undefined : { url, host, lease: Number(lease), takeover: takeover ?? 'wait' }
const fiber = await ctx.plugin(SessionlogPersistence, { path: dir, durability, cluster })
let stopping = false

/** Run `write`, then print its ack of `events`; a refused write prints `refused <id> <code>`. */
async function acknowledged(id, write, events) {
  try {
    await write()
  } catch (error) {
    process.stdout.write(`refused ${id} ${error?.code ?? error?.name}\n`)
    return false
  }
  process.stdout.write(`ack ${id} ${events()}\n`)
  return true
}

async function drive(id) {
  const session = ctx.sessions.create(id, { meta: { cwd: '/crash' } })
  const flushed = () => acknowledged(id, () => ctx.sessions.flush(session), () => session.events.length)
  for (let turn = 1; !stopping; turn += 1) {
    session.append('turn/start', { turn })
    session.append('step/start', { turn, step: 1 })
    if (!(await flushed())) return
    session.append('step/end', { turn, step: 1 })
    session.append('turn/end', { turn, reason: { kind: 'completed' } })
    if (!(await flushed())) return
  }
}

/** Take session `id` over and continue it with the turns `drive` writes. */
async function takeOver(id) {
  const persistence = ctx.sessionPersistence
  let events
  try {
    ({ events } = await persistence.load(SessionId(id)))
  } catch (error) {
    process.stdout.write(`refused ${id} ${error?.code ?? error?.name}\n`)
    return
  }
  process.stdout.write(`took ${id} ${events.length}\n`)
  let seq = events.length
  const half = (...written) => {
    const batch = written.map(([type, data]) => ({ type, seq: seq++, time: Date.now(), data }))
    return acknowledged(id, () => persistence.append(SessionId(id), batch), () => seq)
  }
  for (let turn = events.filter(e => e.type === 'turn/start').length + 1; !stopping; turn += 1) {
    if (!(await half(['turn/start', { turn }], ['step/start', { turn, step: 1 }]))) return
    if (!(await half(['step/end', { turn, step: 1 }], ['turn/end', { turn, reason: { kind: 'completed' } }]))) return
  }
}

const drivers = Array.from({ length: count }, (_, i) => drive(SessionId(`${prefix}-${i}`)))
if (cluster !== undefined) {
  createInterface({ input: process.stdin }).on('line', async (line) => {
    const [command, id] = line.split(' ')
    if (command === 'take') drivers.push(takeOver(id))
    if (command === 'stop') {
      stopping = true
      await Promise.all(drivers)
      await fiber.dispose()
      process.stdout.write('stopped\n')
      process.exit(0)
    }
  })
}
await Promise.all(drivers)
