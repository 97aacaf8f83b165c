// The web console in a real browser: Debian's chromium, driven by puppeteer-core, against
// `sessionlog serve` over a store whose every field holds hostile text (script and img tags,
// javascript: links, right-to-left and zero-width characters). It loads the listing and searches
// it (the session index, snippets as text), opens a session, moves the scrubber to every seq and
// compares the rendered messages with `sessionlog messages ID --at N`, scrolls a long view until
// its every message is drawn, moves through step marks and the step buttons, appends while
// following and sees the event appear within 1 s, and checks the probes stayed inert: no
// dialog, no probe script ran, no element or link came from data. It saves screenshots of the main views to docs/console/ (docs/CONSOLE.md shows them).
// Then the console of a fleet's host (`serve --cluster`, on a throwaway PostgreSQL 15 that
// `sessionlog-harness pg` starts): it lists, shows and follows the sessions two other hosts write,
// and shows the fork tree one of them made. Where PostgreSQL 15 is not installed that check is
// skipped and said, unless CI is set, where it fails.
//
// Environment: SESSIONLOG_BIN (the `sessionlog` binary; default: the release build in
// $CARGO_TARGET_DIR), CHROMIUM (default /usr/bin/chromium). Prints `console-test: N passed,
// N failed` last and exits non-zero on any failure.
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import puppeteer from 'puppeteer-core'

const here = dirname(fileURLToPath(import.meta.url))
const repo = join(here, '..', '..', '..')
const bin = process.env.SESSIONLOG_BIN ||
  join(process.env.CARGO_TARGET_DIR || join(process.env.HOME, '.cache', 'sessionlog-target'), 'release', 'sessionlog')
const chromium = process.env.CHROMIUM || '/usr/bin/chromium'
const shots = join(repo, 'docs', 'console')
const work = mkdtempSync(join(tmpdir(), 'sessionlog-console-'))
const db = join(work, 'db')
mkdirSync(shots, { recursive: true })

// Hostile text: markup, a script URL, RTL override and zero-width characters. Each carries a probe
// that, if it ever ran, would set window.__pwned or open a dialog.
const PROBE = 'window.__pwned=(window.__pwned||0)+1'
const hostile = (where) =>
  `${where} <script>${PROBE}</script><img src=x onerror="${PROBE}"><a href="javascript:${PROBE}">link</a>` +
  ` [md](javascript:alert(1)) \u202Egnp.exe\u202C zero\u200Bwidth\u200D <iframe src="javascript:alert(1)"></iframe>`
