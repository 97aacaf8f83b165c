/**
 * sessionlog as a DeepSeek Harness persistence backend (`sessionlog-node/dsh`):
 * `ctx.plugin(SessionlogPersistence, { path })` registers `ctx.sessionPersistence`, driven by
 * DSH's own `PersistenceCoordinator`.
 * @module sessionlog-node/dsh
 */
import type { Context } from '@deepseek-ai/cordis'
import {
  SessionPersistence,
  type PersistenceBackend,
  type SessionInspection,
  type SessionLocation,
  type SessionPersistenceRevision,
  type SessionPersistenceSnapshot,
  type SessionRawArtifact,
  type StoredPrefix,
  type StoredSuffix,
} from '@deepseek-ai/dsh-session-persistence'
import type { SessionEvent, SessionHeader, SessionId, SessionPreparation } from '@deepseek-ai/dsh-session'
import type { ClusterOptions, Store, StoreOptions } from './index.js'

/** Plugin config: the store directory and how it keeps sessions. */
export interface Config extends StoreOptions {
  /** The store directory (created if needed). Mounts of one directory in a process share one store. Required. */
  path: string
  /** How new sessions' bytes are kept: DSH's `.jsonl` or `.jsonl.zstd`. Default: `'jsonl'`. */
  encoding?: 'jsonl' | 'jsonl.zstd'
  /** Cold session preparations kept for resume (DSH's coordinator option). Default: 5. */
  preparedSessionCacheSize?: number
  /** DSH's write-behind window for live events, in ms (DSH's coordinator option). Default: 200. */
  writeBatchMaxDelayMs?: number
  /** Run as a host of a fleet on PostgreSQL (README.md, "Cluster mode"). Default: a store of its own. */
  cluster?: ClusterConfig
}

/** How the backend joins a fleet. */
export interface ClusterConfig extends ClusterOptions {
  /**
   * Loading (or resuming, or appending to) a session another host holds under a live lease:
   * `'wait'` until that lease runs out (a crashed host's does within one lease; after a lease
   * and 5 s more the load rejects with `SESSIONLOG_OWNED`), or `'force'` it over at once (the
   * other host is fenced: its next append rejects with `SESSIONLOG_FENCED`). Default: `'wait'`.
   */
  takeover?: 'wait' | 'force'
}

/** The coordinator's torn-tail token: the revision that had the torn tail. */
declare class TornTail {
  readonly revision: string
}

/** DSH persistence backed by a sessionlog store. */
export declare class SessionlogPersistence extends SessionPersistence implements PersistenceBackend<TornTail> {
  static inject: string[]
  readonly supportsRawArtifacts: true
  /** Backend label for the coordinator's diagnostics. */
  readonly name: 'session-persistence-sessionlog'
  readonly config: Config
  /** The store directory, absolute. */
  readonly path: string
  readonly encoding: 'jsonl' | 'jsonl.zstd'
  /** Cluster mode's settings with their defaults, or undefined. */
  readonly cluster: Required<ClusterConfig> | undefined
  constructor(ctx: Context, config: Config)

  /** `{ kind: 'sessionlog', path: '<store directory>#<session id>' }`. */
  locate(meta: SessionHeader): SessionLocation
  create(meta: SessionHeader): Promise<void>
  append(id: SessionId, events: readonly SessionEvent[]): Promise<void>
  prepare(id: SessionId, signal?: AbortSignal): Promise<SessionPreparation>
  load(id: SessionId): Promise<SessionInspection>
  inspect(id: SessionId, signal?: AbortSignal): Promise<SessionInspection>
  readFrom(id: SessionId, fromSeq: number, signal?: AbortSignal): Promise<{ meta: SessionHeader; events: SessionEvent[] }>
  list(signal?: AbortSignal): Promise<SessionHeader[]>
  listSnapshots(signal?: AbortSignal): Promise<SessionPersistenceSnapshot[]>
  /** Follow a session as this host appends to it: stored events first, then each as it commits; end it with `break` or `signal`. */
  tail(id: SessionId, options?: { from?: number; signal?: AbortSignal }): AsyncGenerator<SessionEvent, void, undefined>
  /** The session's file text, byte for byte what DSH's JSONL backend writes (a torn tail included). */
  readRaw(id: SessionId, signal?: AbortSignal): Promise<SessionRawArtifact | undefined>

  // PersistenceBackend hooks, called by DSH's coordinator.
  loadStored(id: SessionId, signal?: AbortSignal): Promise<StoredPrefix<TornTail> | undefined>
  readStoredRevision(id: SessionId, signal?: AbortSignal): Promise<SessionPersistenceRevision | undefined>
  loadStoredFrom(id: SessionId, fromSeq: number, signal?: AbortSignal): Promise<StoredSuffix | undefined>
  appendBatch(meta: SessionHeader, events: readonly SessionEvent[], isMaterialized: boolean): Promise<void>
  commitRepair(meta: SessionHeader, tornMarker: TornTail | undefined, closers: readonly SessionEvent[]): Promise<void>
  /** The store's metrics as Prometheus text exposition (`Store.metrics`), for the host's `/metrics` handler to append. */
  metrics(): Promise<string>
  /** Release the store (the last mount of its directory closes it). */
  close(): Promise<void>
}

/**
 * Run `use` with the store in `path`, shared with any mount of it in this process (RocksDB
 * allows one open handle per directory).
 */
export declare function withStore<T>(path: string, use: (store: Store) => Promise<T>, options?: StoreOptions): Promise<T>

export default SessionlogPersistence
