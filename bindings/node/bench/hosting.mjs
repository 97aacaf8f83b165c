// Hosting benchmark: S sessions hosted by DSH's SessionStore, each looping "append one turn's
// events, await ctx.sessions.flush(session)", against DSH's JSONL backend (compression none and
// zstd) and SessionlogPersistence, one after the other in this run, on the same workload.
//
//   node bench/hosting.mjs --sessions S --seconds D [--backend B] [--dir DIR] [--json]
//
// Prints durable turns/s, events/s, p50/p99 flush latency and process CPU per turn for each;
// with --json the last line is one JSON object whose `ratios` map holds `vs_jsonl` and
// `vs_jsonl_zstd` (sessionlog's durable turns/s ÷ each peer's). `--backend` runs one backend
// alone (no ratios): `sessionlog-harness bench node-hosting` runs each in its own process that
// way, under a disk model, and takes the ratios itself.
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Context } from '@deepseek-ai/cordis'
import SessionStore, { SessionId } from '@deepseek-ai/dsh-session'
import { MessageId, freezeMessage } from '@deepseek-ai/dsh-llm'
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl'
import { SessionlogPersistence } from '../dsh.js'

const { values: args } = parseArgs({
  options: {
    sessions: { type: 'string', default: '100' },
    seconds: { type: 'string', default: '10' },
    backend: { type: 'string' },
    dir: { type: 'string' },
    json: { type: 'boolean', default: false },
  },
})
const sessions = Number(args.sessions)
const seconds = Number(args.seconds)
if (!(sessions >= 1 && seconds > 0)) throw new Error('--sessions must be >= 1 and --seconds > 0')

const backends = [
  { name: 'jsonl', plugin: JsonlSessionPersistence, config: dir => ({ root: dir, compression: 'none' }) },
  { name: 'jsonl_zstd', plugin: JsonlSessionPersistence, config: dir => ({ root: dir, compression: 'zstd' }) },
  { name: 'sessionlog', plugin: SessionlogPersistence, config: dir => ({ path: dir, durability: 'sync' }) },
]

/** One generated DSH-shaped turn: a prompt, a tool call and its result, an answer. */
function appendTurn(session, turn) {
  const text = `turn ${turn}: ${'lorem ipsum dolor sit amet '.repeat(4)}`
  session.append('turn/start', { turn })
  session.append('user/message', freezeMessage({
    id: MessageId(`${session.id}-u${turn}`), role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' },
  }), { surfaceOp: 'append' })
  session.append('step/start', { turn, step: 1 })
  session.append('assistant/message', {
    turn, step: 1,
    message: freezeMessage({
      id: MessageId(`${session.id}-a${turn}`), role: 'assistant', content: [{ type: 'text', text: `answer ${text}` }],
      source: { kind: 'model', provider: 'bench', model: 'bench' },
    }),
  }, { surfaceOp: 'append' })
  session.append('step/end', { turn, step: 1 })
  session.append('turn/end', { turn, reason: { kind: 'completed' } })
  return 6
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

async function measure(backend) {
  const dir = mkdtempSync(join(args.dir ?? tmpdir(), `hosting-${backend.name}-`))
  const ctx = new Context()
  await ctx.plugin(SessionStore)
  await ctx.plugin(backend.plugin, backend.config(dir))
  const live = Array.from({ length: sessions }, (_, i) => ctx.sessions.create(SessionId(`bench-${i}`), { meta: { cwd: '/bench' } }))
  const latencies = []
  let turns = 0
  let events = 0
  const cpu0 = process.cpuUsage()
  const t0 = performance.now()
  const deadline = t0 + seconds * 1000
  await Promise.all(live.map(async (session) => {
    for (let turn = 1; performance.now() < deadline; turn += 1) {
      const n = appendTurn(session, turn)
      const start = performance.now()
      await ctx.sessions.flush(session)
      latencies.push(performance.now() - start)
      turns += 1
      events += n
    }
  }))
  const elapsed = (performance.now() - t0) / 1000
  const cpu = process.cpuUsage(cpu0)
  await ctx.fiber.dispose()
  rmSync(dir, { recursive: true, force: true })
  latencies.sort((a, b) => a - b)
  return {
    backend: backend.name,
    turns,
    turns_per_s: turns / elapsed,
    events_per_s: events / elapsed,
    p50_ms: percentile(latencies, 50),
    p99_ms: percentile(latencies, 99),
    cpu_us_per_turn: turns === 0 ? 0 : (cpu.user + cpu.system) / turns,
  }
}

const chosen = backends.filter(b => args.backend === undefined || b.name === args.backend)
if (chosen.length === 0) throw new Error(`--backend must be one of ${backends.map(b => b.name).join(', ')}`)
const results = []
for (const backend of chosen) results.push(await measure(backend))
console.log(`hosting: ${sessions} session(s), ${seconds}s each, DSH SessionStore + flush per turn`)
console.log('backend       turns/s    events/s   p50 ms   p99 ms   cpu us/turn')
for (const r of results) {
  console.log(`${r.backend.padEnd(12)} ${r.turns_per_s.toFixed(1).padStart(9)} ${r.events_per_s.toFixed(0).padStart(11)} ${r.p50_ms.toFixed(2).padStart(8)} ${r.p99_ms.toFixed(2).padStart(8)} ${r.cpu_us_per_turn.toFixed(0).padStart(13)}`)
}
const by = Object.fromEntries(results.map(r => [r.backend, r]))
const ratio = peer => (by.sessionlog && by[peer]?.turns_per_s > 0 ? by.sessionlog.turns_per_s / by[peer].turns_per_s : null)
if (args.json && chosen.length === 1) {
  console.log(JSON.stringify(results[0]))
} else if (args.json) {
  console.log(JSON.stringify({
    bench: 'hosting-node',
    sessions,
    seconds,
    results,
    ratios: { vs_jsonl: ratio('jsonl'), vs_jsonl_zstd: ratio('jsonl_zstd') },
  }))
}
