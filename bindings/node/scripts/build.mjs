// `npm run build`: compile the addon (release) and put it where index.js loads it from:
// `sessionlog.<triple>.node` beside index.js, the triple being this machine's (native.js), so on
// linux-x64-gnu it is the file `npm pack` ships and the Node suites test.
// On Linux the copy drops the debug sections (`objcopy --strip-debug`: RocksDB's C++ is compiled
// with -g, 450 MB of them; the symbol table stays, so backtraces and perf still name functions);
// the cargo target's library keeps them, for line-level profiles.
// The cargo target dir is the checkout's (CARGO_TARGET_DIR, else ~/.cache/sessionlog-target).
import { execFileSync } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { addonFile, currentTarget, platformTriple } from '../native.js'

const here = dirname(fileURLToPath(import.meta.url))
const target = process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'sessionlog-target')
execFileSync('cargo', ['build', '--release'], {
  cwd: join(here, '..'),
  stdio: 'inherit',
  env: { ...process.env, CARGO_TARGET_DIR: target },
})
const library = {
  darwin: 'libsessionlog_node.dylib',
  win32: 'sessionlog_node.dll',
}[process.platform] ?? 'libsessionlog_node.so'
const destination = join(here, '..', addonFile(platformTriple(currentTarget())))
const built = join(target, 'release', library)
if (process.platform === 'linux') {
  execFileSync('objcopy', ['--strip-debug', built, destination], { stdio: 'inherit' })
} else {
  copyFileSync(built, destination)
}
console.log(`built ${destination}`)