// What the page shows for a name (an id, a title, a project): its invisible and direction-changing
// characters spelled out, so a name cannot pass for another (the page's own rule, restated).
const visible = (name) => name.replace(/[\u061C\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g,
  (c) => `\u27E6U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}\u27E7`)
const HOSTILE_ID = `xss-<img src=x onerror=alert(1)>-\u202Eevil\u200B`
const PLAIN_ID = 'plain-session'
const LONG_ID = 'long-session'
const LONG_TURNS = 60

function sessionlog(args, input) {
  return sessionlogAt(db, args, input)
}

function sessionlogAt(store, args, input) {
  const run = spawnSync(bin, ['--db', store, ...args], { input, encoding: 'utf8' })
  if (run.status !== 0) throw new Error(`sessionlog ${args.join(' ')}: ${run.stderr}`)
  return run.stdout
}

function line(type, data, extra = {}) {
  return JSON.stringify({ type, data, ...extra })
}

// A V4 session: two turns, with a title, todos, a request header, a tool call and its result,
// and a compaction that replaces the first turn's messages, every text field hostile.
function turnLines(turn, seqBase) {
  return [
    line('turn/start', { turn }),
    line('step/start', { turn, step: 1 }),
    line('request/header', { turn, step: 1, reason: 'initial', header: { config: { model: hostile('model') } } }),
    line('system/message', { turn, step: 1, message: { id: `s${turn}`, role: 'system', content: [{ type: 'text', text: hostile('system') }], source: { kind: 'system-prompt' } } }, { surfaceOp: 'append' }),
    line('user/message', { id: `u${turn}`, role: 'user', content: [{ type: 'text', text: hostile('user') }], source: { kind: 'user' } }, { surfaceOp: 'append' }),
    line('session/title', { title: hostile('title') }),
    line('todo/write', { todos: [{ content: hostile('todo'), status: 'pending', activeForm: hostile('form') }] }),
    line('assistant/message', { turn, step: 1, message: { id: `a${turn}`, role: 'assistant', content: [{ type: 'text', text: hostile('assistant') }, { type: 'tool-call', id: `c${turn}`, name: hostile('tool'), arguments: JSON.stringify({ path: hostile('arg') }) }] }, stream: [] }, { surfaceOp: 'append' }),
    line('tool/result', { turn, step: 1, message: { id: `t${turn}`, role: 'tool', toolCallId: `c${turn}`, isError: false, source: { kind: 'tool', callId: `c${turn}` }, content: [{ type: 'text', text: hostile('result') }] } }, { surfaceOp: 'append', sourceEventSeqs: [seqBase + 7] }),
    line('turn/end', { turn, reason: 'done' }),
  ]
}

function buildStore() {
  sessionlog(['create', HOSTILE_ID, '--cwd', hostile('/cwd')])
  sessionlog(['append', HOSTILE_ID], turnLines(1, 0).join('\n') + '\n')
  sessionlog(['append', HOSTILE_ID], [
    line('user/message', { id: 'k1', role: 'user', content: [{ type: 'text', text: hostile('compacted') }], source: { kind: 'compaction' } }, { surfaceOp: { op: 'replace', startSeq: 4, endSeq: 8 }, sourceEventSeqs: [4, 7, 8] }),
    ...turnLines(2, 11),
  ].join('\n') + '\n')
  sessionlog(['fork', HOSTILE_ID, `${HOSTILE_ID}-fork`])
  sessionlog(['create', PLAIN_ID, '--cwd', '/home/dev/plain'])
  sessionlog(['append', PLAIN_ID], turnLines(1, 0).join('\n') + '\n')
  sessionlog(['append', PLAIN_ID], line('user/message', { id: 'q1', role: 'user', content: [{ type: 'text', text: 'a quokka hides in the plain session' }], source: { kind: 'user' } }, { surfaceOp: 'append' }) + '\n')
  // A session of many short turns: more messages than the page draws at once.
  sessionlog(['create', LONG_ID, '--cwd', '/home/dev/long'])
  const long = []
  for (let turn = 1; turn <= LONG_TURNS; turn++) {
    long.push(
      line('turn/start', { turn }),
      line('step/start', { turn, step: 1 }),
      line('user/message', { id: `lu${turn}`, role: 'user', content: [{ type: 'text', text: `question ${turn}` }], source: { kind: 'user' } }, { surfaceOp: 'append' }),
      line('assistant/message', { turn, step: 1, message: { id: `la${turn}`, role: 'assistant', content: [{ type: 'text', text: `answer ${turn}` }] }, stream: [] }, { surfaceOp: 'append' }),
      line('turn/end', { turn, reason: 'done' }))
  }
  sessionlog(['append', LONG_ID], long.join('\n') + '\n')
  // The session index the listing's search box reads (no host keeps one for this store).
  sessionlog(['reindex'])
}

// `sessionlog serve` on a free loopback port (`extra`: its other arguments); resolves with its
// origin.
function serve(store = db, extra = []) {
  const child = spawn(bin, ['--db', store, ...extra, 'serve', '--listen', '127.0.0.1:0'], { stdio: ['ignore', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (chunk) => {
      out += chunk
      const m = /http:\/\/(127\.0\.0\.1:\d+)\//.exec(out)
      if (m) resolve({ child, origin: `http://${m[1]}` })
    })
    child.on('exit', (code) => reject(new Error(`sessionlog serve exited with ${code}: ${out}`)))
  })
}

const harness = join(dirname(bin), 'sessionlog-harness')
const initdb = join(process.env.SESSIONLOG_PG_BIN || '/usr/lib/postgresql/15/bin', 'initdb')

// `sessionlog-harness pg`: a throwaway PostgreSQL 15 with the fleet's schema, stopped (and its
// directory removed) when its stdin closes; resolves with the process and the superuser's URL
// (the superuser may act as any host).
function startPostgres() {
  const child = spawn(harness, ['pg'], { stdio: ['pipe', 'pipe', 'inherit'] })
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout }).once('line', (answer) => {
      const { url, error } = JSON.parse(answer)
      if (url) resolve({ child, url })
      else reject(new Error(`sessionlog-harness pg: ${error || answer}`))
    })
    child.on('exit', (code) => reject(new Error(`sessionlog-harness pg exited with ${code}`)))
  })
}

