// `npm run build`: compile the addon (release) and put it beside index.js as sessionlog.node.
// The cargo target dir is the checkout's (CARGO_TARGET_DIR, else ~/.cache/sessionlog-target).
import { execFileSync } from 'node:child_process'
import { copyFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const here = dirname(fileURLToPath(import.meta.url))
const target = process.env.CARGO_TARGET_DIR ?? join(homedir(), '.cache', 'sessionlog-target')
execFileSync('cargo', ['build', '--release'], {
  cwd: join(here, '..'),
  stdio: 'inherit',
  env: { ...process.env, CARGO_TARGET_DIR: target },
})
const library = process.platform === 'darwin' ? 'libsessionlog_node.dylib' : 'libsessionlog_node.so'
copyFileSync(join(target, 'release', library), join(here, '..', 'sessionlog.node'))
console.log(`built ${join(here, '..', 'sessionlog.node')}`)
