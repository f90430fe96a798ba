// The page of `carapace serve`: the sessions of a home, live, and one
// session's trace (the renderer the HTML export uses too: trace_view.js).
// Routes: #/ the list, #/session/ID its trace, #/session/ID/span/SPANID with
// that span's details open. Data arrives over HTTP (/api/...) and a WebSocket
// (/ws). Every id, name, message and body is hostile text: the DOM is built
// with createElement and textContent only.
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

  const state = {
    sessions: new Map(),  // id -> Row
    haveHello: false,
    feed: [],             // {type, session, message, at}, newest first
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
      list.replaceChildren(el("li", "hint", "Retries, failures and crashes show here as they happen."));
      return;
    }
    list.replaceChildren(...state.feed.map((f) => {
      const li = el("li", f.type);
      li.appendChild(el("span", "when", new Date(f.at).toLocaleTimeString()));
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
      return;
    }
    traces.replaceChildren(T.renderTrace(view.trace, {
      live: true, collapsed: view.collapsed, selected: view.selected,
      onSelect: (span) => {
        view.selected = span.span_id;
        history.pushState(null, "", sessionHash(view.id, span.span_id));
        showDetails(view, span);
      },
    }));
    // The span in the address, once it is there.
    if (view.selected && view.detailsFor !== view.selected) {
      const span = view.trace.spans.find((s) => s.span_id === view.selected);
      if (span) showDetails(view, span);
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
      view.trace = { session: view.id, spans: (m.spans || []).slice(), last_us: m.last_us || 0 };
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
    }
    renderSpans(view);
    // The open span changed (it closed, say): its details again.
    if (view.detailsFor) {
      const span = view.trace.spans.find((s) => s.span_id === view.detailsFor);
      if (span && JSON.stringify(span) !== view.detailsSpan) showDetails(view, span);
    }
  }

  async function openSession(id, spanId) {
    const view = { kind: "session", id: id, trace: null, collapsed: new Set(), selected: spanId || "", detailsFor: "",
                   watching: false, fromSocket: false, failed: false };
    state.view = view;
    renderTraceShell(view);
    try {
      const data = await api("/api/sessions/" + encodeURIComponent(id));
      if (state.view !== view) return;
      if (data.session) state.sessions.set(data.session.id, data.session);
      if (!view.fromSocket) view.trace = { session: id, spans: data.spans || [], last_us: data.last_us || 0 };
      renderTraceHead(view);
      renderSpans(view);
      view.watching = true;
      send({ type: "watch", session: id });
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

  // ---- routing ----
  function parseHash() {
    const parts = location.hash.replace(/^#\/?/, "").split("/").filter((p) => p.length);
    const dec = (p) => { try { return decodeURIComponent(p); } catch (e) { return p; } };
    if (parts[0] === "session" && parts[1]) {
      return { kind: "session", id: dec(parts[1]), span: parts[2] === "span" && parts[3] ? dec(parts[3]) : "" };
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
      // The same trace: only the span changes.
      view.selected = want.span;
      for (const r of document.querySelectorAll(".row.selected")) r.classList.remove("selected");
      if (want.span) {
        const row = document.querySelector('.row[data-span-id="' + classSafe(want.span) + '"]');
        if (row) row.classList.add("selected");
        const span = view.trace && view.trace.spans.find((s) => s.span_id === want.span);
        if (span) showDetails(view, span);
      }
      return;
    }
    leave(view);
    clearProblem();
    if (want.kind === "session") {
      openSession(want.id, want.span);
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
      renderRows();
      if (view.kind === "session") renderTraceHead(view);
    } else if (m.type === "session" && m.session) {
      state.sessions.set(m.session.id, m.session);
      renderRows();
      if (view.kind === "session" && view.id === m.session.id) renderTraceHead(view);
    } else if (m.type === "spans") {
      if (view.kind === "session" && view.id === m.session) applySpans(view, m);
    } else if (m.type === "status" || m.type === "error") {
      state.feed.unshift({ type: m.type, session: m.session || "", message: String(m.message || ""), at: Date.now() });
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
