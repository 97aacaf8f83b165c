// sessionlog as a DeepSeek Harness persistence backend: `ctx.plugin(SessionlogPersistence,
// { path, durability })` registers `ctx.sessionPersistence`, and DSH's PersistenceCoordinator
// drives the storage hooks below (buffering, serialization, adoption and repair sequencing stay
// DSH's). Every session lives in one sessionlog store directory; its bytes are the ones DSH's
// JSONL writer would have written, so `readRaw` returns the exact file.
//
// Invariants:
// - The header and the first batch land in one commit (`createAsWritten`), as DSH's seam
//   requires; a session whose log has no body line (an empty first batch) is never visible, and
//   the next first append adopts it.
// - Every batch is kept as DSH's own JSONL writer keeps it, also one DSH's reader will refuse
//   (an unknown event type, a foreign header version, a malformed legacy shape): DSH's
//   coordinator judges the log at load, with its own errors, as it does for its own backends.
// - One store handle per directory in this process (RocksDB takes a lock): mounts of one path
//   share it, and the last one to close closes it.
// - In cluster mode (`cluster: { url, host }`) the store is this host's index of a fleet whose
//   system of record is PostgreSQL: every stored session the coordinator reads in order to write
//   (`loadStored`: load, resume, create's existence check, adoption) is first acquired for this
//   host, by the takeover policy, so every batch it then appends is fenced by this host's epoch;
//   the other reads catch the store up with PostgreSQL first (but for sessions this host holds,
//   which only it writes), and listing lists the fleet's live sessions.
import { resolve } from 'node:path'
import {
  DEFAULT_PREPARED_SESSION_CACHE_SIZE,
  DEFAULT_WRITE_BATCH_MAX_DELAY_MS,
  PersistenceCoordinator,
  SessionPersistence,
  SessionPersistenceRevision,
} from '@deepseek-ai/dsh-session-persistence'
import { Store, headerFields } from './index.js'

/** Open stores of this process by directory: the store's promise and its users. */
const openStores = new Map()

/** Open (or share) the store in `path`. */
function acquire(path, options) {
  let entry = openStores.get(path)
  if (entry === undefined) {
    entry = { store: Store.open(path, options), users: 0 }
    openStores.set(path, entry)
    entry.store.catch(() => openStores.delete(path))
  }
  entry.users += 1
  return entry.store
}

/** Stop using the store in `path`; the last user closes it. */
async function release(path) {
  const entry = openStores.get(path)
  if (entry === undefined) return
  entry.users -= 1
  if (entry.users > 0) return
  openStores.delete(path)
  await (await entry.store).close()
}

/**
 * Run `use` with the store in `path`, shared with any mount of it in this process.
 * @template T
 * @param {string} path store directory
 * @param {(store: Store) => Promise<T>} use
 * @param {{durability?: 'sync' | 'buffered', walRecycling?: boolean, blobFiles?: boolean, directIo?: boolean,
 *   messageProjections?: string[], cluster?: {url: string, host: string, lease?: number},
 *   followIndex?: boolean}} [options]
 * @returns {Promise<T>}
 */
export async function withStore(path, use, { durability = 'sync', walRecycling = true, blobFiles = false, directIo = true, messageProjections = [], cluster, followIndex = false } = {}) {
  const absolute = resolve(path)
  const store = await acquire(absolute, { durability, walRecycling, blobFiles, directIo, messageProjections, cluster, followIndex })
  try {
    return await use(store)
  } finally {
    await release(absolute)
  }
}

/** How often a `'wait'` takeover asks again while another host's lease runs, in ms. */
const TAKEOVER_POLL_MS = 250

/** How much longer than one lease a `'wait'` takeover waits for the owner's lease to run out. */
const TAKEOVER_GRACE_MS = 5_000

/** The default lease, in ms (the binding's). */
const DEFAULT_LEASE_MS = 30_000

/** Check a plugin config's `cluster` and fill its defaults (`undefined`: no cluster mode). */
function clusterConfig(cluster) {
  if (cluster === undefined) return undefined
  const { url, host, lease = DEFAULT_LEASE_MS, readBound, takeover = 'wait' } = cluster
  if (typeof url !== 'string' || url === '' || typeof host !== 'string' || host === '') {
    throw new Error('SessionlogPersistence cluster mode needs PostgreSQL\'s URL and this host\'s name: { cluster: { url, host } }')
  }
  if (takeover !== 'wait' && takeover !== 'force') {
    throw new Error(`SessionlogPersistence cluster.takeover must be 'wait' or 'force', got ${String(takeover)}`)
  }
  return { url, host, lease, readBound, takeover }
}

