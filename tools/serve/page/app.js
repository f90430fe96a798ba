// The page of `carapace serve`: the sessions of a home, live, and one
// session's trace (the renderer the HTML export uses too: trace_view.js).
// Routes: #/ the list, #/session/ID its trace, #/session/ID/span/SPANID with
// that span's details open, #/session/ID/events its events a page at a time.
// A trace's filter rides after a `?` (q=TEXT&kind=KIND&full=1), and so does
// the events' (type=T&q=TEXT&from=SEQ). Data arrives over HTTP (/api/...) and
// a WebSocket (/ws). Every id, name, message and body is hostile text: the
// DOM is built with createElement and textContent only.
//
// The token: the URL carapace serve prints ends in #token=T (a fragment,
// which the browser never sends: no log has it), optionally followed by
// &ROUTE (#token=T&/session/ID). The page takes it out of the address and
// keeps it in this tab's sessionStorage (its origin's alone, port included;
// a reload keeps it), and sends it as `Authorization: Bearer T` to the API
// and as the WebSocket subprotocol `carapace.token.T`. No cookie: cookies
// are shared by every port of a host, so any server on 127.0.0.1 would get
// it.
"use strict";
(function () {
  const T = CarapaceTrace;
  const el = T.el;
  const TOKEN_KEY = "carapace_token";
  const token = (function () {
    const m = /^#token=([^&]*)(?:&(.*))?$/.exec(location.hash);
    if (!m) {
      try { return sessionStorage.getItem(TOKEN_KEY) || ""; } catch (e) { return ""; }
    }
    let t = m[1];
    try { t = decodeURIComponent(t); } catch (e) { /* as it is */ }
    try { sessionStorage.setItem(TOKEN_KEY, t); } catch (e) { /* this load keeps it in memory */ }
    const route = m[2] ? "#" + m[2].replace(/^#/, "") : "#/";
    history.replaceState(null, "", location.pathname + location.search + route);
    return t;
  })();
  const FEED_MAX = 50;
  const EVENTS_PAGE = 200;     // events asked for at a time
  const EVENTS_ROUNDS = 20;    // requests one look makes at most while a filter finds too few

  const state = {
    sessions: new Map(),  // id -> Row
    haveHello: false,
    feed: [],             // {type, session, message, at_us}, newest first
    view: { kind: "none" },
    ws: null,
    backoff: 500,
    connectedOnce: false,
  };

  // ---- helpers ----
  function authHeaders() {
    return token ? { Accept: "application/json", Authorization: "Bearer " + token } : { Accept: "application/json" };
  }
  function sessionHash(id, spanId) {
    return "#/session/" + encodeURIComponent(id) + (spanId ? "/span/" + encodeURIComponent(spanId) : "");
  }
  function eventsHash(id) { return "#/session/" + encodeURIComponent(id) + "/events"; }
  // "?a=1&b=2" of the pairs that have a value, or "".
  function hashQuery(pairs) {
    const p = new URLSearchParams();
    for (const [k, v] of pairs) if (v) p.set(k, String(v));
    const q = p.toString();
    return q ? "?" + q : "";
  }
  function traceQuery(view) {
    const f = view.filter;
    return hashQuery([["q", f.q], ["kind", f.kind], ["full", f.full ? "1" : ""]]);
  }
  function classSafe(text) { return String(text || "").replace(/[^a-z0-9_-]/gi, ""); }
  function num(n) { return Number(n || 0).toLocaleString(); }
  function cost(usd) { return "$" + Number(usd || 0).toFixed(4); }
  function localTime(us) { return us ? new Date(us / 1000).toLocaleString() : "—"; }
  function link(href, text, cls) {
    const a = el("a", cls, text);
    a.href = href;
    return a;
  }
  // Beside a countdown, why it waits (the countdown already says how long).
  function liveText(live) {
    return live.retry_at_us && live.reason ? live.reason : String(live.message || "");
  }
  function countdownText(retryAtUs) {
    const ms = retryAtUs / 1000 - Date.now();
    return ms > 0 ? "retrying in " + Math.ceil(ms / 1000) + " s…" : "retrying now…";
  }
  function countdown(retryAtUs) {
    const c = el("span", "countdown", countdownText(retryAtUs));
    c.dataset.retryAt = String(retryAtUs);
    return c;
  }

  // ---- problems: an API failure's error and hint, on the page ----
  function showProblem(problem) {
    const box = document.getElementById("problem");
    box.replaceChildren(el("div", "problem-error", problem.error || "something went wrong"));
    if (problem.hint) box.appendChild(el("div", "problem-hint", problem.hint));
    box.hidden = false;
  }
  function clearProblem() {
    const box = document.getElementById("problem");
    box.hidden = true;
    box.replaceChildren();
  }
  function problemOf(body, status) {
    if (body && typeof body.error === "object" && body.error) {
      return { error: String(body.error.message || "HTTP " + status), hint: String(body.error.hint || body.hint || "") };
    }
    return { error: body && body.error ? String(body.error) : "HTTP " + status, hint: body && body.hint ? String(body.hint) : "" };
  }

  async function api(path) {
    let res;
    try {
      res = await fetch(path, { headers: authHeaders(), cache: "no-store", credentials: "omit" });
    } catch (e) {
      throw { error: "carapace serve did not answer " + path, hint: "Is it still running? The page reconnects when it is back." };
    }
    let body = null;
    try { body = await res.json(); } catch (e) { body = null; }
    if (!res.ok || !body || body.success !== true) throw problemOf(body, res.status);
    return body.data;
  }

  // ---- the connection indicator ----
  function setConn(what) {
    const c = document.getElementById("conn");
    c.className = "conn " + what;
    c.textContent = what === "connected" ? "connected" : what === "reconnecting" ? "reconnecting…" : "connecting…";
  }

  // ---- the sessions list ----
  const COLUMNS = ["Session", "Status", "Turns", "Events", "Tokens in / out", "Cost", "Provider / model", "Updated", "Live"];

  function sessionRow(row) {
    const tr = el("tr", "session");
    tr.setAttribute("data-session", row.id);
    const id = el("td", "id");
    id.appendChild(link(sessionHash(row.id), row.id));
    if (row.parent_session) {
      const fork = el("div", "fork", "fork of ");
      fork.appendChild(link(sessionHash(row.parent_session), row.parent_session));
      fork.appendChild(document.createTextNode(" at turn " + (row.parent_turn || 0)));
      id.appendChild(fork);
    }
    tr.appendChild(id);
    const status = el("td", "status-cell");
    status.appendChild(el("span", "badge " + classSafe(row.status), row.status));
    tr.appendChild(status);
    tr.appendChild(el("td", "num turns", num(row.turns)));
    tr.appendChild(el("td", "num events", num(row.last_seq)));
    tr.appendChild(el("td", "num tokens", num(row.tokens_in) + " / " + num(row.tokens_out)));
    tr.appendChild(el("td", "num cost", cost(row.cost_usd)));
    tr.appendChild(el("td", "model", (row.provider || "—") + " / " + (row.model || "—")));
    tr.appendChild(el("td", "updated", localTime(row.updated_us)));
    const live = el("td", "live");
    if (row.live && (row.live.message || row.live.retry_at_us)) {
      if (row.live.retry_at_us) live.appendChild(countdown(row.live.retry_at_us));
      live.appendChild(el("span", "live-message", liveText(row.live)));
    } else if (row.last_error) {
      live.appendChild(el("span", "last-error", row.last_error));
    }
    tr.appendChild(live);
    tr.addEventListener("click", (ev) => {
      if (ev.target.closest("a")) return;  // a link goes where it says
      location.hash = sessionHash(row.id);
    });
    return tr;
  }

  function sortedSessions() {
    return [...state.sessions.values()].sort((a, b) => (b.updated_us || 0) - (a.updated_us || 0) || String(a.id).localeCompare(String(b.id)));
  }

  function renderRows() {
    const body = document.getElementById("rows");
    if (!body) return;
    const rows = sortedSessions();
    if (!rows.length) {
      const tr = el("tr");
      const td = el("td", "empty", state.haveHello ? "No sessions in this home yet." : "Loading…");
      td.colSpan = COLUMNS.length;
      tr.appendChild(td);
      body.replaceChildren(tr);
      return;
    }
    body.replaceChildren(...rows.map(sessionRow));
  }

  function renderFeed() {
    const list = document.getElementById("feed");
    if (!list) return;
    if (!state.feed.length) {
      list.replaceChildren(el("li", "hint", "No retries, failures or crashes in this home yet; they show here as they happen."));
      return;
    }
    list.replaceChildren(...state.feed.map((f) => {
      const li = el("li", f.type);
      li.appendChild(el("span", "when", f.at_us ? new Date(f.at_us / 1000).toLocaleString() : ""));
      if (f.session) li.appendChild(link(sessionHash(f.session), f.session, "sid"));
      li.appendChild(el("span", "msg", f.message));
      return li;
    }));
  }

  function renderList() {
    document.getElementById("where").textContent = "sessions";
    document.title = "Carapace: sessions";
    const main = document.getElementById("app");
    const layout = el("div", "layout");
    const list = el("div", "list");
    list.appendChild(el("h2", "", "Sessions"));
    const table = el("table", "sessions");
    const head = el("tr");
    for (const c of COLUMNS) head.appendChild(el("th", "", c));
    const thead = el("thead");
    thead.appendChild(head);
    table.appendChild(thead);
    const body = el("tbody");
    body.id = "rows";
    table.appendChild(body);
    list.appendChild(table);
    layout.appendChild(list);
    const feed = el("aside", "feed");
    feed.appendChild(el("h2", "", "Activity"));
    const ol = el("ol");
    ol.id = "feed";
    feed.appendChild(ol);
    layout.appendChild(feed);
    main.replaceChildren(layout);
    renderRows();
    renderFeed();
  }

  // ---- one session's trace ----
  function renderTraceHead(view) {
    const head = document.getElementById("trace-head");
    if (!head) return;
    head.replaceChildren(link("#/", "← all sessions"));
    const row = state.sessions.get(view.id);
    head.appendChild(el("strong", "", "session " + view.id));
    const tabs = el("span", "tabs");
    tabs.appendChild(view.kind === "events" ? link(sessionHash(view.id), "trace", "tab") : el("span", "tab current", "trace"));
    tabs.appendChild(view.kind === "events" ? el("span", "tab current", "events") : link(eventsHash(view.id), "events", "tab"));
    head.appendChild(tabs);
    if (row) {
      head.appendChild(el("span", "badge " + classSafe(row.status), row.status));
      head.appendChild(el("span", "meta", num(row.turns) + " turns · " + num(row.last_seq) + " events · " + num(row.tokens_in) + " / " +
                                          num(row.tokens_out) + " tokens · " + cost(row.cost_usd)));
      if (row.parent_session) {
        const fork = el("span", "fork", "fork of ");
        fork.appendChild(link(sessionHash(row.parent_session), row.parent_session));
        head.appendChild(fork);
      }
      if (row.live && row.live.retry_at_us) head.appendChild(countdown(row.live.retry_at_us));
      if (row.live && row.live.message) head.appendChild(el("span", "live-message", liveText(row.live)));
    }
  }

  function renderTraceShell(view) {
    document.getElementById("where").textContent = "session " + view.id;
    document.title = "Carapace: session " + view.id;
    const main = document.getElementById("app");
    const head = el("div", "trace-head");
    head.id = "trace-head";
    const layout = el("div", "trace-layout");
    const traces = el("div");
    traces.id = "traces";
    traces.appendChild(el("p", "hint", "Loading the trace…"));
    const details = el("aside");
    details.id = "details";
    details.appendChild(el("p", "hint", "Click a span to see its details."));
    layout.appendChild(traces);
    layout.appendChild(details);
    main.replaceChildren(head, layout);
    renderTraceHead(view);
  }

  function renderSpans(view) {
    const traces = document.getElementById("traces");
    if (!traces || !view.trace) return;
    if (!view.trace.spans.length) {
      traces.replaceChildren(el("p", "hint", "No spans yet."));
      view.tv = null;
      return;
    }
    if (!view.tv) {
      view.tv = T.traceView({
        live: true, state: view.filter, selected: view.selected,
        onSelect: (span) => {
          view.selected = span.span_id;
          history.pushState(null, "", sessionHash(view.id, span.span_id) + traceQuery(view));
          showDetails(view, span);
        },
        onState: () => history.replaceState(null, "", sessionHash(view.id, view.selected) + traceQuery(view)),
      });
      traces.replaceChildren(view.tv.element);
    }
    view.tv.setTrace(view.trace);
    // The span in the address, once it is there.
    if (view.selected && view.detailsFor !== view.selected) {
      const span = view.trace.spans.find((s) => s.span_id === view.selected);
      if (span) {
        view.tv.reveal(span.span_id);
        showDetails(view, span);
      }
    }
  }

  function moreOf(data) {
    const bodies = (data.bodies || []).map((b) => ({
      title: b.which + " body" + (b.bytes !== undefined ? " (" + num(b.bytes) + " bytes)" : ""),
      json: b.json === null ? undefined : b.json,
      text: b.text,
      note: b.error ? String(b.error) : undefined,
    }));
    return { content: data.content || null, bodies: bodies };
  }

  async function showDetails(view, span) {
    const details = document.getElementById("details");
    if (!details) return;
    view.detailsFor = span.span_id;
    view.detailsSpan = JSON.stringify(span);
    T.renderDetails(details, span, { note: "Loading the span's content and bodies…" });
    try {
      const data = await api("/api/sessions/" + encodeURIComponent(view.id) + "/spans/" + encodeURIComponent(span.span_id));
      if (state.view !== view || view.detailsFor !== span.span_id) return;
      const more = moreOf(data);
      if (!more.content && !more.bodies.length) more.note = "No content or bodies recorded for this span.";
      T.renderDetails(details, data.span || span, more);
      details.dataset.loaded = span.span_id;
    } catch (problem) {
      if (state.view !== view || view.detailsFor !== span.span_id) return;
      T.renderDetails(details, span, { note: "Content not loaded: " + problem.error });
      showProblem(problem);
    }
  }

  function applySpans(view, m) {
    if (m.reset || !view.trace) {
      if (!m.reset) return;  // a change before any base: the reset that follows the watch carries it
      view.trace = { session: view.id, spans: (m.spans || []).slice(), last_us: m.last_us || 0, skeleton: m.skeleton,
                     complete: true };
      view.fromSocket = true;
    } else {
      const spans = view.trace.spans;
      for (const s of m.spans || []) {
        const at = spans.findIndex((x) => x.span_id === s.span_id);
        if (at >= 0) { spans[at] = s; continue; }
        const after = spans.findIndex((x) => x.open_seq > s.open_seq);
        if (after < 0) spans.push(s); else spans.splice(after, 0, s);
      }
      view.trace.last_us = Math.max(view.trace.last_us || 0, m.last_us || 0);
      if (m.skeleton) view.trace.skeleton = m.skeleton;
    }
    renderSpans(view);
    // The open span changed (it closed, say): its details again.
    if (view.detailsFor) {
      const span = view.trace.spans.find((s) => s.span_id === view.detailsFor);
      if (span && JSON.stringify(span) !== view.detailsSpan) showDetails(view, span);
    }
  }

  function filterOf(params) {
    return { q: params.get("q") || "", kind: params.get("kind") || "", full: params.get("full") === "1",
             collapsed: new Set(), expanded: new Set() };
  }

  async function openSession(id, spanId, params) {
    const view = { kind: "session", id: id, trace: null, filter: filterOf(params || new URLSearchParams()), tv: null,
                   selected: spanId || "", detailsFor: "", watching: false, fromSocket: false, failed: false };
    state.view = view;
    renderTraceShell(view);
    try {
      const data = await api("/api/sessions/" + encodeURIComponent(id));
      if (state.view !== view) return;
      if (data.session) state.sessions.set(data.session.id, data.session);
      if (!view.fromSocket) {
        view.trace = { session: id, spans: data.spans || [], last_us: data.last_us || 0, skeleton: data.skeleton,
                       complete: data.complete !== false };
      }
      renderTraceHead(view);
      renderSpans(view);
      view.watching = true;
      send({ type: "watch", session: id, reset: false });
      // The skeleton came with the spans it shows; every span follows (to open a fold, to filter).
      if (!view.trace.complete) {
        const every = await api("/api/sessions/" + encodeURIComponent(id) + "?spans=all");
        if (state.view !== view || view.trace.complete) return;
        view.trace = { session: id, spans: every.spans || [], last_us: Math.max(view.trace.last_us || 0, every.last_us || 0),
                       skeleton: every.skeleton, complete: true };
        renderSpans(view);
      }
    } catch (problem) {
      if (state.view !== view) return;
      view.failed = true;
      showProblem(problem);
      const traces = document.getElementById("traces");
      if (traces) {
        traces.replaceChildren(el("p", "not-found", "Session " + id + " could not be opened: " + problem.error));
        if (problem.hint) traces.appendChild(el("p", "hint", problem.hint));
      }
    }
  }

  // ---- one session's events, as the log holds them ----
  function eventsQuery(view) {
    return hashQuery([["type", view.type], ["q", view.q], ["from", view.from > 1 ? view.from : ""]]);
  }

  function eventTime(us) {
    if (!us) return "";
    const d = new Date(us / 1000);
    return d.toLocaleTimeString() + "." + String(d.getMilliseconds()).padStart(3, "0");
  }

  function eventRow(view, e) {
    const li = el("li", "event-row");
    li.setAttribute("data-seq", String(e.seq));
    li.setAttribute("data-type", String(e.type || ""));
    const head = el("div", "event-head");
    head.appendChild(el("span", "seq", "#" + e.seq));
    head.appendChild(el("span", "when", eventTime(e.ts_us)));
    head.appendChild(el("span", "type " + classSafe(String(e.type || "").replace(/\./g, "-")), e.type));
    const data = e.data !== undefined ? e.data : e.error;
    const preview = typeof data === "string" ? data : JSON.stringify(data === undefined ? {} : data);
    head.appendChild(el("span", "preview", preview.length > 240 ? preview.slice(0, 240) + "…" : preview));
    li.appendChild(head);
    const open = () => {
      const pre = el("pre", "payload", JSON.stringify(e, null, 2));
      li.appendChild(pre);
      li.classList.add("open");
    };
    head.addEventListener("click", () => {
      const pre = li.querySelector("pre.payload");
      if (pre) { pre.remove(); li.classList.remove("open"); view.open.delete(e.seq); } else { open(); view.open.add(e.seq); }
    });
    if (view.open.has(e.seq)) open();
    return li;
  }

  function renderEventsShell(view) {
    document.getElementById("where").textContent = "session " + view.id + ": events";
    document.title = "Carapace: events of " + view.id;
    const main = document.getElementById("app");
    const head = el("div", "trace-head");
    head.id = "trace-head";
    const tools = el("div", "events-tools");
    const type = el("select", "filter-type");
    type.setAttribute("aria-label", "only events of this type");
    const text = el("input", "filter-text");
    text.type = "search";
    text.placeholder = "filter: text in the event…";
    text.value = view.q;
    text.setAttribute("aria-label", "only events holding this text");
    const from = el("input", "filter-from");
    from.type = "number";
    from.min = "1";
    from.placeholder = "from seq";
    from.value = view.from > 1 ? String(view.from) : "";
    from.setAttribute("aria-label", "from this seq");
    const count = el("span", "events-count");
    count.id = "events-count";
    tools.append(type, text, from, count);
    const list = el("ol", "events");
    list.id = "events";
    const more = el("button", "more", "more");
    more.id = "events-more";
    more.hidden = true;
    main.replaceChildren(head, tools, list, more);
    renderTraceHead(view);
    fillTypes(view, type, []);
    const again = () => {
      history.replaceState(null, "", eventsHash(view.id) + eventsQuery(view));
      loadEvents(view, true);
    };
    let typing = 0;
    text.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => { view.q = text.value; again(); }, 250);
    });
    type.addEventListener("change", () => { view.type = type.value; again(); });
    from.addEventListener("change", () => { view.from = Math.max(1, Math.floor(Number(from.value) || 1)); again(); });
    more.addEventListener("click", () => loadEvents(view, false));
    view.typeSelect = type;
  }

  function fillTypes(view, select, types) {
    const all = [...new Set([...types, ...(view.type ? [view.type] : [])])];
    if (select.dataset.types === all.join(",")) return;
    select.dataset.types = all.join(",");
    select.replaceChildren(...["", ...all].map((t) => {
      const o = el("option", "", t ? "type: " + t : "every type");
      o.value = t;
      return o;
    }));
    select.value = view.type;
  }

  // The next page of events (or, `reset`, the first): asks again while a
  // filter finds fewer than a page and the log goes on, a few times at most.
  async function loadEvents(view, reset) {
    const gen = reset ? ++view.gen : view.gen;
    const list = document.getElementById("events");
    const count = document.getElementById("events-count");
    const more = document.getElementById("events-more");
    if (!list) return;
    if (reset) {
      view.shown = 0;
      view.cursor = view.from;
      view.lastSeq = 0;
      list.replaceChildren(el("li", "hint", "Loading the events…"));
      view.started = performance.now();
    }
    more.disabled = true;
    let got = 0, rounds = 0, data = null;
    try {
      do {
        const query = hashQuery([["from", view.cursor], ["limit", EVENTS_PAGE - got], ["type", view.type], ["q", view.q]]);
        data = await api("/api/sessions/" + encodeURIComponent(view.id) + "/events" + query);
        if (state.view !== view || gen !== view.gen) return;
        if (view.shown === 0 && got === 0) list.replaceChildren();
        list.append(...data.events.map((e) => eventRow(view, e)));
        got += data.events.length;
        view.shown += data.events.length;
        view.lastSeq = data.last_seq;
        const lastEvent = data.events.length ? data.events[data.events.length - 1].seq : 0;
        view.cursor = data.next !== null && data.next !== undefined ? data.next : Math.max(view.cursor, lastEvent + 1, data.last_seq + 1);
        view.more = data.next !== null && data.next !== undefined;
        if (view.typeSelect) fillTypes(view, view.typeSelect, data.types || []);
        if (reset && got && !list.dataset.firstMs) list.dataset.firstMs = String(Math.round(performance.now() - view.started));
      } while (view.more && got < EVENTS_PAGE && ++rounds < EVENTS_ROUNDS);
    } catch (problem) {
      if (state.view !== view || gen !== view.gen) return;
      showProblem(problem);
      list.replaceChildren(el("p", "not-found", "The events of " + view.id + " could not be read: " + problem.error));
      if (problem.hint) list.appendChild(el("p", "hint", problem.hint));
      more.hidden = true;
      return;
    }
    if (view.shown === 0) list.replaceChildren(el("li", "hint", view.more ? "No match yet." : "No event matches."));
    const filtered = view.type || view.q;
    count.textContent = view.shown.toLocaleString() + (filtered ? " matching" : "") + " events shown, " +
      (view.more ? "read up to seq " + (view.cursor - 1).toLocaleString() + " of " : "to the last, seq ") +
      view.lastSeq.toLocaleString();
    more.hidden = false;
    more.disabled = false;
    more.textContent = view.more ? "more" : "newer events?";
    list.dataset.loaded = String(view.shown);
  }

  function openEvents(id, params) {
    const view = { kind: "events", id: id, type: params.get("type") || "", q: params.get("q") || "",
                   from: Math.max(1, Math.floor(Number(params.get("from")) || 1)), open: new Set(), gen: 0,
                   shown: 0, cursor: 1, more: false, lastSeq: 0, typeSelect: null };
    state.view = view;
    renderEventsShell(view);
    loadEvents(view, true);
  }

  // ---- routing ----
  function parseHash() {
    const raw = location.hash.replace(/^#\/?/, "");
    const mark = raw.indexOf("?");
    const params = new URLSearchParams(mark >= 0 ? raw.slice(mark + 1) : "");
    const parts = (mark >= 0 ? raw.slice(0, mark) : raw).split("/").filter((p) => p.length);
    const dec = (p) => { try { return decodeURIComponent(p); } catch (e) { return p; } };
    if (parts[0] === "session" && parts[1] && parts[2] === "events") return { kind: "events", id: dec(parts[1]), params };
    if (parts[0] === "session" && parts[1]) {
      return { kind: "session", id: dec(parts[1]), span: parts[2] === "span" && parts[3] ? dec(parts[3]) : "", params };
    }
    return { kind: "list" };
  }

  function leave(view) {
    if (view.kind === "session" && view.watching) send({ type: "unwatch", session: view.id });
  }

  function route() {
    const want = parseHash();
    const view = state.view;
    if (want.kind === "session" && view.kind === "session" && view.id === want.id) {
      // The same trace: the span, or the filter, changes.
      view.selected = want.span;
      const f = filterOf(want.params);
      if (f.q !== view.filter.q || f.kind !== view.filter.kind || f.full !== view.filter.full) {
        Object.assign(view.filter, { q: f.q, kind: f.kind, full: f.full });
        if (view.tv) { view.tv.element.remove(); view.tv = null; renderSpans(view); }
      }
      for (const r of document.querySelectorAll(".row.selected")) r.classList.remove("selected");
      if (want.span) {
        const span = view.trace && view.trace.spans.find((s) => s.span_id === want.span);
        if (span) {
          if (view.tv) view.tv.reveal(span.span_id);
          showDetails(view, span);
        }
      }
      return;
    }
    if (want.kind === "events" && view.kind === "events" && view.id === want.id) {
      const type = want.params.get("type") || "", q = want.params.get("q") || "";
      const from = Math.max(1, Math.floor(Number(want.params.get("from")) || 1));
      if (type === view.type && q === view.q && from === view.from) return;
      openEvents(want.id, want.params);
      return;
    }
    leave(view);
    clearProblem();
    if (want.kind === "session") {
      openSession(want.id, want.span, want.params);
    } else if (want.kind === "events") {
      openEvents(want.id, want.params);
    } else {
      state.view = { kind: "list" };
      renderList();
    }
  }

  // ---- the WebSocket ----
  function send(message) {
    if (state.ws && state.ws.readyState === WebSocket.OPEN) state.ws.send(JSON.stringify(message));
  }

  function onMessage(m) {
    const view = state.view;
    if (m.type === "hello") {
      state.haveHello = true;
      state.sessions = new Map((m.sessions || []).map((r) => [r.id, r]));
      if (Array.isArray(m.feed)) {
        state.feed = m.feed.slice(0, FEED_MAX).map((f) => ({ type: String(f.type || ""), session: String(f.session || ""),
                                                             message: String(f.message || ""), at_us: Number(f.at_us) || 0 }));
        renderFeed();
      }
      renderRows();
      if (view.kind === "session" || view.kind === "events") renderTraceHead(view);
    } else if (m.type === "session" && m.session) {
      state.sessions.set(m.session.id, m.session);
      renderRows();
      if (view.kind === "session" && view.id === m.session.id) renderTraceHead(view);
    } else if (m.type === "spans") {
      if (view.kind === "session" && view.id === m.session) applySpans(view, m);
    } else if (m.type === "status" || m.type === "error") {
      state.feed.unshift({ type: m.type, session: String(m.session || ""), message: String(m.message || ""),
                           at_us: Number(m.at_us) || Date.now() * 1000 });
      if (state.feed.length > FEED_MAX) state.feed.length = FEED_MAX;
      const row = m.session && state.sessions.get(m.session);
      if (row && m.type === "status") {
        row.live = { message: String(m.message || ""), reason: String(m.reason || ""), retry_at_us: m.retry_at_us || 0 };
        renderRows();
        if (view.kind === "session" && view.id === m.session) renderTraceHead(view);
      }
      renderFeed();
    }
  }

  function connect() {
    const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
    let ws;
    try {
      ws = new WebSocket(url, token ? ["carapace", "carapace.token." + token] : ["carapace"]);
    } catch (e) {
      retry();
      return;
    }
    state.ws = ws;
    ws.addEventListener("open", () => {
      state.backoff = 500;
      state.connectedOnce = true;
      setConn("connected");
      const view = state.view;
      if (view.kind === "session" && view.watching) send({ type: "watch", session: view.id });
      else if (view.kind === "session" && view.failed) openSession(view.id, view.selected);  // its loading failed: again
    });
    ws.addEventListener("message", (ev) => {
      let m;
      try { m = JSON.parse(ev.data); } catch (e) { return; }
      if (m && typeof m === "object") onMessage(m);
    });
    ws.addEventListener("close", () => {
      if (state.ws !== ws) return;
      state.ws = null;
      retry();
    });
  }

  function retry() {
    setConn(state.connectedOnce ? "reconnecting" : "connecting");
    const wait = state.backoff;
    state.backoff = Math.min(10000, state.backoff * 2);
    setTimeout(connect, wait);
  }

  // ---- start ----
  setInterval(() => {
    for (const c of document.querySelectorAll(".countdown")) c.textContent = countdownText(Number(c.dataset.retryAt));
  }, 1000);
  window.addEventListener("hashchange", route);
  window.addEventListener("popstate", route);
  route();
  connect();
  api("/api/sessions").then((rows) => {
    if (state.haveHello) return;  // the socket's list is newer
    state.sessions = new Map((rows || []).map((r) => [r.id, r]));
    renderRows();
  }, (problem) => showProblem(problem));
})();
