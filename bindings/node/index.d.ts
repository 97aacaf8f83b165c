/** DSH session header fields (`SessionHeader`), as stored in the log's first line. */
export interface SessionHeaderFields {
  version: number
  id: string
  createdAt: number
  cwd?: string
  parentSession?: string
  seedLength?: number
  origin?: unknown
  delegationDepth?: number
  agentPreset?: string
}

/** A DSH event as appended: its seq is assigned by the store. */
export interface EventInput {
  type: string
  time?: number
  data: unknown
  surfaceOp?: unknown
  sourceEventSeqs?: unknown
  ignorable?: boolean
  seq?: number
}

/** A stored event, exactly as DSH's reader parses it. */
export interface StoredEvent extends EventInput {
  seq: number
  time: number
}

export interface StoredSession {
  header: SessionHeaderFields
  events: StoredEvent[]
  revision: string
  /** The stored log ends in a torn (never committed) fragment. */
  torn: boolean
  verdict: string
}

/** A stored session's summary: what the CLI's `ls --json` prints for it, its header parsed. */
export interface SessionSummary {
  id: string
  header: SessionHeaderFields
  /** The header's `createdAt`. */
  createdAt: number | null
  /** The time of its last human prompt. */
  activityAt: number | null
  /** The header's `cwd`. */
  cwd: string | null
  verdict: string
  events: number
  /** Body lines, whatever DSH's reader makes of them. */
  lines: number
  bytes: number
  /** The served generation's format version. */
  format: number
  /** Every format generation held, ascending (the served one last). */
  generations: number[]
  /** Where its bytes are when it is archived (`s3://…`). */
  archived: string | null
  revision: string
}

/** What an import stored (the CLI's `import --json` line of an imported file, less `file`, `status` and `error`). */
export interface ImportReport {
  id: string
  verdict: string
  events: number
  /** Body lines. */
  lines: number
  /** Bytes of the file. */
  bytes: number
}

/** What a repair (or cutting a torn tail) did (the CLI's `repair --json`). */
export interface RepairReport {
  cutBytes: number
  recovered: number
  closers: number
  endSeed: boolean
}

export declare class SessionlogError extends Error {
  readonly code: string
  constructor(code: string, message: string)
}

export declare function headerLine(header: SessionHeaderFields): string
export declare function headerFields(line: string): SessionHeaderFields

/** How a store is opened. */
export interface StoreOptions {
  /** `'sync'`: an append resolves after the fsync that covers it; `'buffered'`: before it. Default: `'sync'`. */
  durability?: 'sync' | 'buffered'
  /** Reuse WAL files in place under `'sync'` (one device write fewer per commit); false is the CLI's `--no-wal-recycling`. Default: true. */
  walRecycling?: boolean
  /** Keep the events' blocks in RocksDB blob files (less compaction work, more disk); the CLI's `--blob-files`. Default: false. */
  blobFiles?: boolean
  /** Flush and compact with direct I/O where the filesystem takes `O_DIRECT`; false is the CLI's `--no-direct-io`. Default: true. */
  directIo?: boolean
  /**
   * Built-in message projections to register: `['image/offload']` for a host that loads DSH's
   * image-offload plugin (a V4 log holding `image/offload` events is otherwise refused, as DSH's
   * own `SessionStore` refuses it); the CLI's `--message-projection`. Default: none.
   */
  messageProjections?: readonly 'image/offload'[]
  /** Open the store as a host of a fleet on PostgreSQL (README.md, "Cluster mode"). Default: a store of its own. */
  cluster?: ClusterOptions
  /** Keep the session index caught up in the background (a second after the writes, at most once a second), so a search finds them indexed instead of indexing them first (docs/SEARCH.md). Default: false. */
  followIndex?: boolean
}

/** How a store joins a fleet. */
export interface ClusterOptions {
  /** PostgreSQL's connection URL, as libpq takes it (`sslmode`, `sslrootcert`; password from the URL, `PGPASSWORD` or the password file). Required. */
  url: string
  /** This host's name in the fleet. Required. */
  host: string
  /** How long an acquisition keeps the session from other hosts without force, in ms; renewed while the store is open. Default: 30000. */
  lease?: number
  /** How long after PostgreSQL last confirmed this host's hold on a session (an acquisition or a lease renewal) `sync` serves that session from the local copy without asking PostgreSQL, in ms; at most the lease; 0 asks at every read. The longest a host deposed by a forced takeover serves reads that miss the new owner's appends. Default: 10000. */
  readBound?: number
}

