// The package as published: package.json, the declaration files against the modules' exports,
// the licence, and the prebuilt addon (stripped, and needing exactly the glibc and libstdc++
// versions native.js and the README state). The install itself is scripts/install-test.mjs.
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { LINUX_GNU_NEEDS } from '../native.js'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const text = (name: string) => readFileSync(join(root, name), 'utf8')
const manifest = JSON.parse(text('package.json'))
const addon = join(root, 'sessionlog.linux-x64-gnu.node')

/** The names a declaration file exports as values (classes, functions, constants, default). */
function declaredValues(dts: string): string[] {
  const names = [...dts.matchAll(/^export declare (?:class|function|const) (\w+)/gm)].map(m => m[1] as string)
  if (/^export default /m.test(dts)) names.push('default')
  return names.sort()
}

/** The highest `PREFIX<version>` the addon's symbol versions ask for. */
function highestNeeded(versions: string, prefix: string): string {
  const found = [...versions.matchAll(new RegExp(`Name: ${prefix}([0-9.]+)`, 'g'))].map(m => m[1] as string)
  const numeric = (v: string) => v.split('.').map(Number)
  return found.sort((a, b) => {
    const [x, y] = [numeric(a), numeric(b)]
    for (let i = 0; i < Math.max(x.length, y.length); i += 1) if ((x[i] ?? 0) !== (y[i] ?? 0)) return (x[i] ?? 0) - (y[i] ?? 0)
    return 0
  }).at(-1) ?? 'none'
}

describe('package.json', () => {
  it('is publishable, Apache-2.0, and lists files that exist', () => {
    expect(manifest.private).toBeUndefined()
    expect(manifest.license).toBe('Apache-2.0')
    expect(text('LICENSE')).toContain('Apache License\n                           Version 2.0, January 2004')
    expect(manifest.files).toEqual(expect.arrayContaining(['index.d.ts', 'dsh.d.ts', 'native.js', 'sessionlog.linux-x64-gnu.node']))
    for (const file of manifest.files) expect(existsSync(join(root, file)), file).toBe(true)
    for (const entry of Object.values(manifest.exports) as (string | { types: string, default: string })[]) {
      const paths = typeof entry === 'string' ? [entry] : [entry.types, entry.default]
      for (const path of paths) expect(manifest.files.concat('package.json')).toContain(path.replace(/^\.\//, ''))
    }
  })
})

describe('declaration files', () => {
  it.each([['index.js', 'index.d.ts'], ['dsh.js', 'dsh.d.ts']])('%s exports what %s declares', async (js, dts) => {
    const module = await import(join(root, js))
    expect(Object.keys(module).sort()).toEqual(declaredValues(text(dts)))
  })
})

describe('the linux-x64-gnu addon', () => {
  it('has no debug sections (npm run build strips them)', () => {
    const sections = execFileSync('readelf', ['-S', '--wide', addon], { encoding: 'utf8' })
    expect(sections).toContain('.symtab')
    expect(sections).not.toMatch(/\.debug_/)
  })

  it(`needs glibc ${LINUX_GNU_NEEDS.glibc} and GLIBCXX_${LINUX_GNU_NEEDS.glibcxx}, as native.js and the README say`, () => {
    const versions = execFileSync('readelf', ['-V', '--wide', addon], { encoding: 'utf8' })
    expect(highestNeeded(versions, 'GLIBC_')).toBe(LINUX_GNU_NEEDS.glibc)
    expect(highestNeeded(versions, 'GLIBCXX_')).toBe(LINUX_GNU_NEEDS.glibcxx)
    const readme = text('README.md')
    expect(readme).toContain(`glibc ${LINUX_GNU_NEEDS.glibc} or newer`)
    expect(readme).toContain(`GLIBCXX_${LINUX_GNU_NEEDS.glibcxx}`)
  })
})
