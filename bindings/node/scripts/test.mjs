// Run the Node suites (vitest) and close with one count line that ./x sums:
// `node-test: N passed, N failed, N skipped`; then the package as a user installs it
// (scripts/install-test.mjs, its own `install-test: N passed, M failed` line). Exits non-zero
// when any test failed or was skipped, when vitest ran nothing, or when the install test failed.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const scratch = mkdtempSync(join(tmpdir(), 'sessionlog-vitest-'))
const report = join(scratch, 'report.json')
const run = spawnSync(
  process.execPath,
  ['node_modules/vitest/vitest.mjs', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`],
  { stdio: 'inherit' },
)
let passed = 0
let failed = 0
let skipped = 0
try {
  const results = JSON.parse(readFileSync(report, 'utf8'))
  passed = results.numPassedTests
  failed = results.numFailedTests
  skipped = results.numPendingTests + results.numTodoTests
} catch (error) {
  console.error(`node-test: no vitest report (${error.message})`)
  failed = Math.max(failed, 1)
}
rmSync(scratch, { recursive: true, force: true })
console.log(`node-test: ${passed} passed, ${failed} failed, ${skipped} skipped`)
const install = spawnSync(process.execPath, [join(dirname(fileURLToPath(import.meta.url)), 'install-test.mjs')], { stdio: 'inherit' })
const suites = run.status === 0 && failed === 0 && skipped === 0 && passed > 0
process.exit(suites && install.status === 0 ? 0 : 1)