let passed = 0
let failed = 0
async function check(name, body) {
  try {
    await body()
    passed++
    console.log(`ok - ${name}`)
  } catch (error) {
    failed++
    console.log(`not ok - ${name}\n  ${String(error && error.stack || error).split('\n').join('\n  ')}`)
  }
}
function assert(condition, message) {
  if (!condition) throw new Error(message)
}

const dialogs = []
const foreignRequests = []
let server
let browser
let fleetPg
let fleetServer
try {
  buildStore()
  server = await serve()
  const { origin } = server
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    // Partial raster anti-aliases an edge by which part of the page was repainted, a few pixels
    // that differ from run to run; the screenshots are kept byte-stable without it.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--disable-partial-raster'],
  })
  const page = await browser.newPage()
  await page.setViewport({ width: 1400, height: 900 })
  page.on('dialog', async (dialog) => { dialogs.push(dialog.message()); await dialog.dismiss() })
  page.on('request', (request) => {
    if (!request.url().startsWith(origin + '/')) foreignRequests.push(request.url())
  })
  // Two frames more before a screenshot: one taken while a moved cursor or a new strip is
  // still being rastered differs from run to run by a few pixels.
  const settled = () => page.evaluate(() => new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve))))
  const inert = async (where) => {
    const probe = await page.evaluate(() => ({
      pwned: window.__pwned || 0,
      scripts: [...document.scripts].map((s) => s.src),
      imgs: document.querySelectorAll('img, iframe, object, embed').length,
      hrefs: [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href')),
    }))
    assert(probe.pwned === 0, `${where}: a probe script ran ${probe.pwned} times`)
    assert(dialogs.length === 0, `${where}: a dialog opened: ${dialogs.join(' | ')}`)
    assert(probe.scripts.length === 1 && probe.scripts[0] === origin + '/app.js', `${where}: scripts ${JSON.stringify(probe.scripts)}`)
    assert(probe.imgs === 0, `${where}: ${probe.imgs} img/iframe/object elements came from data`)
    for (const href of probe.hrefs) {
      assert(href === '/' || href.startsWith('/s/'), `${where}: a link to ${JSON.stringify(href)}`)
    }
    assert(foreignRequests.length === 0, `${where}: requests left the console: ${foreignRequests.join(' ')}`)
  }

  await check('the listing shows every session, hostile text as text', async () => {
    await page.goto(origin + '/', { waitUntil: 'domcontentloaded' })
    await page.waitForFunction(() => document.body.dataset.listed === '4', { timeout: 10000 })
    const cells = await page.$$eval('tr.session td:first-child a', (as) => as.map((a) => a.textContent))
    assert(cells.includes(visible(HOSTILE_ID)) && cells.includes(PLAIN_ID) && cells.includes(visible(`${HOSTILE_ID}-fork`)), `ids listed: ${JSON.stringify(cells)}`)
    assert(cells.every((id) => !/[\u202E\u200B]/.test(id)), 'no id is shown with a direction override or a zero-width character')
    const titles = await page.$$eval('tr.session td.title', (tds) => tds.map((td) => td.textContent))
    assert(titles.includes(visible(hostile('title'))), `the hostile title is shown as text: ${JSON.stringify(titles)}`)
    // The filter box has the focus; its blinking caret would make every screenshot differ.
    await page.evaluate(() => document.activeElement?.blur())
    await settled()
    await page.screenshot({ path: join(shots, 'listing.png') })
    await inert('the listing')
  })

  await check('the search box finds message text through the session index, snippets as text', async () => {
    await page.type('#filter', 'quokka')
    await page.waitForFunction(() => document.body.dataset.listed === '1', { timeout: 10000 })
    const ids = await page.$$eval('tr.session td:first-child a', (as) => as.map((a) => a.textContent))
    assert(ids.length === 1 && ids[0] === PLAIN_ID, `found: ${JSON.stringify(ids)}`)
    assert(await page.$eval('body', (b) => b.dataset.search) === 'index', 'answered by the session index')
    const snippets = await page.$$eval('tr.matches .snippet', (spans) => spans.map((s) => s.textContent))
    assert(snippets.length === 1 && snippets[0].includes('[quokka]'), `snippets: ${JSON.stringify(snippets)}`)
    // Hostile text found by a search is shown as text too.
    await page.$eval('#filter', (box) => { box.value = '' })
    await page.type('#filter', 'onerror')
    await page.waitForFunction(() => Number(document.body.dataset.listed) >= 2, { timeout: 10000 })
    const found = await page.$$eval('tr.matches .snippet', (spans) => spans.map((s) => s.textContent))
    assert(found.some((s) => s.includes('[onerror]') && s.includes('<')), `hostile snippets as text: ${JSON.stringify(found)}`)
    await inert('the search results')
  })

  const end = sessionlog(['ls', '--json']).split('\n').filter(Boolean)
    .map((l) => JSON.parse(l)).find((s) => s.id === HOSTILE_ID).events

  await check('a session opens from its link in the listing', async () => {
    await page.goto(origin + '/', { waitUntil: 'domcontentloaded' })
    await page.waitForFunction(() => document.body.dataset.listed === '4', { timeout: 10000 })
    const links = await page.$$('tr.session td:first-child a')
    let target = null
    for (const link of links) {
      if (await link.evaluate((a) => a.textContent) === visible(HOSTILE_ID)) target = link
    }
    assert(target, 'the hostile session has a link')
    await Promise.all([page.waitForNavigation(), target.click()])
    await page.waitForFunction((last) => document.body.dataset.renderedAt === String(last), { timeout: 10000 }, end - 1)
    assert(decodeURIComponent(new URL(page.url()).pathname) === `/s/${HOSTILE_ID}`, `opened ${page.url()}`)
    await page.waitForSelector('#tree li', { timeout: 10000 })
    const around = await page.$$eval('#events tr', (rows) => rows.map((r) => r.getAttribute('data-seq')))
    assert(around.includes(String(end - 1)), `the raw events around the last seq are shown: ${JSON.stringify(around)}`)
    const units = await page.$$eval('#projections .projection pre', (pres) => pres.map((p) => p.textContent))
    assert(units.some((u) => u.includes('todo <script>')), `the todos projection is shown as text: ${JSON.stringify(units)}`)
    // The step marks of the turn shown are drawn after the view; the screenshot waits for them.
    await page.waitForFunction(() => document.body.dataset.stepsOf === '11-20', { timeout: 10000 })
    await settled()
    await page.screenshot({ path: join(shots, 'session.png'), fullPage: false })
    await inert('the session view')
  })

  await check('the scrubber at every seq shows what `sessionlog messages --at` prints', async () => {
    for (let at = 0; at < end; at++) {
      await page.$eval('#scrubber', (range, value) => {
        range.value = String(value)
        range.dispatchEvent(new Event('input', { bubbles: true }))
      }, at)
      await page.waitForFunction((seq) => document.body.dataset.renderedAt === String(seq), { timeout: 10000 }, at)
      // Each message's JSON is written when its disclosure opens.
      await page.$$eval('#message-list details', (all) => all.forEach((d) => { d.open = true }))
      await page.waitForFunction(() => document.querySelectorAll('#message-list pre.raw').length ===
        document.querySelectorAll('#message-list details').length, { timeout: 10000 })
      const rendered = await page.$$eval('#message-list pre.raw', (pres) => pres.map((p) => p.textContent))
      const expected = sessionlog(['messages', HOSTILE_ID, '--at', String(at)]).split('\n').filter(Boolean)
      assert(JSON.stringify(rendered) === JSON.stringify(expected),
        `seq ${at}: the page shows ${rendered.length} messages, the CLI ${expected.length}\n${rendered.join('\n')}\n---\n${expected.join('\n')}`)
      const shown = await page.$eval('#message-list', (list) => list.innerText)
      for (const message of expected.map((m) => JSON.parse(m))) {
        for (const part of message.content || []) {
          if (part.type === 'text') assert(shown.includes(part.text.split('\n')[0].slice(0, 40)), `seq ${at}: the text ${JSON.stringify(part.text.slice(0, 40))} is shown`)
        }
      }
    }
    await page.$eval('#scrubber', (range) => {
      range.value = '10'
      range.dispatchEvent(new Event('input', { bubbles: true }))
    })
    await page.waitForFunction(() => document.body.dataset.renderedAt === '10' && document.body.dataset.stepsOf === '0-9' &&
      document.getElementById('step-label').textContent.includes('step 1 of 1'), { timeout: 10000 })
    await settled()
    await page.screenshot({ path: join(shots, 'scrubbed.png'), fullPage: false })
    await inert('after scrubbing')
  })


  await check('a long view draws a window of messages and the rest as it scrolls', async () => {
    const last = LONG_TURNS * 5 - 1
    await page.goto(`${origin}/s/${LONG_ID}?at=${last}`, { waitUntil: 'domcontentloaded' })
    await page.waitForFunction((seq) => document.body.dataset.renderedAt === String(seq), { timeout: 10000 }, last)
    const expected = sessionlog(['messages', LONG_ID, '--at', String(last)]).split('\n').filter(Boolean)
    assert(expected.length === 2 * LONG_TURNS, `the CLI prints ${expected.length} messages`)
    const first = await page.$$eval('#message-list .message', (all) => all.length)
    assert(first > 0 && first < expected.length, `the first draw holds ${first} of ${expected.length} messages`)
    const more = await page.$eval('#more-messages', (m) => m.textContent)
    assert(more.includes(`of ${expected.length} messages`), `the list says there is more: ${JSON.stringify(more)}`)
    await page.waitForFunction((count) => {
      window.scrollTo(0, document.documentElement.scrollHeight)
      return document.body.dataset.messagesShown === String(count)
    }, { timeout: 20000, polling: 100 }, expected.length)
    await page.$$eval('#message-list details', (all) => all.forEach((d) => { d.open = true }))
    const rendered = await page.$$eval('#message-list pre.raw', (pres) => pres.map((p) => p.textContent))
    assert(JSON.stringify(rendered) === JSON.stringify(expected), `scrolled to its end, the page shows ${rendered.length} messages, the CLI ${expected.length}`)
    const indexes = await page.$$eval('#message-list .message', (all) => all.map((m) => Number(m.dataset.index)))
    assert(indexes.every((n, i) => n === i), 'each message once, in order')
    assert(await page.$eval('#more-messages', (m) => m.hidden), 'nothing more to draw')
  })

  await check('step marks and the step buttons move between steps and turns', async () => {
    await page.goto(`${origin}/s/${encodeURIComponent(HOSTILE_ID)}?at=0`, { waitUntil: 'domcontentloaded' })
    await page.waitForFunction(() => document.body.dataset.renderedAt === '0', { timeout: 10000 })
    await page.waitForFunction(() => document.body.dataset.stepsOf === '0-9', { timeout: 10000 })
    const marks = await page.$$eval('#steps rect.step', (rects) => rects.map((r) => ({ seq: r.getAttribute('data-seq'), tip: r.textContent })))
    assert(marks.length === 1 && marks[0].seq === '1', `turn 1's step marks: ${JSON.stringify(marks)}`)
    assert(marks[0].tip.includes(visible(hostile('tool'))), `the mark names its tool, as text: ${JSON.stringify(marks[0].tip)}`)
    const moves = [['#next-step', 1], ['#next-step', 11], ['#next-step', 12], ['#prev-turn', 11], ['#prev-turn', 0], ['#next-turn', 11], ['#prev-step', 0]]
    for (const [button, seq] of moves) {
      await page.click(button)
      await page.waitForFunction((s) => document.body.dataset.renderedAt === String(s), { timeout: 10000 }, seq)
    }
    await page.click('#next-turn')
    await page.waitForFunction(() => document.body.dataset.renderedAt === '11' && /step 0|before its first step/.test(document.getElementById('step-label').textContent), { timeout: 10000 })
    await page.click('#next-step')
    await page.waitForFunction(() => document.body.dataset.renderedAt === '12' && document.getElementById('step-label').textContent.includes('step 1 of 1'), { timeout: 10000 })
    await page.$eval('#steps rect.step', (r) => r.dispatchEvent(new MouseEvent('click', { bubbles: true })))
    await inert('the step marks')
  })

  await check('a live append is shown within 1 s of its commit', async () => {
    await page.evaluate((last) => window.sessionlogConsole.go(last), end - 1)
    await page.waitForFunction((last) => document.body.dataset.renderedAt === String(last), { timeout: 10000 }, end - 1)
    await page.click('#follow')
    await page.waitForFunction(() => document.getElementById('live-state').textContent === 'following', { timeout: 10000 })
    // The follower has subscribed once the first keep-alive could flow; give it its first poll.
    await new Promise((resolve) => setTimeout(resolve, 300))
    const text = 'live ' + hostile('live')
    const appendLine = line('user/message', { id: 'live1', role: 'user', content: [{ type: 'text', text }], source: { kind: 'user' } }, { surfaceOp: 'append' })
    sessionlog(['append', HOSTILE_ID], appendLine + '\n')
    const committed = Date.now()
    await page.waitForFunction((seq) => document.body.dataset.renderedAt === String(seq), { timeout: 5000 }, end)
    const took = Date.now() - committed
    const shown = await page.$eval('#message-list', (list) => list.innerText)
    assert(shown.includes('live ' + hostile('live').slice(0, 30)), 'the live message is shown')
    assert(took <= 1000, `the live append took ${took} ms to show`)
    console.log(`  live append shown ${took} ms after its commit`)
    await inert('after the live append')
  })

  if (!existsSync(initdb) && process.env.CI === undefined) {
    console.log(`skipped - the console of a fleet's host: PostgreSQL 15 is not installed (no ${initdb}); ./x test installs it`)
  } else {
    await check('the console of a fleet\'s host lists, shows and follows what two other hosts write', async () => {
      fleetPg = await startPostgres()
      const host = (name) => (args, input) =>
        sessionlogAt(join(work, name), ['--cluster', fleetPg.url, '--host', name, ...args], input)
      const [a, b, d] = [host('host-a'), host('host-b'), host('host-d')]
      a(['create', 'fleet-one', '--cwd', '/home/dev/fleet'])
      // User messages alone: a log DSH loads (forking checks that), of several views.
      const turns = []
      for (let n = 1; n <= 6; n++) {
        turns.push(line('user/message', { id: `fu${n}`, role: 'user', content: [{ type: 'text', text: `fleet question ${n}` }], source: { kind: 'user' } }, { surfaceOp: 'append' }))
      }
      a(['append', 'fleet-one'], turns.join('\n') + '\n')
      b(['fork', 'fleet-one', 'fleet-fork'])
      fleetServer = await serve(join(work, 'host-c'), ['--cluster', fleetPg.url, '--host', 'host-c'])
      const fleetPage = await browser.newPage()
      await fleetPage.setViewport({ width: 1400, height: 900 })
      await fleetPage.goto(fleetServer.origin + '/', { waitUntil: 'domcontentloaded' })
      await fleetPage.waitForFunction(() => document.body.dataset.listed === '2', { timeout: 20000 })
      const ids = await fleetPage.$$eval('tr.session td:first-child a', (as) => as.map((x) => x.textContent).sort())
      assert(JSON.stringify(ids) === JSON.stringify(['fleet-fork', 'fleet-one']), `listed: ${JSON.stringify(ids)}`)
      const last = JSON.parse(d(['ls', '--json']).split('\n').filter(Boolean).find((l) => JSON.parse(l).id === 'fleet-one')).events - 1
      for (const at of [0, 3, last]) {
        await fleetPage.goto(`${fleetServer.origin}/s/fleet-one?at=${at}`, { waitUntil: 'domcontentloaded' })
        await fleetPage.waitForFunction((seq) => document.body.dataset.renderedAt === String(seq), { timeout: 10000 }, at)
        await fleetPage.$$eval('#message-list details', (all) => all.forEach((x) => { x.open = true }))
        await fleetPage.waitForFunction(() => document.querySelectorAll('#message-list pre.raw').length ===
          document.querySelectorAll('#message-list details').length, { timeout: 10000 })
        const rendered = await fleetPage.$$eval('#message-list pre.raw', (pres) => pres.map((x) => x.textContent))
        const expected = d(['messages', 'fleet-one', '--at', String(at)]).split('\n').filter(Boolean)
        assert(expected.length > 0 || at === 0, `seq ${at}: the CLI prints no message`)
        assert(JSON.stringify(rendered) === JSON.stringify(expected),
          `seq ${at}: the page shows ${rendered.length} messages, another host's CLI ${expected.length}`)
      }
      await fleetPage.waitForFunction(() => [...document.querySelectorAll('#tree li')].some((li) => li.textContent.includes('fleet-fork')), { timeout: 10000 })
      // Opened without a seq, the view stays at the session's end as it grows.
      await fleetPage.goto(`${fleetServer.origin}/s/fleet-one`, { waitUntil: 'domcontentloaded' })
      await fleetPage.waitForFunction((seq) => document.body.dataset.renderedAt === String(seq), { timeout: 10000 }, last)
      await fleetPage.click('#follow')
      await fleetPage.waitForFunction(() => document.getElementById('live-state').textContent === 'following', { timeout: 10000 })
      await new Promise((resolve) => setTimeout(resolve, 300))
      const appendLine = line('user/message', { id: 'fleet-live', role: 'user', content: [{ type: 'text', text: 'appended by host a' }], source: { kind: 'user' } }, { surfaceOp: 'append' })
      a(['append', 'fleet-one'], appendLine + '\n')
      const committed = Date.now()
      await fleetPage.waitForFunction((seq) => document.body.dataset.renderedAt === String(seq), { timeout: 5000 }, last + 1)
        .catch(async (e) => {
          const state = await fleetPage.evaluate(() => ({ liveEnd: document.body.dataset.liveEnd, at: document.body.dataset.renderedAt, live: document.getElementById('live-state').textContent, url: location.href }))
          throw new Error(`${e.message}: the page at ${JSON.stringify(state)}, waiting for seq ${last + 1}`)
        })
      const took = Date.now() - committed
      assert((await fleetPage.$eval('#message-list', (list) => list.innerText)).includes('appended by host a'), 'the live message is shown')
      assert(took <= 1000, `host a's append took ${took} ms to show on host c's console`)
      console.log(`  host a's append shown on host c's console ${took} ms after its commit`)
      await fleetPage.close()
    })
  }
} catch (error) {
  failed++
  console.log(`not ok - setting up: ${error && error.stack || error}`)
} finally {
  if (browser) await browser.close()
  if (server) server.child.kill()
  if (fleetServer) fleetServer.child.kill()
  if (fleetPg) {
    const stopped = new Promise((resolve) => fleetPg.child.once('exit', resolve))
    fleetPg.child.stdin.end()
    await stopped
  }
  rmSync(work, { recursive: true, force: true })
}
console.log(`console-test: ${passed} passed, ${failed} failed`)
process.exit(failed === 0 && passed > 0 ? 0 : 1)
