// `npm pack` / `npm publish` run this first: every addon package.json's `files` lists must be
// present and be a shared library for its platform, so no tarball leaves without its addon (or
// with one built for another machine). The addon is built by `npm run build` (or `./x node`).
import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const { files } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))

/** ELF machine numbers of the Linux triples this package can ship. */
const ELF_MACHINE = { x64: 62, arm64: 183 }

/** Why `bytes` is not a Linux shared library for `triple`, or undefined when it is. */
function elfProblem(bytes, triple) {
  const [, arch] = triple.split('-')
  if (bytes.length < 20 || bytes.readUInt32BE(0) !== 0x7f454c46) return 'not an ELF file'
  if (bytes[4] !== 2 || bytes[5] !== 1) return 'not a 64-bit little-endian ELF file'
  if (bytes.readUInt16LE(16) !== 3) return 'not a shared library (ELF type ' + bytes.readUInt16LE(16) + ')'
  const machine = bytes.readUInt16LE(18)
  if (machine !== ELF_MACHINE[arch]) return `built for ELF machine ${machine}, not ${arch} (${ELF_MACHINE[arch]})`
  return undefined
}

let failed = false
for (const name of files.filter(f => f.endsWith('.node'))) {
  const triple = /^sessionlog\.(.+)\.node$/.exec(name)?.[1]
  let bytes
  try {
    bytes = readFileSync(join(root, name))
  } catch {
    console.error(`prepack: ${name} is missing: build it on ${triple} with \`npm run build\` (or ./x node) first`)
    failed = true
    continue
  }
  const problem = triple?.startsWith('linux-') ? elfProblem(bytes, triple) : undefined
  if (problem !== undefined) {
    console.error(`prepack: ${name} is ${problem}: rebuild it on ${triple} with \`npm run build\``)
    failed = true
  }
}
if (failed) process.exit(1)
