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
 *   messageProjections?: string[]}} [options]
 * @returns {Promise<T>}
 */
export async function withStore(path, use, { durability = 'sync', walRecycling = true, blobFiles = false, directIo = true, messageProjections = [] } = {}) {
  const absolute = resolve(path)
  const store = await acquire(absolute, { durability, walRecycling, blobFiles, directIo, messageProjections })
  try {
    return await use(store)
  } finally {
    await release(absolute)
  }
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
   *   messageProjections?: string[],
   *   encoding?: 'jsonl' | 'jsonl.zstd', preparedSessionCacheSize?: number,
   *   writeBatchMaxDelayMs?: number}} config
   */
  constructor(ctx, config) {
    super(ctx)
    if (typeof config?.path !== 'string' || config.path === '') {
      throw new Error('SessionlogPersistence needs a store directory: { path }')
    }
    this.config = config
    this.path = resolve(config.path)
    this.encoding = config.encoding ?? 'jsonl'
    this.store = acquire(this.path, {
      durability: config.durability ?? 'sync',
      walRecycling: config.walRecycling ?? true,
      blobFiles: config.blobFiles ?? false,
      directIo: config.directIo ?? true,
      messageProjections: config.messageProjections ?? [],
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

  // --- PersistenceBackend hooks ---

  /** The stored session (header, committed events, revision, torn marker), or undefined. */
  async loadStored(id, signal) {
    signal?.throwIfAborted()
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
    const summary = await this.summary(id)
    signal?.throwIfAborted()
    return summary === undefined ? undefined : SessionPersistenceRevision(summary.revision)
  }

  /** Header and the events from `fromSeq` on: the store seeks to the seq. */
  async loadStoredFrom(id, fromSeq, signal) {
    signal?.throwIfAborted()
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

  /** The stored session's summary, or undefined when absent or without a body line. */
  async summary(id) {
    const summary = await (await this.store).summary(id)
    return summary !== undefined && summary.lines > 0 ? summary : undefined
  }
}

export default SessionlogPersistence
