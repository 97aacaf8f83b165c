// sessionlog for Node: the store, opened on a directory, with promise-returning operations.
// Every call runs off the JS thread in the addon; appends of many sessions issued together are
// group-committed (one write and one fsync for all of them). Events cross as JSON text: one
// JSON.stringify here and one parse in Rust beat building values through N-API call by call.
// Results cross the same way: each is its report's one rendering in Rust (serde), the same text
// the CLI's `--json` prints, parsed here.
import { headerLine, headerFields } from './header.js'
import { loadAddon } from './native.js'

const { NativeStore } = loadAddon()

/** A failure of the store: the engine's message (session, seq, rule) and a stable `code`. */
export class SessionlogError extends Error {
  /**
   * @param {string} code stable `SESSIONLOG_…` code
   * @param {string} message the engine's message
   */
  constructor(code, message) {
    super(message)
    this.name = 'SessionlogError'
    this.code = code
  }
}

/** Throw the outcome's failure, if any. */
function settled(outcome) {
  if (outcome.code != null) throw new SessionlogError(outcome.code, outcome.message ?? outcome.code)
  return outcome
}

/** The outcome's JSON result, parsed (`undefined` for null). */
function parsed(outcome) {
  const text = settled(outcome).json
  const value = text == null ? null : JSON.parse(text)
  return value === null ? undefined : value
}

/** A stored session read through the addon, header parsed. */
function stored(value) {
  if (value === undefined) return undefined
  return { ...value, header: headerFields(value.header) }
}

export { headerLine, headerFields }

/** How long one native step of {@link Store.tail} waits for a commit (it ends sooner on one). */
const TAIL_WAIT_MS = 500

/** What {@link untilAborted} gives when the signal fired first. */
const ABORTED = Symbol('aborted')

/** `promise`'s value, or {@link ABORTED} as soon as `signal` aborts. */
function untilAborted(promise, signal) {
  if (signal === undefined) return promise
  if (signal.aborted) return Promise.resolve(ABORTED)
  return new Promise((resolve, reject) => {
    const abort = () => resolve(ABORTED)
    signal.addEventListener('abort', abort, { once: true })
    promise.then(
      (value) => { signal.removeEventListener('abort', abort); resolve(value) },
      (error) => { signal.removeEventListener('abort', abort); reject(error) },
    )
  })
}

/** An open sessionlog store. */
export class Store {
  #native

  /** @param {object} native the addon's handle (use {@link Store.open}) */
  constructor(native) {
    this.#native = native
  }

  /**
   * Open (creating if needed) the store in `dir`.
   * @param {string} dir store directory
   * @param {{durability?: 'sync' | 'buffered', walRecycling?: boolean, blobFiles?: boolean, directIo?: boolean,
   *   messageProjections?: string[], cluster?: {url: string, host: string, lease?: number, readBound?: number},
   *   followIndex?: boolean}} [options]
   *   `walRecycling` (default true, under 'sync'): reuse WAL files in place (one device write
   *   fewer per synced commit; the WAL is audited before every open, docs/RELIABILITY.md);
   *   false is the CLI's --no-wal-recycling
   *   `blobFiles`: keep the events' blocks in blob files (compaction no longer rewrites them,
   *   for hosts whose compaction falls behind; more disk, slower reads, no CPU saved per batch;
   *   the CLI's --blob-files, docs/PERFORMANCE.md)
   *   `directIo` (default true): flush and compact with direct I/O where the filesystem takes
   *   O_DIRECT (less CPU per batch; reads of just-written data start cold); false is the CLI's
   *   --no-direct-io
   *   `messageProjections` (default none, as DSH's own SessionStore starts): built-in message
   *   projections to register, `['image/offload']` for a host that loads DSH's image-offload
   *   plugin; the CLI's --message-projection
   *   `cluster`: open the store as host `host` of the fleet whose PostgreSQL `url` reaches
   *   (README.md, "Cluster mode"): every append is committed to PostgreSQL first, fenced by this
   *   host's ownership of the session; `lease` in ms (default 30000); `readBound` in ms (default
   *   10000, at most the lease): how long after PostgreSQL last confirmed this host's hold on a
   *   session `sync` serves it from the local copy without asking; `durability` is then moot
   *   `followIndex` (default false): keep the session index caught up in the background (a
   *   second after the writes, at most once a second), so a search finds them indexed instead
   *   of indexing them first (docs/SEARCH.md)
   */
  static async open(dir, { durability = 'sync', walRecycling = true, blobFiles = false, directIo = true, messageProjections = [], cluster, followIndex = false } = {}) {
    const native = new NativeStore()
    const fleet = cluster === undefined ? undefined : { url: cluster.url, host: cluster.host, lease: cluster.lease, readBound: cluster.readBound }
    settled(await native.open(dir, { durability, walRecycling, blobFiles, directIo, messageProjections, cluster: fleet, followIndex }))
    return new Store(native)
  }

