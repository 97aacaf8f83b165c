// sessionlog console: the listing (/) and a session (/s/{id}?at={seq}), drawn from the JSON API.
//
// Session content is untrusted: every string from the store reaches the page as a text node
// (`el` turns children into text nodes; nothing here parses a string as HTML), and the only links built from data
// are same-origin `/s/…` paths with the id encoded by encodeURIComponent.
"use strict";

const main = document.getElementById("main");
const where = document.getElementById("where");

// An element with attributes and children; a string child becomes a text node.
function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) node.setAttribute(k, String(v));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.appendChild(typeof child === "string" || typeof child === "number"
      ? document.createTextNode(String(child)) : child);
  }
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

// The same-origin address of a session (at a seq).
function sessionHref(id, at) {
  const path = "/s/" + encodeURIComponent(id);
  return at === undefined || at === null ? path : path + "?at=" + encodeURIComponent(String(at));
}

function sessionLink(id, text) {
  const a = el("a", { href: sessionHref(id) }, visible(text === undefined ? id : text));
  return a;
}

async function api(path, signal) {
  const response = await fetch(path, { signal, credentials: "same-origin" });
  const body = await response.json().catch(() => ({ error: "the answer was not JSON" }));
  if (!response.ok) throw new Error(body.error || ("HTTP " + response.status));
  return body;
}

function showError(into, error) {
  into.replaceChildren(el("p", { class: "error" }, String(error && error.message || error)));
}

// Names (ids, titles, projects, tool names) with their invisible characters made visible:
// bidirectional overrides and isolates and zero-width characters become ⟦U+XXXX⟧, so a name
// cannot pass for another or reverse the text after it. Message bodies keep their characters
// (right-to-left text is legitimate there) inside elements that isolate their direction.
const INVISIBLE = /[\u061C\u200B-\u200F\u202A-\u202E\u2060-\u2064\u2066-\u2069\uFEFF]/g;
function visible(name) {
  return String(name).replace(INVISIBLE, (c) => "\u27E6U+" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0") + "\u27E7");
}

// Messages drawn at once: a view shows its first WINDOW messages and draws the next WINDOW as
// the list's end scrolls near the screen, so a scrubber move draws a screenful, not thousands.
const WINDOW = 25;
// The most characters of one text drawn before its "show all" button: laying out a message of
// tens of kilobytes is most of a move's time, and its first screenful is what is read.
const CLIP = 3000;
// The most events the page asks the steps of at once (the server's cap).
const MAX_STEP_SCAN = 100000;

function asText(value) {
  return typeof value === "string" ? value : JSON.stringify(value, null, 2);
}

// Element `tag` holding `text`, its first CLIP characters when longer, with a button that
// draws the rest.
function clipped(tag, attrs, text) {
  if (text.length <= CLIP) return el(tag, attrs, text);
  const all = el("button", { class: "show-all" }, `show all ${text.length} characters`);
  const node = el(tag, attrs, text.slice(0, CLIP), "… ", all);
  all.addEventListener("click", () => { node.textContent = text; });
  return node;
}

// ---------------------------------------------------------------- listing

function listing() {
  where.textContent = "sessions";
  document.title = "sessionlog console";
  const box = el("input", { type: "search", id: "filter", placeholder: "Search message text (words, or \"a phrase\"), or type a session id", autofocus: "" });
  const note = el("p", { class: "note", id: "listing-note", hidden: "" });
  const body = el("tbody");
  const more = el("button", { id: "more", hidden: "" }, "More");
  const status = el("p", { class: "note", id: "listing-status" });
  const table = el("table", { class: "sessions" },
    el("thead", {}, el("tr", {}, ["Session", "Title", "Project", "Events", "Verdict", "Last activity"].map((h) => el("th", {}, h)))),
    body);
  main.replaceChildren(box, note, table, more, status);
  let next = null;
  let generation = 0;
  let controller = null;

  // A session found by a search: its matched messages under it, each a link to its seq. A
  // snippet is the message's text as stored (matched words in [ ]), shown as text.
  function matchesRow(s) {
    return el("tr", { class: "matches" }, el("td", { colspan: 6 },
      el("ul", {}, s.matches.map((m) => el("li", {},
        el("a", { href: sessionHref(s.id, m.seq) }, `seq ${m.seq}`), " ",
        el("span", { class: "snippet" }, m.snippet)))),
      s.matchCount > s.matches.length ? el("span", { class: "note" }, `${s.matchCount - s.matches.length} more matched messages`) : null));
  }

  async function load(append) {
    const mine = ++generation;
    if (controller) controller.abort();
    controller = new AbortController();
    const params = new URLSearchParams({ limit: "50" });
    if (box.value.trim()) params.set("q", box.value.trim());
    if (append && next) params.set("after", next);
    status.textContent = "Loading…";
    try {
      const page = await api("/api/sessions?" + params, controller.signal);
      if (mine !== generation) return;
      if (!append) body.replaceChildren();
      for (const s of page.sessions) {
        body.appendChild(el("tr", { class: "session" },
          el("td", {}, sessionLink(s.id)),
          el("td", { class: "title" }, visible(s.title || "")),
          el("td", {}, visible(s.cwd || "")),
          el("td", {}, String(s.events)),
          el("td", {}, s.verdict),
          el("td", {}, s.activityAt ? new Date(s.activityAt).toISOString() : "")));
        if (Array.isArray(s.matches) && s.matches.length) body.appendChild(matchesRow(s));
      }
      next = page.next;
      more.hidden = !next;
      note.textContent = page.note || "";
      note.hidden = !page.note;
      const listed = body.querySelectorAll("tr.session").length;
      status.textContent = listed ? "" : (params.has("q") ? "No sessions found." : "No sessions.");
      document.body.dataset.search = page.search || "";
      document.body.dataset.listed = String(listed);
    } catch (e) {
      if (e.name !== "AbortError") showError(status, e);
    }
  }
  let timer = null;
  box.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(() => load(false), 150); });
  more.addEventListener("click", () => load(true));
  load(false);
}