/** Whether `error` is the store saying it has no such session. */
function isUnknown(error) {
  return error?.code === 'SESSIONLOG_UNKNOWN_SESSION'
}

/** The torn-tail marker handed to the coordinator and back to `commitRepair`. */
class TornTail {
  /** @param {string} revision the stored revision that had the torn tail */
  constructor(revision) {
    this.revision = revision
  }
}

/** DSH persistence backed by a sessionlog store. */
export class SessionlogPersistence extends SessionPersistence {
  static inject = ['sessions']

  supportsRawArtifacts = true

  /** Backend label for the coordinator's diagnostics. */
  name = 'session-persistence-sessionlog'

  /**
   * @param {import('@deepseek-ai/cordis').Context} ctx
   * @param {{path: string, durability?: 'sync' | 'buffered', walRecycling?: boolean, blobFiles?: boolean, directIo?: boolean,
   *   messageProjections?: string[], followIndex?: boolean,
   *   encoding?: 'jsonl' | 'jsonl.zstd', preparedSessionCacheSize?: number,
   *   writeBatchMaxDelayMs?: number,
   *   cluster?: {url: string, host: string, lease?: number, readBound?: number, takeover?: 'wait' | 'force'}}} config
   */
  constructor(ctx, config) {
    super(ctx)
    if (typeof config?.path !== 'string' || config.path === '') {
      throw new Error('SessionlogPersistence needs a store directory: { path }')
    }
    this.config = config
    this.path = resolve(config.path)
    this.encoding = config.encoding ?? 'jsonl'
    this.cluster = clusterConfig(config.cluster)
    this.store = acquire(this.path, {
      durability: config.durability ?? 'sync',
      walRecycling: config.walRecycling ?? true,
      blobFiles: config.blobFiles ?? false,
      directIo: config.directIo ?? true,
      messageProjections: config.messageProjections ?? [],
      followIndex: config.followIndex ?? false,
      ...this.cluster === undefined
        ? {}
        : { cluster: { url: this.cluster.url, host: this.cluster.host, lease: this.cluster.lease, readBound: this.cluster.readBound } },
    })
    // Open failures surface on first use; don't let them go unobserved meanwhile.
    this.store.catch(() => {})
    this.coordinator = new PersistenceCoordinator(this.ctx, this, {
      preparedSessionCacheSize: config.preparedSessionCacheSize ?? DEFAULT_PREPARED_SESSION_CACHE_SIZE,
      writeBatchMaxDelayMs: config.writeBatchMaxDelayMs ?? DEFAULT_WRITE_BATCH_MAX_DELAY_MS,
    })
  }

  // --- SessionPersistence service API (DSH's coordinator does the orchestration) ---

  /** Where a session lives: the store directory and the session's id in it. */
  locate(meta) {
    return { kind: 'sessionlog', path: `${this.path}#${meta.id}` }
  }

  create(meta) {
    return this.coordinator.create(meta)
  }

  append(id, events) {
    return this.coordinator.append(id, events)
  }

  prepare(id, signal) {
    return this.coordinator.prepare(id, signal)
  }

  load(id) {
    return this.coordinator.load(id)
  }

  inspect(id, signal) {
    return this.coordinator.inspect(id, signal)
  }

  readFrom(id, fromSeq, signal) {
    return this.coordinator.readFrom(id, fromSeq, signal)
  }

  /**
   * Follow session `id` as this host appends to it: every event from `from` on, stored ones
   * first, then each as it commits (`Store.tail`); end it with `break` or `signal`.
   * @param {string} id session id
   * @param {{from?: number, signal?: AbortSignal}} [options]
   */
  async *tail(id, { from = 0, signal } = {}) {
    yield* (await this.store).tail(id, { from, signal })
  }

  // --- PersistenceBackend hooks ---

  /**
   * The stored session (header, committed events, revision, torn marker), or undefined. In
   * cluster mode the coordinator reads through here before it writes, so the session is first
   * acquired for this host (undefined when the fleet has no such session).
   */
  async loadStored(id, signal) {
    signal?.throwIfAborted()
    if (this.cluster !== undefined && !(await this.claim(id, signal))) return undefined
    const stored = await (await this.store).load(id)
    signal?.throwIfAborted()
    if (stored === undefined || stored.events.length === 0) return undefined
    return {
      meta: stored.header,
      events: stored.events,
      revision: SessionPersistenceRevision(stored.revision),
      ...stored.torn ? { tornMarker: new TornTail(stored.revision) } : {},
    }
  }