/** The fleet's refusal codes (cluster mode), on {@link SessionlogError.code}. */
export type ClusterErrorCode =
  /** Another host took the session over (or this host never acquired it): nothing was written. */
  | 'SESSIONLOG_FENCED'
  /** PostgreSQL's log of the session does not continue where the batch starts (another writer), or the session exists, is deleted or is missing there: nothing was written. */
  | 'SESSIONLOG_STALE'
  /** PostgreSQL could not be reached, or did not commit, for a minute: the append is not acknowledged; appending it again is safe (had it committed after all, the retry is acknowledged once, never written twice). */
  | 'SESSIONLOG_UNAVAILABLE'
  /** PostgreSQL committed the batch but this host's store failed to write it: the store refuses writes until reopened, then `acquire` brings the batch in. */
  | 'SESSIONLOG_OUTCOME_UNKNOWN'
  /** A batch PostgreSQL cannot hold (an id holding NUL, a batch past the size limit): nothing was written; appending it again is refused again. */
  | 'SESSIONLOG_UNSTORABLE'
  /** Another host holds a live lease on the session: acquire with force, or later. */
  | 'SESSIONLOG_OWNED'
  /** A write the fleet does not carry (repair, archive, restore; an import of a file that is not whole). */
  | 'SESSIONLOG_NOT_IN_FLEET'
  /** A cluster operation on a store not opened in cluster mode. */
  | 'SESSIONLOG_NOT_CLUSTER'
  | 'SESSIONLOG_CLUSTER_CONFIG'
  | 'SESSIONLOG_CLUSTER_SCHEMA'
  /** The local store and PostgreSQL disagree in a way catching up cannot mend. */
  | 'SESSIONLOG_DIVERGED'

/** A session as acquired by this host: its row in PostgreSQL, and the batches caught up (the CLI's `cluster acquire --json`). */
export interface Acquired {
  id: string
  /** The root of its lineage. */
  root: string
  /** This host. */
  owner: string | null
  /** The owner epoch this host holds it at: every append names it. */
  epoch: number
  /** The seq the session's next batch starts at. */
  nextSeq: number
  /** The batch number its next batch takes. */
  nextBatch: number
  /** Its format version. */
  version: number
  /** Kept as `.jsonl.zstd`. */
  zstd: boolean
  /** DSH's reader verdict on it. */
  verdict: string
  /** The session is deleted in the fleet (its local copy is kept as it was). */
  deleted: boolean
  /** The session it was forked from. */
  parent: string | null
  /** The events it inherited from its parent. */
  seed: number | null
  /** Batches the local store caught up with. */
  caughtUp: number
}

