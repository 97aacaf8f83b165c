// The web console's speed, measured in chromium with the Performance API: `sessionlog serve` over
// the store given, the session's page opened (first paint: the browser's first-contentful-paint;
// first view: when the messages at the last seq are on screen, from navigation start), then the
// scrubber moved to MOVES seqs spread over the session (each timed from the slider's input event
// to the view at that seq drawn, the page's own debounce included). Prints one JSON object.
// `sessionlog-harness console-perf` runs it.
//
// Usage: node perf.mjs --bin SESSIONLOG --db DIR --id SESSION [--moves 50] [--chromium PATH]
//   [--trace FILE]: a chromium performance trace of the moves (DevTools' format) written to FILE
import { spawn } from 'node:child_process'
import puppeteer from 'puppeteer-core'

const args = Object.fromEntries(process.argv.slice(2).reduce((pairs, arg, i, all) =>
  arg.startsWith('--') ? [...pairs, [arg.slice(2), all[i + 1]]] : pairs, []))
for (const needed of ['bin', 'db', 'id']) {
  if (!args[needed]) {
    console.error(`perf.mjs: --${needed} is required (usage: --bin SESSIONLOG --db DIR --id SESSION [--moves 50])`)
    process.exit(2)
  }
}
const moves = Number(args.moves || 50)

const server = spawn(args.bin, ['--db', args.db, 'serve', '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'inherit'] })
const origin = await new Promise((resolve, reject) => {
  let out = ''
  server.stdout.on('data', (chunk) => {
    out += chunk
    const m = /http:\/\/(127\.0\.0\.1:\d+)\//.exec(out)
    if (m) resolve(`http://${m[1]}`)
  })
  server.on('exit', (code) => reject(new Error(`sessionlog serve exited with ${code}`)))
})

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]
const browser = await puppeteer.launch({
  executablePath: args.chromium || process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
})
try {
  const page = await browser.newPage()
  await page.setViewport({ width: 1400, height: 900 })
  await page.goto(`${origin}/s/${encodeURIComponent(args.id)}`, { waitUntil: 'domcontentloaded' })
  await page.waitForFunction(() => document.body.dataset.renderedAt !== undefined, { timeout: 60000 })
  const first = await page.evaluate(() => ({
    paint: performance.getEntriesByName('first-contentful-paint')[0]?.startTime ?? null,
    view: performance.getEntriesByName('view', 'measure')[0]?.duration ?? null,
    viewDrawnAt: performance.getEntriesByName('view', 'measure')[0] ?
      performance.getEntriesByName('view', 'measure')[0].startTime + performance.getEntriesByName('view', 'measure')[0].duration : null,
    end: window.sessionlogConsole.state.end,
  }))
  if (args.trace) await page.tracing.start({ path: args.trace })
  const timings = []
  const fetches = []
  const sizes = []
  for (let i = 0; i < moves; i++) {
    // Seqs spread over the whole session, never the one shown.
    const seq = Math.floor(((i + 0.5) / moves) * (first.end - 1))
    const took = await page.evaluate(async (target) => {
      const range = document.getElementById('scrubber')
      const started = performance.now()
      range.value = String(target)
      range.dispatchEvent(new Event('input', { bubbles: true }))
      await new Promise((resolve) => {
        const look = () => document.body.dataset.renderedAt === String(target) ? resolve() : requestAnimationFrame(look)
        look()
      })
      // Drawn: the frame after the view's DOM is in place.
      await new Promise((resolve) => requestAnimationFrame(() => resolve()))
      const total = performance.now() - started
      // The view's request, from its start to its last byte (the server's share and the wire's).
      // (The first one: a window filled on scroll asks again, with `from`.)
      const fetched = performance.getEntriesByType('resource').filter((e) => {
        const url = new URL(e.name)
        return url.pathname.endsWith('/view') && url.searchParams.get('at') === String(target) && !url.searchParams.has('from')
      }).pop()
      return { total, fetch: fetched ? fetched.responseEnd - fetched.startTime : null, bytes: fetched ? fetched.encodedBodySize : null }
    }, seq)
    timings.push(took.total)
    fetches.push(took.fetch)
    sizes.push(took.bytes)
  }
  if (args.trace) await page.tracing.stop()
  const sorted = [...timings].sort((a, b) => a - b)
  const fetchSorted = fetches.filter((f) => f !== null).sort((a, b) => a - b)
  console.log(JSON.stringify({
    session: args.id,
    events: first.end,
    firstContentfulPaintMs: first.paint,
    firstViewMs: first.viewDrawnAt,
    moves,
    moveP50Ms: percentile(sorted, 0.5),
    moveP95Ms: percentile(sorted, 0.95),
    moveMaxMs: sorted[sorted.length - 1],
    viewFetchP50Ms: percentile(fetchSorted, 0.5),
    viewFetchP95Ms: percentile(fetchSorted, 0.95),
    viewBytesMax: Math.max(...sizes.filter((b) => b !== null)),
  }))
} finally {
  await browser.close()
  server.kill()
}