// ---------------------------------------------------------------- one session

function renderPart(part) {
  if (part === null || typeof part !== "object") return el("pre", { class: "part" }, asText(part));
  switch (part.type) {
    case "text":
    case "reasoning":
      return el("div", { class: "part " + part.type },
        part.type === "reasoning" ? el("div", { class: "label" }, "reasoning") : null,
        clipped("div", { class: "text" }, asText(part.text)));
    case "tool-call":
      return el("div", { class: "part call" },
        el("div", { class: "label" }, "tool call ", el("b", {}, visible(asText(part.name))), " · ", asText(part.id)),
        clipped("pre", {}, asText(part.arguments !== undefined ? part.arguments : part.input)));
    case "tool-result":
      return el("div", { class: "part result" },
        el("div", { class: "label" }, "tool result · ", asText(part.toolCallId !== undefined ? part.toolCallId : part.id)),
        Array.isArray(part.content) ? part.content.map(renderPart)
          : clipped("pre", {}, asText(part.output !== undefined ? part.output : (part.result !== undefined ? part.result : part.content))));
    default:
      return el("div", { class: "part" }, el("div", { class: "label" }, asText(part.type)), clipped("pre", {}, asText(part)));
  }
}

function renderMessage(message, index) {
  const role = message && typeof message.role === "string" ? message.role : "?";
  const parts = Array.isArray(message && message.content)
    ? message.content.map(renderPart)
    : [clipped("div", { class: "text" }, asText(message && message.content))];
  return el("div", { class: "message " + (["user", "assistant", "system", "tool"].includes(role) ? role : "other"), "data-index": index },
    el("div", { class: "role" }, role,
      message && message.toolCallId !== undefined ? el("span", { class: "label" }, " · result of ", asText(message.toolCallId)) : null),
    parts,
    rawJson(message));
}

// A message's JSON under a disclosure, written when it is first opened (a view may hold
// thousands of messages; their JSON is rarely read).
function rawJson(message) {
  const details = el("details", {}, el("summary", {}, "JSON"));
  details.addEventListener("toggle", () => {
    if (details.open && !details.querySelector("pre.raw")) details.appendChild(el("pre", { class: "raw" }, JSON.stringify(message)));
  });
  return details;
}