export declare class Store {
  static open(dir: string, options?: StoreOptions): Promise<Store>
  /** Whether this open flushes and compacts with direct I/O (asked, and the filesystem takes it). */
  readonly directIo: boolean
  close(): Promise<void>
  createSession(header: SessionHeaderFields | string, options?: { encoding?: 'jsonl' | 'jsonl.zstd' }): Promise<string>
  /** Create a session with its first batch in one commit, kept as DSH's writer writes it. */
  createAsWritten(header: SessionHeaderFields | string, events: readonly EventInput[], options?: { encoding?: 'jsonl' | 'jsonl.zstd' }): Promise<{ firstSeq: number; count: number }>
  /** `asWritten`: a batch DSH's rules refuse is kept anyway (DSH's seam), for DSH's reader to judge at load. */
  append(id: string, expectedNextSeq: number | undefined, events: readonly EventInput[], options?: { asWritten?: boolean }): Promise<{ firstSeq: number; count: number }>
  load(id: string): Promise<StoredSession | undefined>
  readFrom(id: string, fromSeq: number): Promise<StoredSession | undefined>
  /**
   * Follow a session: every event from `from` (default 0) on, stored ones first, then each as it
   * commits; end it with `break` or `signal`. A `from` past the end waits.
   */
  tail(id: string, options?: { from?: number; signal?: AbortSignal }): AsyncGenerator<StoredEvent, void, undefined>
  revision(id: string): Promise<string | undefined>
  summary(id: string): Promise<SessionSummary | undefined>
  /** Every live session; in cluster mode every live session of the fleet, the store caught up on each first. */
  list(): Promise<SessionSummary[]>
  exportBytes(id: string, options?: { format?: 'stored' | 'jsonl' | 'jsonl.zstd'; generation?: number }): Promise<Buffer>
  repair(id: string): Promise<RepairReport>
  cutTornTail(id: string): Promise<RepairReport>
  fork(source: string, newId: string, options?: { at?: number }): Promise<{ id: string; seed: number; endSeed: boolean; closers: number }>
  messagesAt(id: string, seq?: number): Promise<unknown[]>
  stateAt(id: string, unit: string, seq?: number): Promise<unknown>
  /** How many events of each type the session held after seq `seq` (the CLI's `kinds`). */
  eventKinds(id: string, seq?: number): Promise<{ events: number; kinds: Record<string, number> }>
  importBytes(name: string, bytes: Uint8Array): Promise<ImportReport>
  remove(id: string): Promise<void>
  /** Find sessions (the CLI's `search --json`: its session lines, `next` and `watermark`). */
  search(query?: SearchQuery): Promise<SearchPage>
  /** The CLI's `reindex --json`. */
  reindex(): Promise<{ sessions: number; messages: number; watermark: SearchWatermark; bytes: number }>
  /** The CLI's `verify --json`. */
  verify(ids?: string[]): Promise<{ sessions: number; lines: number; events: number; problems: { session: string; detail: string }[] }>
  /**
   * The store's metrics as Prometheus text exposition (format 0.0.4, names under `sessionlog_`, no
   * `# EOF` line), for a host's `/metrics` handler to append to its own. Counters count from this
   * open of the store.
   */
  metrics(): Promise<string>
  /** The CLI's `export-all --to --json`, less `to` and `seconds`. */
  exportAll(options: { to: string; format?: 'stored' | 'jsonl' | 'jsonl.zstd'; endpoint?: string; region?: string }): Promise<{
    sessions: number
    created: number
    alreadyThere: number
    bytesUploaded: number
    bytes: number
    failed: { id: string; error: string }[]
  }>
  /** The CLI's `archive --json`, less `to`. */
  archive(options: { to: string; olderThanMs?: number; endpoint?: string; region?: string }): Promise<{
    archived: { id: string; bytes: number }[]
    kept: { id: string; reason: string }[]
    failed: { id: string; error: string }[]
  }>
  /** The CLI's `restore --json`: the import's report, and the archive's objects deleted. */
  restore(id: string, options?: { endpoint?: string; region?: string }): Promise<ImportReport & {
    deleted: number
    notDeleted: { id: string; error: string }[]
  }>
  commitStats(): { writes: number; appends: number }
  /** This host's name in the fleet (cluster mode), else `undefined`. */
  readonly host: string | undefined
  /** Cluster mode: take the session for this host and catch the store up (`force`: from a host whose lease runs). */
  acquire(id: string, options?: { force?: boolean }): Promise<Acquired>
  /** Cluster mode: give up the session; whether this host held it. */
  release(id: string): Promise<boolean>
  /** Cluster mode: catch the store up on `ids` (all of the fleet's when empty, the copies of sessions purged elsewhere removed first); a session this host holds is served from its own copy while its hold was confirmed within `readBound`, else PostgreSQL is asked first; the batches applied. */
  sync(ids?: string[]): Promise<number>
}

/** What `store.search` finds: every filter given must hold. */
export interface SearchQuery {
  text?: string
  tool?: string
  toolError?: boolean
  model?: string
  since?: number | string
  until?: number | string
  minTokens?: number
  open?: boolean
  verdict?: 'clean' | 'torn' | 'corrupt' | 'unsupported'
  parent?: string
  limit?: number
  after?: string
}

/** How fresh a search's answer is. */
export interface SearchWatermark { cursor: string; position: number; behind: number }

/** One session found. */
export interface SearchHit {
  id: string
  header: string
  cwd: string | null
  title: string | null
  verdict: string
  format: number
  createdAt: number | null
  activityAt: number | null
  lastEventAt: number | null
  events: number
  turns: number
  tokens: { input: number; output: number; cacheRead: number; cacheWrite: number; total: number }
  models: string[]
  providers: string[]
  tools: string[]
  toolErrors: string[]
  open: boolean
  parent: string | null
  depth: number
  score: number
  matches: { seq: number; snippet: string }[]
  matchCount: number
}

/** One page of a search. */
export interface SearchPage { sessions: SearchHit[]; next: string | null; watermark: SearchWatermark }