  /** The session's revision without reading its events. */
  async readStoredRevision(id, signal) {
    signal?.throwIfAborted()
    await this.catchUp(id)
    const summary = await this.summary(id)
    signal?.throwIfAborted()
    return summary === undefined ? undefined : SessionPersistenceRevision(summary.revision)
  }

  /** Header and the events from `fromSeq` on: the store seeks to the seq. */
  async loadStoredFrom(id, fromSeq, signal) {
    signal?.throwIfAborted()
    await this.catchUp(id)
    const store = await this.store
    const stored = await store.readFrom(id, fromSeq)
    signal?.throwIfAborted()
    if (stored === undefined) return undefined
    if (stored.events.length === 0 && (await this.summary(id)) === undefined) return undefined
    return { meta: stored.header, events: stored.events }
  }

  /** Append a contiguous batch, creating the session with it when it is not yet stored. */
  async appendBatch(meta, events, isMaterialized) {
    const store = await this.store
    if (!isMaterialized && (await store.summary(meta.id)) === undefined) {
      await store.createAsWritten(meta, events, { encoding: this.encoding })
    } else if (events.length > 0) {
      await store.append(meta.id, events[0].seq, events, { asWritten: true })
    }
  }

  /** Cut the torn tail (when marked), then append DSH's closers (when any). */
  async commitRepair(meta, tornMarker, closers) {
    const store = await this.store
    if (tornMarker !== undefined) await store.cutTornTail(meta.id)
    if (closers.length > 0) await store.append(meta.id, closers[0].seq, closers, { asWritten: true })
  }

  /** Every stored session's header. */
  async list(signal) {
    return (await this.listSnapshots(signal)).map(snapshot => snapshot.header)
  }

  /** Every stored session's header and revision. */
  async listSnapshots(signal) {
    signal?.throwIfAborted()
    const all = await (await this.store).list()
    signal?.throwIfAborted()
    return all
      .filter(s => s.lines > 0)
      .map(s => ({ header: s.header, revision: SessionPersistenceRevision(s.revision) }))
  }

  /** The session's file text, exactly as stored (a torn tail included), or undefined. */
  async readRaw(id, signal) {
    signal?.throwIfAborted()
    await this.catchUp(id)
    if ((await this.summary(id)) === undefined) return undefined
    let bytes
    try {
      bytes = await (await this.store).exportBytes(id, { format: 'jsonl' })
    } catch (error) {
      if (isUnknown(error)) return undefined
      throw error
    }
    signal?.throwIfAborted()
    const content = bytes.toString('utf8')
    const meta = headerFields(content.slice(0, content.indexOf('\n')))
    return { meta, filename: 'session.jsonl', content }
  }

  /**
   * The store's metrics as Prometheus text exposition (`Store.metrics`), for the host's `/metrics`
   * handler to append to its own.
   * @returns {Promise<string>}
   */
  async metrics() {
    return (await this.store).metrics()
  }

  /** Release the store (the last mount of its directory closes it). */
  async close() {
    await release(this.path)
  }

  // --- helpers ---

  /**
   * Cluster mode: acquire session `id` for this host, by the takeover policy: `'force'` takes
   * it at once, fencing the host that held it; `'wait'` waits while another host's lease runs
   * (a crashed host's runs out within one lease; a live host renews its own, so the wait ends
   * after a lease and a grace period with `SESSIONLOG_OWNED`). Whether the fleet has the session
   * (not deleted).
   */
  async claim(id, signal) {
    const store = await this.store
    const force = this.cluster.takeover === 'force'
    // A monotonic clock: a wall clock stepped back would stretch the wait.
    const deadline = performance.now() + this.cluster.lease + TAKEOVER_GRACE_MS
    for (;;) {
      try {
        return !(await store.acquire(id, { force })).deleted
      } catch (error) {
        if (isUnknown(error)) return false
        if (error?.code !== 'SESSIONLOG_OWNED' || performance.now() >= deadline) throw error
      }
      signal?.throwIfAborted()
      await new Promise(done => setTimeout(done, TAKEOVER_POLL_MS))
    }
  }

  /** Cluster mode: catch the store up on session `id` (one this host holds within its read bound is its own copy); else nothing. */
  async catchUp(id) {
    if (this.cluster !== undefined) await (await this.store).sync([id])
  }

  /** The stored session's summary, or undefined when absent or without a body line. */
  async summary(id) {
    const summary = await (await this.store).summary(id)
    return summary !== undefined && summary.lines > 0 ? summary : undefined
  }
}

export default SessionlogPersistence