// The projections at a view's seq into `holder`; `shown` (unit → what is drawn) keeps the row
// of a unit whose value did not change from one seq to the next.
function showProjections(holder, shown, view) {
  for (const unit of ["title", "todos", "tokenUsage", "requestHeader"]) {
    const value = view.projections[unit];
    const error = view.projectionErrors[unit];
    const text = error !== undefined ? null : (value === null || value === undefined ? "none" : asText(value));
    const key = error !== undefined ? "error: " + error : "value: " + text;
    const row = shown[unit];
    if (row && row.key === key) continue;
    const node = el("div", { class: "projection", "data-unit": unit },
      el("div", { class: "label" }, unit),
      error !== undefined ? el("p", { class: "note" }, error) : clipped("pre", {}, text));
    if (row) row.node.replaceWith(node); else holder.appendChild(node);
    shown[unit] = { key, node };
  }
}

// The message list's items (`{json, node}`) for `messages`, the first at `from`: an item of
// `old` whose message is the same is kept, so a move redraws only the messages that changed.
function messageItems(messages, from, old) {
  return messages.map((message, i) => {
    const json = JSON.stringify(message);
    const before = old[from + i];
    return before && before.json === json ? before : { json, node: renderMessage(message, from + i) };
  });
}

// Put `items` in `list` in place of `old`, touching only the nodes that differ.
function placeItems(list, old, items) {
  items.forEach((item, i) => {
    if (i >= old.length) list.appendChild(item.node);
    else if (old[i] !== item) list.replaceChild(item.node, old[i].node);
  });
  for (const gone of old.slice(items.length)) gone.node.remove();
}

function renderEvents(answer, at) {
  return el("table", { class: "events" }, el("tbody", {}, answer.events.map((e) =>
    el("tr", { class: e.seq === at ? "here" : "", "data-seq": e.seq },
      el("td", {}, el("a", { href: sessionHref(answer.id, e.seq), "data-seq": e.seq }, String(e.seq))),
      el("td", {}, asText(e.event && e.event.type)),
      el("td", { class: "json" }, JSON.stringify(e.event))))));
}

function totalOf(usage) {
  let total = 0;
  for (const v of Object.values(usage || {})) if (typeof v === "number") total += v;
  return total;
}

// The token-usage plot, drawn once per load; `place(at)` moves its seq line.
function renderPlot(points, end, go) {
  const width = 600, height = 150, pad = 30;
  const plot = svg("svg", { class: "plot", viewBox: `0 0 ${width} ${height}`, role: "img" });
  if (!points.length) return { node: el("p", { class: "note" }, "No token usage recorded for this session's format."), place() {} };
  const maxTotal = Math.max(1, ...points.map((p) => totalOf(p.usage)));
  const span = Math.max(1, end - 1);
  const x = (seq) => pad + (width - 2 * pad) * seq / span;
  const y = (total) => height - pad + (2 * pad - height) * total / maxTotal;
  plot.appendChild(svg("line", { class: "axis", x1: pad, y1: height - pad, x2: width - pad, y2: height - pad }));
  plot.appendChild(svg("polyline", { class: "line", points: points.map((p) => `${x(p.seq)},${y(totalOf(p.usage))}`).join(" ") }));
  for (const p of points) {
    const dot = svg("circle", { cx: x(p.seq), cy: y(totalOf(p.usage)), r: 3, fill: "#2563a8" });
    const tip = svg("title", {});
    tip.textContent = `seq ${p.seq}: ${totalOf(p.usage)} tokens ` + JSON.stringify(p.usage);
    dot.appendChild(tip);
    dot.addEventListener("click", () => go(p.seq));
    plot.appendChild(dot);
  }
  const here = svg("line", { class: "here", x1: x(0), y1: pad / 2, x2: x(0), y2: height - pad });
  plot.appendChild(here);
  const label = svg("text", { x: pad, y: 12 });
  label.textContent = `${maxTotal} tokens`;
  plot.appendChild(label);
  return { node: plot, place(at) { here.setAttribute("x1", x(at)); here.setAttribute("x2", x(at)); } };
}

