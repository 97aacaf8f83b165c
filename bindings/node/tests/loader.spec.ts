// The addon loader (native.js): which file each platform loads, and the errors a process gets
// when no addon here fits it (naming process.platform, process.arch and the C library), when its
// CPU lacks x86-64-v2, or when the addon file does not load.
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  addonFile, carriedTriples, currentTarget, linuxLibc, loadAddon, missingCpuFeatures, noAddonError, platformTriple,
} from '../native.js'

describe('platform triples (napi-rs names)', () => {
  it.each([
    [{ platform: 'linux', arch: 'x64', libc: 'gnu' }, 'linux-x64-gnu'],
    [{ platform: 'linux', arch: 'x64', libc: 'musl' }, 'linux-x64-musl'],
    [{ platform: 'linux', arch: 'arm64', libc: 'gnu' }, 'linux-arm64-gnu'],
    [{ platform: 'darwin', arch: 'arm64' }, 'darwin-arm64'],
    [{ platform: 'win32', arch: 'x64' }, 'win32-x64-msvc'],
    [{ platform: 'freebsd', arch: 'x64' }, 'freebsd-x64'],
  ] as const)('%o is %s', (target, triple) => {
    expect(platformTriple(target)).toBe(triple)
    expect(addonFile(triple)).toBe(`sessionlog.${triple}.node`)
  })

  it('this machine is linux-x64-gnu, the triple the package ships', () => {
    expect(process.platform).toBe('linux')
    expect(linuxLibc()).toBe('gnu')
    expect(platformTriple(currentTarget())).toBe(`linux-${process.arch}-gnu`)
  })
})

describe('no addon for the platform', () => {
  it.each([
    [{ platform: 'linux', arch: 'arm64', libc: 'gnu' }, 'linux-arm64-gnu', ['process.platform "linux"', 'process.arch "arm64"', 'C library glibc']],
    [{ platform: 'linux', arch: 'x64', libc: 'musl' }, 'linux-x64-musl', ['process.platform "linux"', 'process.arch "x64"', 'C library musl']],
    [{ platform: 'darwin', arch: 'arm64' }, 'darwin-arm64', ['process.platform "darwin"', 'process.arch "arm64"']],
    [{ platform: 'win32', arch: 'x64' }, 'win32-x64-msvc', ['process.platform "win32"', 'process.arch "x64"']],
  ] as const)('%o: the error names %s and says how to build from source', (target, triple, words) => {
    const error = noAddonError(target, ['linux-x64-gnu']) as Error & { code: string }
    expect(error.code).toBe('SESSIONLOG_UNSUPPORTED_PLATFORM')
    expect(error.message).toContain(`no prebuilt addon for this platform, ${triple}`)
    for (const word of words) expect(error.message).toContain(word)
    expect(error.message).toContain('carries addons for: linux-x64-gnu')
    expect(error.message).toContain('x86-64-v2')
    expect(error.message).toContain('./x node')
  })

  it('a directory without the addon refuses this process by name, listing what it carries', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sessionlog-loader-'))
    try {
      await writeFile(join(dir, 'sessionlog.darwin-arm64.node'), '')
      await writeFile(join(dir, 'sessionlog.win32-x64-msvc.node'), '')
      await writeFile(join(dir, 'other.node'), '')
      expect(carriedTriples(dir)).toEqual(['darwin-arm64', 'win32-x64-msvc'])
      expect(() => loadAddon(dir)).toThrow(expect.objectContaining({
        code: 'SESSIONLOG_UNSUPPORTED_PLATFORM',
        message: expect.stringContaining(`${platformTriple(currentTarget())} (process.platform "${process.platform}"`),
      }))
      expect(() => loadAddon(dir)).toThrow('carries addons for: darwin-arm64, win32-x64-msvc')
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })

  it('an addon file that does not load is reported with the platform and the loader\'s reason', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sessionlog-loader-'))
    try {
      await writeFile(join(dir, addonFile(platformTriple(currentTarget()))), 'not a shared library')
      expect(() => loadAddon(dir)).toThrow(expect.objectContaining({
        code: 'SESSIONLOG_ADDON_LOAD_FAILED',
        message: expect.stringMatching(/failed to load \(process\.platform "linux".*\): .*glibc 2\.34 or newer and the libstdc\+\+ of GCC 12/),
      }))
    } finally {
      await rm(dir, { recursive: true, force: true })
    }
  })
})

describe('x86-64-v2 CPU features', () => {
  const cpuinfo = (flags: string) => `processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: ${flags}\nbugs\t\t: none\n`

  it('a CPU with SSE4.2, PCLMUL and POPCNT lacks nothing', () => {
    expect(missingCpuFeatures(cpuinfo('fpu sse2 ssse3 pclmulqdq sse4_1 sse4_2 popcnt avx2'))).toEqual([])
  })

  it('an older CPU lacks what the addon is compiled with', () => {
    expect(missingCpuFeatures(cpuinfo('fpu sse2 ssse3 sse4_1'))).toEqual(['sse4_2', 'pclmulqdq', 'popcnt'])
    expect(missingCpuFeatures(cpuinfo('fpu sse2 sse4_2 popcnt'))).toEqual(['pclmulqdq'])
  })

  it('a cpuinfo without flags (another architecture) is not judged', () => {
    expect(missingCpuFeatures('processor\t: 0\nFeatures\t: fp asimd\n')).toEqual([])
  })
})
