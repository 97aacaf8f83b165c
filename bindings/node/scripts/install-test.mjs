// The package (sessionlog-node) as a user installs it. In a temp directory outside the checkout, with a PATH that
// has Node and npm but no cargo or rustc: pack this package (its prebuilt addon, built by
// `npm run build`), `npm init -y`, `npm install` the tarball with DSH's packages (the versions of
// this package's devDependencies) from the registry and TypeScript, then run a DSH host in ESM
// (tests/install/host.mjs: write, reload, export, check), type-check a TypeScript host
// (tests/install/host.mts) with `tsc --noEmit`, and import the package as another CPU would.
// Prints `install-test: ok: STEP` per step and closes with the count line ./x sums:
// `install-test: N passed, M failed`. Stops at the first failed step (the later ones need it),
// keeping the temp directory for a look.
import { spawnSync } from 'node:child_process'
import { accessSync, constants, copyFileSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, symlinkSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const packageDir = realpathSync(join(here, '..'))
const fixtures = join(packageDir, 'tests', 'install')
const checkout = realpathSync(join(packageDir, '..', '..'))
const manifest = JSON.parse(readFileSync(join(packageDir, 'package.json'), 'utf8'))

/** The files the tarball must hold, no more and no fewer. */
const PACKED = [
  'LICENSE', 'README.md', 'package.json', 'index.js', 'index.d.ts', 'header.js', 'native.js', 'dsh.js', 'dsh.d.ts',
  'sessionlog.linux-x64-gnu.node',
].sort()

/** What a user installs beside the tarball: DSH's packages at this package's versions, TypeScript. */
const DSH = Object.entries(manifest.devDependencies)
  .filter(([name]) => name.startsWith('@deepseek-ai/'))
  .map(([name, version]) => `${name}@${version}`)
const TYPESCRIPT = ['typescript@5', '@types/node@22']

let passed = 0
let failed = 0

class StepFailure extends Error {}

/** Run one step; a failure is reported and ends the run. */
function step(name, body) {
  const started = Date.now()
  try {
    const detail = body()
    passed += 1
    console.log(`install-test: ok: ${name}${detail ? `: ${detail}` : ''} (${((Date.now() - started) / 1000).toFixed(1)} s)`)
  } catch (error) {
    failed += 1
    console.error(`install-test: FAILED: ${name}: ${error.message}`)
    throw new StepFailure()
  }
}

/** Run a command in the user's environment; throw with its output when it fails. */
function run(env, cwd, command, args) {
  const result = spawnSync(command, args, { cwd, env, encoding: 'utf8', maxBuffer: 64 << 20 })
  if (result.error) throw new Error(`\`${command} ${args.join(' ')}\` could not run: ${result.error.message}`)
  if (result.status !== 0) {
    const output = `${result.stdout}\n${result.stderr}`.trim().split('\n').slice(-40).join('\n')
    throw new Error(`\`${command} ${args.join(' ')}\` in ${cwd} exited with ${result.status ?? result.signal}:\n${output}`)
  }
  return result
}

/** The first executable `name` on `path`, or undefined. */
function which(path, name) {
  for (const dir of path.split(delimiter).filter(Boolean)) {
    try {
      accessSync(join(dir, name), constants.X_OK)
      return join(dir, name)
    } catch {}
  }
  return undefined
}

const RUST_TOOLS = ['cargo', 'rustc', 'rustup']

/**
 * A user's environment: `bin` holds this Node and the machine's npm, first on PATH; then the
 * current PATH without any directory that holds cargo, rustc or rustup; no cargo or rustup
 * variables, no npm variables from a parent npm process.
 */
function userEnvironment(bin) {
  const npm = which(process.env.PATH ?? '', 'npm')
  if (npm === undefined) throw new Error('npm is not on PATH')
  mkdirSync(bin)
  symlinkSync(process.execPath, join(bin, 'node'))
  symlinkSync(npm, join(bin, 'npm'))
  const kept = (process.env.PATH ?? '').split(delimiter)
    .filter(dir => dir !== '' && RUST_TOOLS.every(tool => which(dir, tool) === undefined))
  const env = { ...process.env, PATH: [bin, ...kept].join(delimiter) }
  for (const key of Object.keys(env)) {
    if (/^(CARGO|RUSTUP|RUSTC|RUSTFLAGS)/.test(key) || /^npm_/i.test(key)) delete env[key]
  }
  return env
}

/** The JSON document npm printed (after any lifecycle script output). */
function npmJson(stdout) {
  const start = stdout.search(/^[[{]/m)
  if (start < 0) throw new Error(`npm printed no JSON:\n${stdout}`)
  return JSON.parse(stdout.slice(start))
}

const megabytes = bytes => `${(bytes / 1e6).toFixed(1)} MB`

const work = realpathSync(mkdtempSync(join(tmpdir(), 'sessionlog-install-test-')))
const project = join(work, 'project')
let env
let tarball
try {
  step('a user\'s environment outside the checkout, Node and npm on PATH, no cargo or rustc', () => {
    if (!relative(checkout, work).startsWith('..')) throw new Error(`${work} is inside the checkout ${checkout}`)
    env = userEnvironment(join(work, 'bin'))
    for (const tool of ['cargo', 'rustc']) {
      const probe = spawnSync('/bin/sh', ['-c', `command -v ${tool}`], { env, encoding: 'utf8' })
      if (probe.status === 0) throw new Error(`\`command -v ${tool}\` finds ${probe.stdout.trim()} on PATH=${env.PATH}`)
    }
    const node = run(env, work, 'node', ['--version']).stdout.trim()
    if (Number(node.slice(1).split('.')[0]) < 22) throw new Error(`node on PATH is ${node}; the package needs 22 or newer`)
    const npm = run(env, work, 'npm', ['--version']).stdout.trim()
    return `${work}; node ${node}, npm ${npm}; \`command -v cargo\` and \`command -v rustc\` fail`
  })

  step('npm pack: the tarball carries the prebuilt addon, the types, README and licence', () => {
    const [packed] = npmJson(run(env, packageDir, 'npm', ['pack', '--json', '--pack-destination', work]).stdout)
    tarball = join(work, packed.filename)
    const paths = packed.files.map(f => f.path).sort()
    const missing = PACKED.filter(p => !paths.includes(p))
    const extra = paths.filter(p => !PACKED.includes(p))
    if (missing.length > 0 || extra.length > 0) {
      throw new Error(`the tarball's files differ: missing [${missing.join(', ')}], unexpected [${extra.join(', ')}]`)
    }
    for (const f of packed.files) console.log(`  ${String(f.size).padStart(10)}  ${f.path}`)
    return `${packed.filename}, ${packed.entryCount} files, ${megabytes(packed.size)} packed, ${megabytes(packed.unpackedSize)} unpacked`
  })

  step(`npm init -y; npm install the tarball, ${DSH.join(' ')}, ${TYPESCRIPT.join(' ')}`, () => {
    mkdirSync(project)
    run(env, project, 'npm', ['init', '-y'])
    run(env, project, 'npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', tarball, ...DSH, ...TYPESCRIPT])
    const installed = JSON.parse(readFileSync(join(project, 'node_modules', manifest.name, 'package.json'), 'utf8'))
    return `${installed.name} ${installed.version} in ${join(project, 'node_modules', manifest.name)}`
  })

  for (const name of ['host.mjs', 'host.mts', 'tsconfig.json', 'wrong-arch.mjs']) copyFileSync(join(fixtures, name), join(project, name))

  step('a DSH host (ESM) writes a session through SessionlogPersistence, reloads and exports it', () => {
    return run(env, project, 'node', ['host.mjs']).stdout.trim()
  })

  step('tsc --noEmit: a TypeScript host against the package\'s types and DSH\'s', () => {
    const tsc = join(project, 'node_modules', 'typescript', 'bin', 'tsc')
    const version = run(env, project, 'node', [tsc, '--version']).stdout.trim()
    run(env, project, 'node', [tsc, '--noEmit', '-p', 'tsconfig.json'])
    return `${version}, strict, no errors`
  })

  step('a process on another platform gets the package\'s error naming it', () => {
    const result = spawnSync('node', ['wrong-arch.mjs'], { cwd: project, env, encoding: 'utf8' })
    const wanted = ['SESSIONLOG_UNSUPPORTED_PLATFORM', 'linux-arm64-gnu', 'process.arch "arm64"', 'carries addons for: linux-x64-gnu', './x node']
    const absent = wanted.filter(text => !result.stderr.includes(text))
    if (result.status === 0 || absent.length > 0) {
      throw new Error(`expected a failure naming ${JSON.stringify(absent)}; exit ${result.status}, stderr:\n${result.stderr}`)
    }
    return result.stderr.split('\n').find(line => line.includes('no prebuilt addon'))?.replace(/^.*?sessionlog:/, 'sessionlog:').slice(0, 160) + '...'
  })
  rmSync(work, { recursive: true, force: true })
} catch (error) {
  if (!(error instanceof StepFailure)) {
    failed += 1
    console.error(`install-test: FAILED: ${error.stack}`)
  }
  console.error(`install-test: the temp directory is kept: ${work}`)
}
console.log(`install-test: ${passed} passed, ${failed} failed`)
process.exit(failed === 0 ? 0 : 1)
