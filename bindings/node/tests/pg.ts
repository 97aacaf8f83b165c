// A throwaway PostgreSQL for the cluster-mode specs: `sessionlog-harness pg` starts one (initdb
// in a temp dir, loopback only, never a system service) with the fleet's schema, prints the
// superuser's URL (the superuser may act as any host, so the specs name their hosts freely),
// creates a fresh database with the schema for every line written to its stdin, and stops the
// server when its stdin closes. Each test gets a database of its own, so DSH's suites,
// which reuse session ids from test to test, each see an empty fleet.
//
// Where PostgreSQL 15 is not installed the specs skip and say so; under CI they fail instead.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { afterAll, beforeAll } from 'vitest'

const HARNESS = join(process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'sessionlog-target'), 'release', 'sessionlog-harness')
const INITDB = join(process.env.SESSIONLOG_PG_BIN ?? '/usr/lib/postgresql/15/bin', 'initdb')

/**
 * Whether the cluster specs run: PostgreSQL 15 is installed, or CI is set (where its absence
 * must fail the run, not skip it). Elsewhere a missing server is said once, and the specs skip.
 */
export function clusterSpecsRun(): boolean {
  if (existsSync(INITDB) || process.env.CI !== undefined) return true
  console.warn(`cluster-mode specs skipped: PostgreSQL 15 is not installed (no ${INITDB}); ./x test installs it`)
  return false
}

/** A running `sessionlog-harness pg`. */
export class Postgres {
  readonly #child: ChildProcessWithoutNullStreams
  /** Who waits for the next answer line, in the order the requests were written. */
  readonly #waiting: ((line: string) => void)[] = []
  #databases = 0
  /** The URL to the server's first database (with the schema). */
  url = ''

  private constructor(child: ChildProcessWithoutNullStreams) {
    this.#child = child
    createInterface({ input: child.stdout }).on('line', line => this.#waiting.shift()?.(line))
  }

  /** Start the server; rejects with the harness's own words when it cannot. */
  static async start(): Promise<Postgres> {
    if (!existsSync(HARNESS)) throw new Error(`${HARNESS} is not built: run cargo build --release`)
    if (!existsSync(INITDB)) throw new Error(`CI is set but PostgreSQL 15 is not installed (no ${INITDB}): the cluster-mode specs cannot run`)
    const child = spawn(HARNESS, ['pg'], { stdio: ['pipe', 'pipe', 'pipe'] })
    let stderr = ''
    child.stderr.on('data', chunk => { stderr += chunk })
    const pg = new Postgres(child)
    const failed = new Promise<never>((_, reject) => {
      child.once('exit', code => reject(new Error(`sessionlog-harness pg exited (${code}) before it answered: ${stderr}`)))
      child.once('error', reject)
    })
    failed.catch(() => {})
    pg.url = url(await Promise.race([pg.#answer(), failed]))
    return pg
  }

  /** The URL to a new, empty database with the schema. */
  async database(): Promise<string> {
    this.#databases += 1
    const answer = this.#answer()
    this.#child.stdin.write(`fleet_${this.#databases}\n`)
    return url(await answer)
  }

  /** Stop the server (it is removed with its directory). */
  async stop(): Promise<void> {
    const exited = new Promise(resolve => this.#child.once('exit', resolve))
    this.#child.stdin.end()
    await exited
  }

  /** The next line the harness prints. */
  #answer(): Promise<string> {
    return new Promise(resolve => this.#waiting.push(resolve))
  }
}

/**
 * A server for the enclosing `describe`: started before its tests, stopped after them. The
 * returned function gives the running server.
 */
export function postgresForSuite(): () => Postgres {
  let pg: Postgres | undefined
  beforeAll(async () => {
    pg = await Postgres.start()
  }, 120_000)
  // Stopping removes the server's directory, a database per test: give it time on a busy disk.
  afterAll(async () => {
    await pg?.stop()
  }, 120_000)
  return () => {
    if (pg === undefined) throw new Error('the PostgreSQL for this suite did not start')
    return pg
  }
}

/** The URL in one of the harness's answers, or its error thrown. */
function url(line: string): string {
  const answer = JSON.parse(line) as { url?: string; error?: string }
  if (answer.url === undefined) throw new Error(`sessionlog-harness pg: ${answer.error ?? line}`)
  return answer.url
}
