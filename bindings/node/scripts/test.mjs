// Run the Node suites (vitest) and close with one count line that ./x sums:
// `node-test: N passed, N failed, N skipped`. Exits non-zero when any test failed or was skipped,
// or when vitest ran nothing.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

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
process.exit(run.status === 0 && failed === 0 && skipped === 0 && passed > 0 ? 0 : 1)