// The scrubber's strip of marks, drawn once per load; `place(at)` moves its cursor.
function renderMarks(marks, go) {
  const strip = svg("svg", { class: "marks", viewBox: "0 0 1000 22", preserveAspectRatio: "none" });
  const span = Math.max(1, marks.end - 1);
  const x = (seq) => 1000 * seq / span;
  for (const c of marks.compactions) {
    const r = svg("rect", { class: "compaction", x: x(c.start), y: 0, width: Math.max(2, x(c.end) - x(c.start)), height: 22 });
    const tip = svg("title", {});
    tip.textContent = `compaction at seq ${c.seq} replaced seqs ${c.start}–${c.end}`;
    r.appendChild(tip);
    r.addEventListener("click", () => go(c.seq));
    strip.appendChild(r);
  }
  for (const t of marks.turns) {
    const r = svg("rect", { class: "turn", x: x(t.startSeq), y: 0, width: 2, height: 22 });
    const tip = svg("title", {});
    tip.textContent = `turn ${JSON.stringify(t.turn)} starts at seq ${t.startSeq} (${t.steps} steps)`;
    r.appendChild(tip);
    r.addEventListener("click", () => go(t.startSeq));
    strip.appendChild(r);
  }
  const cursor = svg("rect", { class: "cursor", x: 0, y: 0, width: 3, height: 22 });
  strip.appendChild(cursor);
  return { node: strip, place(at) { cursor.setAttribute("x", Math.min(x(at), 1000) - 1); } };
}

// A turn's strip of step marks, from its first seq to its last; `place(at)` moves its cursor.
function renderSteps(range, go) {
  const strip = svg("svg", { class: "steps", viewBox: "0 0 1000 22", preserveAspectRatio: "none" });
  const span = Math.max(1, range.to - range.from);
  const x = (seq) => 1000 * (seq - range.from) / span;
  for (const s of range.steps) {
    const r = svg("rect", { class: "step", x: Math.min(998, x(s.seq)), y: 0, width: 2, height: 22, "data-seq": s.seq });
    const tip = svg("title", {});
    tip.textContent = `step ${JSON.stringify(s.step)} starts at seq ${s.seq}` + (s.tools.length ? ": " + s.tools.map(visible).join(", ") : "");
    r.appendChild(tip);
    r.addEventListener("click", () => go(s.seq));
    strip.appendChild(r);
  }
  const cursor = svg("rect", { class: "cursor", x: 0, y: 0, width: 3, height: 22 });
  strip.appendChild(cursor);
  return { node: strip, place(at) { cursor.setAttribute("x", Math.max(0, Math.min(x(at), 1000)) - 1); } };
}

