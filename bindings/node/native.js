// Loads the addon that fits this process: `sessionlog.<triple>.node` beside this file, the triple
// being napi-rs's name for the platform (`linux-x64-gnu`, `linux-arm64-musl`, `darwin-arm64`,
// `win32-x64-msvc`). The published package carries linux-x64-gnu only; `npm run build` writes the
// triple of the machine it runs on, so a checkout built from source loads its own addon.
//
// Invariant: a process that cannot run the addon gets an error naming its platform (process.platform,
// process.arch, the C library) and what to do, never a bare dlopen message or an illegal
// instruction later on.
import { existsSync, readFileSync, readdirSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))

/** The CPU features the x86-64 addon is compiled with (.cargo/config.toml: x86-64-v2's CRC32C). */
export const X64_CPU_FEATURES = ['sse4_2', 'pclmulqdq', 'popcnt']

/**
 * What the linux-x64-gnu addon links against, at least (tests/package.spec.ts reads them off the
 * addon): glibc, and the libstdc++ of GCC 12 (RocksDB is C++).
 */
export const LINUX_GNU_NEEDS = { glibc: '2.34', glibcxx: '3.4.30' }

/** How to get an addon when none here fits. */
const BUILD_FROM_SOURCE =
  'build the addon from source: in a checkout of the sessionlog repository, run `./x node` ' +
  '(needs a Rust toolchain 1.89+ and libclang; the first build compiles RocksDB, about 15 minutes), ' +
  'then install that checkout\'s package (`cd bindings/node && npm pack`, and `npm install` the tarball it writes)'

/** The C library of this Linux process: 'gnu' (glibc) or 'musl'. */
export function linuxLibc() {
  // Node's diagnostic report names the glibc it runs on; musl builds of Node have none. The
  // report skips the process's sockets, whose addresses it would otherwise resolve (DNS).
  const report = process.report
  if (typeof report?.getReport === 'function') {
    const excludeNetwork = report.excludeNetwork
    report.excludeNetwork = true
    try {
      return report.getReport().header?.glibcVersionRuntime ? 'gnu' : 'musl'
    } finally {
      report.excludeNetwork = excludeNetwork
    }
  }
  try {
    return readFileSync('/usr/bin/ldd', 'utf8').includes('musl') ? 'musl' : 'gnu'
  } catch {
    return 'gnu'
  }
}

/**
 * napi-rs's name for a platform: `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`, ...
 * @param {{platform: string, arch: string, libc?: 'gnu' | 'musl'}} target
 */
export function platformTriple({ platform, arch, libc }) {
  if (platform === 'linux') return `linux-${arch}-${libc}`
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

/** The running process's platform: what {@link platformTriple} takes, from `process`. */
export function currentTarget() {
  const { platform, arch } = process
  return { platform, arch, ...platform === 'linux' ? { libc: linuxLibc() } : {} }
}

/** The platform in words, as `process` names it. */
export function describeTarget({ platform, arch, libc }) {
  const library = libc === undefined ? '' : `, C library ${libc === 'gnu' ? 'glibc' : 'musl'}`
  return `process.platform "${platform}", process.arch "${arch}"${library}`
}

/** The file name of the addon for `triple`. */
export function addonFile(triple) {
  return `sessionlog.${triple}.node`
}

/** The triples of the addons present in `dir`. */
export function carriedTriples(dir = here) {
  return readdirSync(dir)
    .map(name => /^sessionlog\.(.+)\.node$/.exec(name)?.[1])
    .filter(triple => triple !== undefined)
    .sort()
}

/** The error for a process no addon here fits. */
export function noAddonError(target, carried) {
  const triple = platformTriple(target)
  const offered = carried.length === 0 ? 'none' : carried.join(', ')
  const error = new Error(
    `sessionlog: no prebuilt addon for this platform, ${triple} (${describeTarget(target)}). ` +
      `This package carries addons for: ${offered} (linux-x64-gnu needs an x86-64-v2 CPU). ` +
      `To run here, ${BUILD_FROM_SOURCE}.`,
  )
  error.code = 'SESSIONLOG_UNSUPPORTED_PLATFORM'
  return error
}

/** The x86-64 CPU features `cpuinfo` (the text of /proc/cpuinfo) lacks, of {@link X64_CPU_FEATURES}. */
export function missingCpuFeatures(cpuinfo) {
  const line = cpuinfo.split('\n').find(l => /^flags\s*:/.test(l))
  if (line === undefined) return []
  const flags = new Set(line.slice(line.indexOf(':') + 1).trim().split(/\s+/))
  return X64_CPU_FEATURES.filter(feature => !flags.has(feature))
}

/** Refuse, with a message, a CPU the x86-64 addon would stop on with an illegal instruction. */
function checkCpu(target) {
  if (target.arch !== 'x64' || target.platform !== 'linux') return
  if (process.env.SESSIONLOG_SKIP_CPU_CHECK === '1') return
  let cpuinfo
  try {
    cpuinfo = readFileSync('/proc/cpuinfo', 'utf8')
  } catch {
    return
  }
  const missing = missingCpuFeatures(cpuinfo)
  if (missing.length === 0) return
  const error = new Error(
    `sessionlog: this CPU lacks ${missing.join(', ')}: the ${platformTriple(target)} addon is built for ` +
      'x86-64-v2 CPUs (SSE4.2, PCLMUL, POPCNT; every x86-64 server CPU since about 2011) and would stop ' +
      `with an illegal instruction here (${describeTarget(target)}). To run on this CPU, ${BUILD_FROM_SOURCE}, ` +
      'with the x86-64 rustflags line removed from .cargo/config.toml, and set SESSIONLOG_SKIP_CPU_CHECK=1.',
  )
  error.code = 'SESSIONLOG_UNSUPPORTED_CPU'
  throw error
}

/** Load the addon for this process, or throw an error that says why none can be. */
export function loadAddon(dir = here) {
  const target = currentTarget()
  const triple = platformTriple(target)
  const path = join(dir, addonFile(triple))
  if (!existsSync(path)) throw noAddonError(target, carriedTriples(dir))
  checkCpu(target)
  try {
    return createRequire(import.meta.url)(path)
  } catch (cause) {
    const error = new Error(
      `sessionlog: the ${triple} addon (${path}) failed to load (${describeTarget(target)}): ${cause.message}. ` +
        `The prebuilt linux-x64-gnu addon needs glibc ${LINUX_GNU_NEEDS.glibc} or newer and the libstdc++ of ` +
        `GCC 12 or newer (GLIBCXX_${LINUX_GNU_NEEDS.glibcxx}); otherwise ${BUILD_FROM_SOURCE}.`,
      { cause },
    )
    error.code = 'SESSIONLOG_ADDON_LOAD_FAILED'
    throw error
  }
}