  /** Commit queued appends and close; the directory can then be opened again. */
  async close() {
    settled(await this.#native.close())
  }

  /**
   * Create an empty session.
   * @param {object | string} header DSH session header fields, or the header line itself
   * @param {{encoding?: 'jsonl' | 'jsonl.zstd'}} [options] how its bytes are kept
   * @returns {Promise<string>} the session id
   */
  async createSession(header, { encoding = 'jsonl' } = {}) {
    const line = typeof header === 'string' ? header : headerLine(header)
    return parsed(await this.#native.createSession(line, encoding === 'jsonl.zstd'))
  }

  /**
   * Create a session with its first batch in one commit, keeping what DSH's writer writes even
   * where DSH's reader will refuse it at load (DSH's persistence seam; see `asWritten` below).
   * @param {object | string} header DSH session header fields, or the header line itself
   * @param {readonly object[]} events the first batch (seqs from 0)
   * @param {{encoding?: 'jsonl' | 'jsonl.zstd'}} [options] how its bytes are kept
   * @returns {Promise<{firstSeq: number, count: number}>}
   */
  async createAsWritten(header, events, { encoding = 'jsonl' } = {}) {
    const line = typeof header === 'string' ? header : headerLine(header)
    return parsed(await this.#native.createAsWritten(line, encoding === 'jsonl.zstd', JSON.stringify(events)))
  }

  /**
   * Append one batch; resolves once it is durable (under `sync`).
   * @param {string} id session id
   * @param {number | undefined} expectedNextSeq the seq the batch must start at (undefined: any)
   * @param {readonly object[]} events DSH events (`type`, `time`, `data`, surface metadata)
   * @param {{asWritten?: boolean}} [options] `asWritten`: a batch DSH's rules refuse is stored
   *   anyway, as DSH's own JSONL backend does, for DSH's reader to judge at load (the session's
   *   verdict then says what that reader makes of it); default: refused, nothing written
   * @returns {Promise<{firstSeq: number, count: number}>}
   */
  async append(id, expectedNextSeq, events, { asWritten = false } = {}) {
    return parsed(await this.#native.append(id, expectedNextSeq, JSON.stringify(events), asWritten))
  }

  /** Header, every event, revision and torn flag of a session; `undefined` when absent. */
  async load(id) {
    return stored(parsed(await this.#native.load(id, 0)))
  }

  /** Like {@link Store.load}, with only the events at or after `fromSeq` (a seek, not a scan). */
  async readFrom(id, fromSeq) {
    return stored(parsed(await this.#native.load(id, fromSeq)))
  }

  /**
   * Follow a session: every event from `from` on, in order, each once, those stored first, then
   * each as it commits. End it with `break` (the iterator's `return()`) or an AbortSignal; an
   * unknown session throws `SESSIONLOG_UNKNOWN_SESSION`. A `from` past the end waits.
   * @param {string} id session id
   * @param {{from?: number, signal?: AbortSignal}} [options] `from`: the first seq (default 0)
   * @returns {AsyncGenerator<object>}
   */
  async *tail(id, { from = 0, signal } = {}) {
    let next = from
    try {
      while (!signal?.aborted) {
        const step = await untilAborted(this.#native.tailNext(id, next, TAIL_WAIT_MS), signal)
        if (step === ABORTED) return
        const { next: after, events } = parsed(step)
        // Where the next step starts, and where this one left its subscription.
        next = after
        for (const event of events) {
          if (signal?.aborted) return
          yield event
        }
      }
    } finally {
      // The native side keeps the last step's subscription for the next one: give it up.
      this.#native.tailEnd(id, next)
    }
  }

  /** The session's revision token (changes with every commit to it); `undefined` when absent. */
  async revision(id) {
    return (await this.summary(id))?.revision
  }

  /**
   * A session's summary (as {@link Store.list} gives it: `{id, header, createdAt, activityAt,
   * cwd, verdict, events, lines, bytes, format, generations, archived, revision}`); `undefined`
   * when absent.
   */
  async summary(id) {
    return stored(parsed(await this.#native.summary(id)))
  }

  /**
   * Every live session's summary (the CLI's `ls --json` lines, header parsed): `{id, header,
   * createdAt, activityAt, cwd, verdict, events, lines, bytes, format, generations, archived,
   * revision}`; in cluster mode every live session of the fleet, the store caught up on each
   * first.
   */
  async list() {
    return parsed(await this.#native.list()).map(stored)
  }

  /**
   * The session's bytes, exactly as DSH's writer would have written its file.
   * @param {string} id session id
   * @param {{format?: 'stored' | 'jsonl' | 'jsonl.zstd', generation?: number}} [options] `stored`
   *   (the default): the encoding the session is stored in
   * @returns {Promise<Buffer>}
   */
  async exportBytes(id, { format, generation } = {}) {
    return settled(await this.#native.exportBytes(id, format, generation)).bytes
  }

  /** Repair as DSH's load does: cut a torn tail, close an interrupted turn. */
  async repair(id) {
    return parsed(await this.#native.repair(id))
  }

  /** Cut a torn tail only, leaving an open turn open. */
  async cutTornTail(id) {
    return parsed(await this.#native.cutTornTail(id))
  }

  /**
   * Fork `source` into `newId`, inheriting its events up to seq `at` (default: all).
   * @returns {Promise<{id: string, seed: number, endSeed: boolean, closers: number}>}
   */
  async fork(source, newId, { at } = {}) {
    return parsed(await this.#native.fork(source, newId, at))
  }

  /** The messages the model saw at seq `seq` (default: the end). */
  async messagesAt(id, seq) {
    return parsed(await this.#native.messagesAt(id, seq))
  }

  /** Projection unit `unit`'s state at seq `seq` (default: the end). */
  async stateAt(id, unit, seq) {
    return parsed(await this.#native.stateAt(id, unit, seq))
  }

  /** How many events of each type session `id` held after seq `seq` (default: the end). */
  async eventKinds(id, seq) {
    return parsed(await this.#native.eventKinds(id, seq))
  }

  /** Import one session log file's bytes (`.jsonl` or `.jsonl.zstd`), byte-exactly. */
  async importBytes(name, bytes) {
    return parsed(await this.#native.importBytes(name, Buffer.from(bytes)))
  }

  /** Remove a session for good. */
  async remove(id) {
    settled(await this.#native.remove(id))
  }

  /**
   * Find sessions by message text and filters, newest first, a page at a time: `query` takes
   * `text`, `tool`, `toolError`, `model`, `since`, `until` (epoch ms or a UTC date),
   * `minTokens`, `open`, `verdict`, `parent`, `limit`, `after` (a page's `next`). Resolves to
   * `{ sessions, next, watermark }`, each session as `sessionlog search --json` prints it.
   */
  async search(query = {}) {
    return parsed(await this.#native.search(JSON.stringify(query)))
  }

  /** Rebuild the session index from the log (`sessionlog reindex --json`). */
  async reindex() {
    return parsed(await this.#native.reindex())
  }

  /** Check stored bytes and indexes (all sessions when `ids` is empty). */
  async verify(ids = []) {
    return parsed(await this.#native.verify(ids))
  }

  /**
   * Export every session to object storage as a DSH session root: `to` is `s3://BUCKET/PREFIX`;
   * `format` `stored` (the default: each session in the encoding it is stored in, so importing
   * the root gives back the same bytes), `jsonl` or `jsonl.zstd`; `endpoint` and `region` over
   * the AWS environment's (credentials come from it alone). Objects are never overwritten; one
   * already there with the same bytes counts as done. Resolves to the summary.
   */
  async exportAll({ to, format, endpoint, region } = {}) {
    return parsed(await this.#native.exportAll(to, format, endpoint, region))
  }

  /**
   * Move the sessions with no activity for `olderThanMs` to object storage at `to`: each is
   * uploaded, read back and compared before the store gives its bytes up. Reads of an archived
   * session fetch it back (from the AWS environment's endpoint); `restore` brings it back for
   * writing. Resolves to `{archived, kept, failed}`.
   */
  async archive({ to, olderThanMs = 0, endpoint, region } = {}) {
    return parsed(await this.#native.archive(to, olderThanMs, endpoint, region))
  }

  /** Bring archived session `id` back into the store (its objects are then deleted). */
  async restore(id, { endpoint, region } = {}) {
    return parsed(await this.#native.restore(id, endpoint, region))
  }

  /**
   * Cluster mode: take session `id` for this host and catch the store up with PostgreSQL (a
   * session this host holds already is only caught up). Refused with `SESSIONLOG_OWNED` while
   * another host's lease on it runs, unless `force` (that host is then fenced).
   * @returns {Promise<{owner: string, epoch: number, nextSeq: number, deleted: boolean, caughtUp: number}>}
   */
  async acquire(id, { force = false } = {}) {
    return parsed(await this.#native.acquire(id, force))
  }

  /** Cluster mode: give up session `id`; whether this host held it. */
  async release(id) {
    return parsed(await this.#native.release(id))
  }

  /**
   * Cluster mode: catch the store up with PostgreSQL on `ids` (every session of the fleet when
   * empty, the copies of sessions purged elsewhere removed first); a session this host holds is
   * served from its own copy while its hold was confirmed within `readBound`, else PostgreSQL is
   * asked first; the batches applied.
   */
  async sync(ids = []) {
    return parsed(await this.#native.sync(ids))
  }

  /** This host's name in the fleet (cluster mode), else `undefined`. */
  get host() {
    return this.#native.clusterHost() ?? undefined
  }

  /** Whether this open flushes and compacts with direct I/O (asked, and the filesystem takes it). */
  get directIo() {
    return this.#native.directIo()
  }

  /**
   * The store's metrics as Prometheus text exposition (format 0.0.4: `# HELP` and `# TYPE` lines,
   * names under `sessionlog_`, no `# EOF`), for a host's `/metrics` handler to append to its own.
   * Counters count from this open of the store. Every metric: docs/METRICS.md.
   * @returns {Promise<string>}
   */
  async metrics() {
    return settled(await this.#native.metrics()).text
  }

  /** How appends were grouped: `writes` (one fsync each under sync) and `appends`. */
  commitStats() {
    return this.#native.commitStats()
  }
}