function session(id, requestedAt) {
  where.textContent = visible(id);
  document.title = "sessionlog · " + visible(id);
  const state = { id, at: requestedAt, end: 0, marks: null, marksData: null, plot: null, controller: null, source: null, pinned: requestedAt === null, list: null, steps: null, stepsStrip: null, compactionsShown: null, headline: null };
  const range = el("input", { type: "range", id: "scrubber", min: 0, max: 0, value: 0, "aria-label": "seq" });
  const number = el("input", { type: "number", id: "seq", min: 0, value: 0, "aria-label": "seq number" });
  const prev = el("button", { id: "prev", title: "previous seq" }, "◀");
  const nextButton = el("button", { id: "next", title: "next seq" }, "▶");
  const endLabel = el("span", { class: "note", id: "end" });
  const followBox = el("input", { type: "checkbox", id: "follow" });
  const liveLabel = el("span", { id: "live-state", class: "note" });
  const marksHolder = el("div", { id: "marks" });
  const prevTurn = el("button", { id: "prev-turn", title: "this turn's start, or the previous turn's" }, "« turn");
  const prevStep = el("button", { id: "prev-step", title: "the previous step's start" }, "‹ step");
  const nextStep = el("button", { id: "next-step", title: "the next step's start" }, "step ›");
  const nextTurn = el("button", { id: "next-turn", title: "the next turn's start" }, "turn »");
  const stepLabel = el("span", { class: "note", id: "step-label" });
  const stepsHolder = el("div", { id: "steps" });
  const headline = el("div", { id: "headline" });
  const messagesTitle = el("h2", {}, "Messages the model saw");
  const messageList = el("div", { id: "message-list" });
  const moreMessages = el("div", { id: "more-messages", class: "note", hidden: "" });
  const messages = el("section", { id: "messages" }, messagesTitle, messageList, moreMessages);
  const projections = el("section", { id: "projections" }, el("h2", {}, "Projections"));
  const projectionsShown = {};
  const compactions = el("section", { id: "compactions" }, el("h2", {}, "Compactions"));
  const events = el("section", { id: "events" }, el("h2", {}, "Raw events around this seq"));
  const plot = el("section", { id: "tokens" }, el("h2", {}, "Token usage"));
  const tree = el("section", { id: "tree" }, el("h2", {}, "Fork tree"));
  const status = el("div", { id: "view-status" });
  main.replaceChildren(headline,
    el("div", { class: "bar" }, prev, range, nextButton, number, endLabel,
      el("label", {}, followBox, " follow live "), liveLabel),
    marksHolder,
    el("div", { class: "bar steps-bar" }, prevTurn, prevStep, nextStep, nextTurn, stepLabel, stepsHolder),
    status,
    el("div", { class: "grid" }, el("div", {}, messages), el("div", {}, projections, compactions, plot, tree, events)));

  function go(seq) {
    if (!state.end) return;
    const at = Math.max(0, Math.min(state.end - 1, Math.round(Number(seq))));
    if (!Number.isFinite(at)) return;
    state.pinned = at === state.end - 1;
    show(at);
  }

  // The index of the turn holding `seq` (the last one starting at or before it), or -1.
  function turnAt(seq) {
    const turns = state.marksData ? state.marksData.turns : [];
    let lo = 0, hi = turns.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (turns[mid].startSeq <= seq) lo = mid + 1; else hi = mid;
    }
    return lo - 1;
  }

  // The steps of the turn shown, fetched when the view moves into another turn (or the open
  // turn grew); then its strip, its label and the cursor.
  async function showSteps() {
    if (!state.marksData || state.at === null) return;
    const turns = state.marksData.turns;
    const index = turnAt(state.at);
    if (index < 0) {
      state.steps = null;
      stepsHolder.replaceChildren();
      stepLabel.textContent = turns.length ? "before the first turn" : "no turns";
      return;
    }
    const turn = turns[index];
    const last = turn.endSeq === null || turn.endSeq === undefined ? state.end - 1 : turn.endSeq;
    const from = turn.startSeq, to = Math.min(last, from + MAX_STEP_SCAN - 1);
    const key = `${from}-${to}`;
    if (!state.steps || state.steps.key !== key) {
      const controller = state.controller;
      try {
        const answer = await api(`/api/sessions/${encodeURIComponent(id)}/steps?from=${from}&to=${to}`, controller && controller.signal);
        if (controller !== state.controller) return;
        state.steps = { key, index, from, to: answer.to, steps: answer.steps };
        state.stepsStrip = renderSteps(state.steps, go);
        stepsHolder.replaceChildren(state.stepsStrip.node);
        document.body.dataset.stepsOf = key;
      } catch (e) {
        if (e.name !== "AbortError") stepLabel.textContent = "steps: " + (e.message || e);
        return;
      }
    }
    const steps = state.steps.steps;
    const done = steps.filter((s) => s.seq <= state.at).length;
    stepLabel.textContent = `turn ${visible(JSON.stringify(turn.turn))} (seqs ${from}–${last}) · ` +
      (steps.length ? (done ? `step ${done} of ${steps.length}` : `before its first step (${steps.length} steps)`) : "no steps");
    state.stepsStrip.place(state.at);
  }

  // Where the step buttons move: the next or previous step start in the turn shown, else the
  // next or previous turn's start.
  function stepTarget(forward, byTurn) {
    const turns = state.marksData ? state.marksData.turns : [];
    const at = state.at || 0;
    const index = turnAt(at);
    if (!byTurn && state.steps && state.steps.index === index) {
      const seqs = state.steps.steps.map((s) => s.seq);
      const step = forward ? seqs.find((seq) => seq > at) : seqs.filter((seq) => seq < at).pop();
      if (step !== undefined) return step;
    }
    if (forward) return index + 1 < turns.length ? turns[index + 1].startSeq : null;
    if (index >= 0 && turns[index].startSeq < at) return turns[index].startSeq;
    return index > 0 ? turns[index - 1].startSeq : null;
  }
  const jump = (forward, byTurn) => async () => {
    // The steps of the turn shown, if a move has not loaded them yet.
    await showSteps();
    const target = stepTarget(forward, byTurn);
    if (target !== null) go(target);
  };

  // The message list's next window, drawn when its end comes near the screen.
  const filler = new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting)) fill();
  }, { rootMargin: "800px 0px" });

  function showMore() {
    const list = state.list;
    const left = list ? list.count - list.shown : 0;
    moreMessages.hidden = left <= 0;
    moreMessages.textContent = left > 0 ? `Showing ${list.shown} of ${list.count} messages; the rest are drawn as you scroll.` : "";
    document.body.dataset.messagesShown = String(list ? list.shown : 0);
    filler.unobserve(moreMessages);
    // Observing again reports whether it is near the screen now (after a window was drawn).
    if (left > 0) filler.observe(moreMessages);
  }

  async function fill() {
    const list = state.list;
    if (!list || list.loading || list.shown >= list.count) return;
    list.loading = true;
    const controller = state.controller;
    try {
      const view = await api(`/api/sessions/${encodeURIComponent(id)}/view?at=${list.at}&from=${list.shown}&limit=${WINDOW}`, controller.signal);
      if (state.list !== list) return;
      const items = messageItems(view.messages, list.shown, []);
      for (const item of items) messageList.appendChild(item.node);
      list.items = list.items.concat(items);
      list.shown += view.messages.length;
      // The view is the same moment: its count cannot change, unless nothing came back.
      if (!view.messages.length) list.count = list.shown;
    } catch (e) {
      if (e.name !== "AbortError") showError(status, e);
      return;
    } finally {
      list.loading = false;
    }
    showMore();
  }

  // The compactions up to the seq shown (from the marks, once they are loaded).
  function showCompactions() {
    if (!state.marksData || state.at === null) return;
    const upTo = state.marksData.compactions.filter((c) => c.seq <= state.at);
    // Compactions are ordered by seq: the same count is the same list.
    if (state.compactionsShown === upTo.length) return;
    state.compactionsShown = upTo.length;
    compactions.replaceChildren(el("h2", {}, "Compactions up to here"),
      upTo.length ? el("ul", {}, upTo.map((c) => el("li", {},
        el("a", { href: sessionHref(id, c.seq), "data-seq": c.seq }, `seq ${c.seq}`), ` replaced seqs ${c.start}–${c.end}`)))
        : el("p", { class: "note" }, "None."));
  }

  function setControls() {
    range.max = String(Math.max(0, state.end - 1));
    number.max = String(Math.max(0, state.end - 1));
    range.value = String(state.at === null ? 0 : state.at);
    number.value = String(state.at === null ? 0 : state.at);
    endLabel.textContent = `of ${state.end} events`;
    if (state.marks) state.marks.place(state.at || 0);
    if (state.plot) state.plot.place(state.at || 0);
  }

  async function show(at) {
    if (state.controller) state.controller.abort();
    const controller = state.controller = new AbortController();
    const started = performance.now();
    state.at = at;
    setControls();
    const query = `?limit=${WINDOW}` + (at === null ? "" : "&at=" + at);
    try {
      const around = (seq) => api(`/api/sessions/${encodeURIComponent(id)}/events?at=${seq}&radius=6`, controller.signal);
      // With the seq known the view and the events around it are fetched together; without
      // it (the session's end), the view says where that is.
      const [view, nearby] = await Promise.all([
        api(`/api/sessions/${encodeURIComponent(id)}/view${query}`, controller.signal),
        at === null ? null : around(at),
      ]);
      const aroundView = nearby || (view.at === null ? { id, events: [] } : await around(view.at));
      if (controller !== state.controller) return;
      state.at = view.at;
      state.end = view.end;
      history.replaceState(null, "", sessionHref(id, view.at));
      setControls();
      status.replaceChildren();
      const title = view.projections.title;
      const heading = [typeof title === "string" && title ? title : id, view.summary.verdict, view.summary.format, view.end, view.summary.cwd, view.summary.archived];
      if (JSON.stringify(heading) !== state.headline) {
        state.headline = JSON.stringify(heading);
        headline.replaceChildren(el("h1", { class: "title" }, visible(heading[0])),
          el("p", { class: "note" }, `${view.summary.verdict} · format v${view.summary.format} · ${view.end} events · `,
            visible(view.summary.cwd || ""), view.summary.archived ? " · archived at " + view.summary.archived : ""));
      }
      const old = state.list ? state.list.items : [];
      const items = messageItems(view.messages, 0, old);
      placeItems(messageList, old, items);
      state.list = { at: view.at, count: view.messageCount, shown: view.messages.length, items, loading: false };
      messagesTitle.textContent = `Messages the model saw after seq ${view.at === null ? "–" : view.at} (${view.messageCount})`;
      showMore();
      showProjections(projections, projectionsShown, view);
      showCompactions();
      events.replaceChildren(el("h2", {}, "Raw events around this seq"), renderEvents(aroundView, view.at));
      document.body.dataset.renderedAt = String(view.at);
      performance.measure("view", { start: started, end: performance.now(), detail: { at: view.at } });
      showSteps();
    } catch (e) {
      if (e.name !== "AbortError") showError(status, e);
    }
  }

  async function loadSide() {
    try {
      const [marks, tokens, lineage] = await Promise.all([
        api(`/api/sessions/${encodeURIComponent(id)}/marks`),
        api(`/api/sessions/${encodeURIComponent(id)}/tokens`),
        api(`/api/sessions/${encodeURIComponent(id)}/tree`),
      ]);
      state.marksData = marks;
      state.compactionsShown = null;
      showCompactions();
      showSteps();
      state.marks = renderMarks(marks, go);
      marksHolder.replaceChildren(state.marks.node);
      state.plot = renderPlot(tokens.points, state.end, go);
      plot.replaceChildren(el("h2", {}, "Token usage (total tokens by seq)"), state.plot.node);
      tree.replaceChildren(el("h2", {}, "Fork tree"), el("ul", { class: "tree" }, lineage.lineage.map((entry) =>
        el("li", { "data-depth": entry.depth },
          "\u00a0".repeat(4 * (entry.depth - Math.min(0, ...lineage.lineage.map((e) => e.depth)))),
          entry.depth === 0 ? el("b", {}, visible(entry.id)) : sessionLink(entry.id),
          entry.parent !== null && entry.parent !== undefined ? ` (fork of ${visible(entry.parent)} after ${entry.seedLength} events)` : ""))));
      setControls();
    } catch (e) {
      showError(tree, e);
    }
  }

  function follow(on) {
    if (state.source) { state.source.close(); state.source = null; }
    liveLabel.textContent = "";
    if (!on) return;
    const source = state.source = new EventSource(`/api/sessions/${encodeURIComponent(id)}/follow?from=${state.end}`);
    liveLabel.textContent = "following";
    liveLabel.className = "live";
    let pending = false;
    source.addEventListener("event", (message) => {
      const { seq } = JSON.parse(message.data);
      state.end = Math.max(state.end, seq + 1);
      setControls();
      document.body.dataset.liveEnd = String(state.end);
      if (state.pinned && !pending) {
        pending = true;
        // Events of one commit arrive together: the view is drawn once, after the burst.
        setTimeout(() => { pending = false; show(state.end - 1); }, 30);
      }
    });
    source.addEventListener("error", (message) => {
      liveLabel.textContent = message.data ? "stopped: " + message.data : "reconnecting…";
      liveLabel.className = "note";
    });
  }

  // While the slider is dragged, the view follows once a frame (a newer move aborts an older fetch).
  let frame = null;
  range.addEventListener("input", () => {
    if (frame === null) frame = requestAnimationFrame(() => { frame = null; go(range.value); });
  });
  number.addEventListener("change", () => go(number.value));
  prev.addEventListener("click", () => go((state.at || 0) - 1));
  nextButton.addEventListener("click", () => go((state.at || 0) + 1));
  followBox.addEventListener("change", () => follow(followBox.checked));
  prevTurn.addEventListener("click", jump(false, true));
  prevStep.addEventListener("click", jump(false, false));
  nextStep.addEventListener("click", jump(true, false));
  nextTurn.addEventListener("click", jump(true, true));
  document.addEventListener("keydown", (e) => {
    if (e.target instanceof HTMLInputElement && e.target.type !== "range") return;
    if (e.key === "ArrowLeft" && e.altKey) go((state.at || 0) - 1);
    if (e.key === "ArrowRight" && e.altKey) go((state.at || 0) + 1);
  });
  // Links to a seq of this session move the view without reloading the page.
  main.addEventListener("click", (e) => {
    const link = e.target instanceof Element ? e.target.closest("a[data-seq]") : null;
    if (link) { e.preventDefault(); go(link.getAttribute("data-seq")); }
  });
  show(requestedAt).then(loadSide);
  // The test harness and the performance measure drive the view through this.
  window.sessionlogConsole = { go, show, state };
}

function route() {
  const path = location.pathname;
  if (path.startsWith("/s/")) {
    let id;
    try { id = decodeURIComponent(path.slice(3)); } catch { id = null; }
    if (id === null) { showError(main, "this address names no session"); return; }
    const at = new URLSearchParams(location.search).get("at");
    const seq = at !== null && /^\d+$/.test(at) ? Number(at) : null;
    session(id, seq);
  } else {
    listing();
  }
}

route();
