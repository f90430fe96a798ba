// The page of `carapace serve`: the sessions of a home, live, and one
// session's trace (the renderer the HTML export uses too: trace_view.js).
// A host (`/api/status` says "mode": "host") also takes writes: the list has
// a New session form and the requests waiting for a person; a session's view
// has Stop / Resume / Fork, its approval cards, and a chat (the conversation
// from the events API, the answer streaming in from the socket's `delta`
// messages, a box to send a message). A read-only server shows none of them.
// The schedules view (#/schedules) lists the home's schedules with their
// last runs; on a host it has a New schedule form and each schedule's Pause /
// Resume, Run now and Remove.
// Routes: #/ the list, #/schedules the schedules, #/session/ID its trace,
// #/session/ID/span/SPANID with that span's details open,
// #/session/ID/events its events a page at a time.
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
    mode: "",             // "host" or "read-only" (/api/status); "" until known: no write control shown
    modeNote: "",         // why it is read-only, when a write said so
    approvals: [],        // every open request of the home (host mode): the list's "waiting for you"
    approvalsLoading: false, approvalsAgain: false, approvalsTimer: 0,
    fresh: new Set(),     // sessions this page just started or forked: their row may lag behind the answer
    schedules: [],        // GET /api/schedules, while the schedules view is open
    schedulesLoaded: false, schedulesLoading: false, schedulesAgain: false, schedulesTimer: 0,
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

  // A write of the host's API: a JSON object body; the answer's data, or
  // throws {error, hint, status}. A server that says it is read-only (403 or
  // 405 naming it) turns the page's write controls off.
  async function apiPost(path, body) {
    let res;
    try {
      res = await fetch(path, { method: "POST", headers: Object.assign(authHeaders(), { "Content-Type": "application/json" }),
                                body: JSON.stringify(body || {}), cache: "no-store", credentials: "omit" });
    } catch (e) {
      throw { error: "carapace serve did not answer POST " + path, hint: "Is it still running? The page reconnects when it is back.",
              status: 0 };
    }
    let answer = null;
    try { answer = await res.json(); } catch (e) { answer = null; }
    if (!res.ok || !answer || answer.success !== true) {
      const problem = problemOf(answer, res.status);
      problem.status = res.status;
      if ((res.status === 403 || res.status === 405) && /read-only/.test(problem.error)) setMode("read-only", problem.error);
      throw problem;
    }
    return answer.data;
  }
  function sessionApi(id, what) {
    return "/api/sessions/" + encodeURIComponent(id) + (what ? "/" + what : "");
  }
  // "5 s", "3 min", "2 h", "4 d" (rounded down).
  function spanText(us) {
    const s = Math.max(0, Math.floor(us / 1e6));
    if (s < 60) return s + " s";
    if (s < 3600) return Math.floor(s / 60) + " min";
    if (s < 86400) return Math.floor(s / 3600) + " h";
    return Math.floor(s / 86400) + " d";
  }
  function ageText(requestedUs) { return requestedUs ? "asked " + spanText(Date.now() * 1000 - requestedUs) + " ago" : "asked —"; }
  function expiryText(expiresUs) {
    if (!expiresUs) return "never expires";
    const left = expiresUs - Date.now() * 1000;
    return left > 0 ? "expires in " + spanText(left) : "expired " + spanText(-left) + " ago";
  }
  // A button that is off while its request is under way (and while `enabled` says no).
  function busy(button, on) {
    button.dataset.busy = on ? "1" : "";
    button.classList.toggle("busy", !!on);
  }
  function isBusy(button) { return button.dataset.busy === "1"; }

  // ---- the server's mode: a host takes writes, a read-only one none ----
  function setMode(mode, note) {
    const changed = mode !== state.mode || (note || "") !== state.modeNote;
    state.mode = mode;
    state.modeNote = note || "";
    const badge = document.getElementById("mode");
    if (badge) {
      badge.hidden = mode !== "read-only";
      badge.textContent = mode === "read-only" ? (state.modeNote || "read-only: another process writes this home") : "";
    }
    if (!changed) return;
    const view = state.view;
    if (view.kind === "list") {
      renderHostList();
      if (mode === "host") loadApprovalsAll();
    } else if (view.kind === "session") {
      renderHostBar(view);
      renderChatBox(view);
      if (mode === "host" && view.loaded) loadApprovals(view); else renderApprovals(view);
    } else if (view.kind === "schedules") {
      renderScheduleForm();
      renderSchedules();
    }
  }
  async function loadStatus() {
    try {
      const status = await api("/api/status");
      setMode(status && status.mode === "host" ? "host" : "read-only", "");
    } catch (problem) {
      /* the page's other requests show why */
    }
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
    const tokens = el("td", "num tokens", num(row.tokens_in) + " / " + num(row.tokens_out));
    if (row.cache_read > 0) tokens.appendChild(cacheNote(row, "cached"));
    tr.appendChild(tokens);
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
    const waiting = el("section", "waiting");
    waiting.id = "waiting";
    waiting.dataset.test = "waiting";
    waiting.hidden = true;
    const host = el("section", "new-session");
    host.id = "new-session";
    host.hidden = true;
    list.append(waiting, host);
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
    renderHostList();
    if (state.mode === "host") loadApprovalsAll();
  }

  // ---- the list's host part: a New session form, and what waits for a person ----
  function numberField(cls, test, placeholder, label) {
    const input = el("input", cls);
    input.type = "number";
    input.min = "1";
    input.step = "1";
    input.placeholder = placeholder;
    input.dataset.test = test;
    input.setAttribute("aria-label", label);
    return input;
  }
  function textField(cls, test, placeholder, label) {
    const input = el("input", cls);
    input.type = "text";
    input.placeholder = placeholder;
    input.dataset.test = test;
    input.setAttribute("aria-label", label);
    input.autocomplete = "off";
    input.spellcheck = false;
    return input;
  }
  // A whole number from a field, or undefined when it is empty; throws a problem when it is not one.
  function wholeNumber(input, what) {
    const raw = input.value.trim();
    if (!raw) return undefined;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 0) throw { error: what + " must be a whole number, not '" + raw + "'", hint: "" };
    return n;
  }

  function renderHostList() {
    const box = document.getElementById("new-session");
    if (!box) return;
    renderWaiting();
    if (state.mode !== "host") {
      box.hidden = true;
      box.replaceChildren();
      return;
    }
    if (box.dataset.built === "1") { box.hidden = false; return; }
    box.dataset.built = "1";
    box.hidden = false;
    box.appendChild(el("h2", "", "New session"));
    const task = el("textarea", "new-task");
    task.rows = 3;
    task.placeholder = "The task: what should the agent do? (Ctrl+Enter starts it)";
    task.dataset.test = "new-task";
    task.setAttribute("aria-label", "the task");
    const line = el("div", "new-line");
    const id = textField("new-id", "new-id", "id (optional)", "the session's id");
    const turns = numberField("new-turns", "new-turns", "max turns", "the most turns it may take (optional)");
    const start = el("button", "new-start", "Start");
    start.type = "button";
    start.dataset.test = "new-start";
    line.append(id, turns, start);
    box.append(task, line);
    const go = async () => {
      if (isBusy(start)) return;
      let body;
      try {
        body = { task: task.value };
        if (id.value.trim()) body.id = id.value.trim();
        const maxTurns = wholeNumber(turns, "max turns");
        if (maxTurns !== undefined) body.max_turns = maxTurns;
      } catch (problem) {
        showProblem(problem);
        return;
      }
      busy(start, true);
      start.disabled = true;
      try {
        const data = await apiPost("/api/sessions", body);
        clearProblem();
        task.value = id.value = turns.value = "";
        await openFresh(String(data.session));
      } catch (problem) {
        showProblem(problem);
      } finally {
        busy(start, false);
        start.disabled = false;
      }
    };
    start.addEventListener("click", go);
    task.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey) && !ev.isComposing) { ev.preventDefault(); go(); }
    });
  }

  // A session this page just started or forked: its view, once the server's list has its row (it
  // follows the log, a moment behind the write), or after 3 s anyway.
  async function openFresh(id) {
    state.fresh.add(id);
    for (const end = Date.now() + 3000; !state.sessions.has(id) && Date.now() < end;) {
      await new Promise((r) => setTimeout(r, 50));
    }
    location.hash = sessionHash(id);
  }

  function renderWaiting() {
    const box = document.getElementById("waiting");
    if (!box) return;
    const list = state.mode === "host" ? state.approvals : [];
    box.hidden = !list.length;
    if (!list.length) { box.replaceChildren(); return; }
    const ul = el("ul");
    for (const a of list) {
      const li = el("li", "waiting-item");
      li.dataset.session = String(a.session || "");
      li.dataset.call = String(a.call_id || "");
      li.appendChild(link(sessionHash(String(a.session || "")), String(a.session || ""), "sid"));
      li.appendChild(el("span", "waiting-what", a.kind === "question" ? "asks: " + String(a.question || "") : "wants to run " + String(a.tool || "")));
      const age = el("span", "approval-age", ageText(a.requested_at_us));
      age.dataset.at = String(a.requested_at_us || 0);
      li.appendChild(age);
      ul.appendChild(li);
    }
    box.replaceChildren(el("h2", "", "Waiting for you (" + list.length + ")"), ul);
  }

  // Every open request of the home: when the list opens, on an `approval` message, when a row's status changes.
  async function loadApprovalsAll() {
    if (state.mode !== "host") return;
    if (state.approvalsLoading) { state.approvalsAgain = true; return; }
    state.approvalsLoading = true;
    try {
      const list = await api("/api/approvals");
      state.approvals = Array.isArray(list) ? list : [];
      renderWaiting();
    } catch (problem) {
      if (state.view.kind === "list") showProblem(problem);
    } finally {
      state.approvalsLoading = false;
      if (state.approvalsAgain) { state.approvalsAgain = false; loadApprovalsAll(); }
    }
  }
  function scheduleApprovalsAll() {
    if (state.mode !== "host" || state.view.kind !== "list") return;
    clearTimeout(state.approvalsTimer);
    state.approvalsTimer = setTimeout(loadApprovalsAll, 100);
  }

  // ---- the schedules (docs/schedules.md): each with its cron, state, next fire and last runs; a
  // host's New schedule form and each schedule's Pause / Resume, Run now, Remove ----
  const OVERLAPS = ["skip", "buffer_one", "allow"];

  function scheduleApi(name, what) {
    return "/api/schedules" + (name ? "/" + encodeURIComponent(name) + (what ? "/" + what : "") : "");
  }
  // An RFC 3339 time of the API in the browser's time, or "—".
  function isoLocal(iso) {
    const d = iso ? new Date(iso) : null;
    return d && !isNaN(d) ? d.toLocaleString() : "—";
  }

  function renderSchedulesView() {
    document.getElementById("where").textContent = "schedules";
    document.title = "Carapace: schedules";
    const form = el("section", "new-session new-schedule");
    form.id = "new-schedule";
    form.hidden = true;
    const list = el("div", "schedule-list");
    list.id = "schedules";
    list.dataset.test = "schedules";
    document.getElementById("app").replaceChildren(form, el("h2", "schedules-title", "Schedules"), list);
    renderScheduleForm();
    renderSchedules();
    loadSchedules();
  }

  function renderScheduleForm() {
    const box = document.getElementById("new-schedule");
    if (!box) return;
    if (state.mode !== "host") { box.hidden = true; box.replaceChildren(); delete box.dataset.built; return; }
    box.hidden = false;
    if (box.dataset.built === "1") return;
    box.dataset.built = "1";
    const task = el("textarea", "new-task");
    task.rows = 2;
    task.placeholder = "The task of every run: what should the agent do?";
    task.dataset.test = "schedule-task";
    task.setAttribute("aria-label", "the task of every run");
    const name = textField("schedule-name", "schedule-name", "name", "the schedule's name");
    const cron = textField("schedule-cron", "schedule-cron", "cron, as 0 8 * * mon-fri", "when it fires: a cron expression");
    const tz = textField("schedule-tz", "schedule-tz", "time zone (UTC)", "the cron's time zone, as Europe/Berlin");
    const overlap = el("select", "schedule-overlap");
    overlap.dataset.test = "schedule-overlap";
    overlap.title = "a due time while a run is going: skip it, run it after (buffer_one), or run it too (allow)";
    overlap.setAttribute("aria-label", "what a due time does while a run is going");
    overlap.replaceChildren(...OVERLAPS.map((o) => { const opt = el("option", "", "overlap: " + o); opt.value = o; return opt; }));
    const create = el("button", "new-start", "Create");
    create.type = "button";
    create.dataset.test = "schedule-create";
    const line = el("div", "new-line");
    line.append(name, cron, tz, overlap, create);
    box.append(el("h2", "", "New schedule"), task, line);
    create.addEventListener("click", async () => {
      if (isBusy(create)) return;
      const body = { name: name.value.trim(), cron: cron.value.trim(), task: task.value, overlap: overlap.value };
      if (tz.value.trim()) body.tz = tz.value.trim();
      busy(create, true);
      create.disabled = true;
      try {
        await apiPost(scheduleApi(), body);
        clearProblem();
        name.value = cron.value = task.value = "";
        await loadSchedules();
      } catch (problem) {
        showProblem(problem);  // a 400 names the field, a 409 the schedule that exists
      } finally {
        busy(create, false);
        create.disabled = false;
      }
    });
  }

  function renderSchedules() {
    const box = document.getElementById("schedules");
    if (!box) return;
    document.getElementById("where").textContent = state.schedulesLoaded ? num(state.schedules.length) + " schedules" : "schedules";
    if (!state.schedules.length) {
      box.replaceChildren(el("p", "empty", state.schedulesLoaded ? "No schedules in this home yet." : "Loading…"));
      return;
    }
    const table = el("table", "sessions schedules");
    const head = el("tr");
    for (const c of ["Schedule", "When", "State", "Last runs", "Counts"]) head.appendChild(el("th", "", c));
    if (state.mode === "host") head.appendChild(el("th", "", ""));
    const thead = el("thead");
    thead.appendChild(head);
    const body = el("tbody");
    body.append(...state.schedules.map(scheduleRow));
    table.append(thead, body);
    box.replaceChildren(table);
  }

  function scheduleRow(s) {
    const name = String(s.name || "");
    const running = Array.isArray(s.running) ? s.running : [];
    const tr = el("tr", "schedule");
    tr.dataset.schedule = name;
    const what = el("td", "id");
    what.appendChild(el("strong", "schedule-name", name));
    const task = String(s.task || "");
    what.appendChild(el("div", "schedule-task", task.length > 160 ? task.slice(0, 160) + "…" : task));
    what.appendChild(el("div", "fork", "defined by " + String(s.source || "?") + " " + isoLocal(s.defined_at)));
    tr.appendChild(what);

    const when = el("td", "schedule-when");
    when.appendChild(el("code", "schedule-cron", String(s.cron || "")));
    when.appendChild(el("span", "schedule-tz", " " + String(s.tz || "UTC")));
    const next = el("div", "schedule-next", s.paused ? "next: none while paused" : "next: " + (s.next_local ? String(s.next_local) : "none"));
    next.dataset.test = "schedule-next";
    if (s.next) next.title = String(s.next) + " (UTC)";
    when.appendChild(next);
    if (String(s.overlap || "skip") !== "skip") when.appendChild(el("div", "fork", "overlap: " + String(s.overlap)));
    tr.appendChild(when);

    const st = el("td", "schedule-state");
    st.dataset.test = "schedule-state";
    st.dataset.state = s.paused ? "paused" : running.length ? "running" : "idle";
    st.appendChild(el("span", "badge " + (s.paused ? "stopped" : running.length ? "running" : ""), st.dataset.state));
    if (s.paused && s.pause_reason) st.appendChild(el("div", "schedule-reason", String(s.pause_reason)));
    for (const r of running) {
      const line = el("div", "schedule-going");
      line.appendChild(link(sessionHash(String(r.session || "")), String(r.session || "")));
      st.appendChild(line);
    }
    if (s.consecutive_failures) st.appendChild(el("div", "last-error", num(s.consecutive_failures) + " failed in a row"));
    if (s.last_skip) {
      const k = s.last_skip;
      const skip = el("div", "fork", "last skipped: " + num(k.count) + " (" + String(k.reason || "") + ")");
      skip.title = String(k.from || "") + " to " + String(k.to || "");
      st.appendChild(skip);
    }
    tr.appendChild(st);

    const runs = el("td", "schedule-runs");
    const recent = Array.isArray(s.recent) ? s.recent : [];
    if (!recent.length) runs.appendChild(el("span", "hint", "no run yet"));
    const ul = el("ul", "schedule-runs");
    for (const r of recent) {
      const outcome = r.ended ? String(r.outcome || "ended") : "running";
      const li = el("li", "schedule-run");
      li.dataset.test = "schedule-run";
      li.dataset.session = String(r.session || "");
      li.dataset.outcome = outcome;
      li.appendChild(el("span", "badge " + classSafe(outcome), outcome));
      li.appendChild(link(sessionHash(String(r.session || "")), String(r.session || ""), "sid"));
      const meta = String(r.trigger || "") + " · " + isoLocal(r.fired_at) + (r.duration_ms !== undefined ? " · " + T.dur(r.duration_ms * 1000) : "");
      li.appendChild(el("span", "run-meta", meta));
      if (r.error) li.appendChild(el("div", "last-error", String(r.error)));
      ul.appendChild(li);
    }
    if (recent.length) runs.appendChild(ul);
    tr.appendChild(runs);

    const counts = el("td", "num schedule-counts", num(s.fired) + " fired · " + num(s.skipped) + " skipped");
    counts.dataset.test = "schedule-counts";
    tr.appendChild(counts);
    if (state.mode === "host") tr.appendChild(scheduleControls(s, running));
    return tr;
  }

  function scheduleControls(s, running) {
    const name = String(s.name || "");
    const td = el("td", "schedule-actions");
    const button = (text, test, title, cls) => {
      const b = el("button", "host-button " + (cls || ""), text);
      b.type = "button";
      b.dataset.test = test;
      b.title = title;
      td.appendChild(b);
      return b;
    };
    const toggle = s.paused ? button("Resume", "schedule-resume", "fire again from now on (the paused time is not caught up)")
                            : button("Pause", "schedule-pause", "fire no more until resumed (runs going go on)");
    toggle.addEventListener("click", () => scheduleAct(toggle, name, s.paused ? "resume" : "pause"));
    const blocked = running.length > 0 && s.overlap !== "allow";
    const now = button("Run now", "schedule-trigger", blocked ? "a run is going (overlap " + String(s.overlap) + ")" : "start a run now");
    now.disabled = blocked;
    now.addEventListener("click", () => scheduleAct(now, name, "trigger"));
    const remove = button("Remove", "schedule-remove", "fire no more; its sessions and record stay", "stop");
    remove.addEventListener("click", () => {
      if (confirm("Remove the schedule " + name + "? It fires no more; its sessions stay.")) scheduleAct(remove, name, "remove");
    });
    return td;
  }

  // POST /api/schedules/NAME/WHAT with its button off while it runs; the list again after.
  async function scheduleAct(button, name, what) {
    if (isBusy(button)) return;
    busy(button, true);
    button.disabled = true;
    try {
      await apiPost(scheduleApi(name, what), {});
      clearProblem();
    } catch (problem) {
      showProblem(problem);
    } finally {
      busy(button, false);
      button.disabled = false;
      loadSchedules();
    }
  }

  // The schedules: when the view opens, and (debounced) on a `schedule` message or a session's new status.
  async function loadSchedules() {
    if (state.schedulesLoading) { state.schedulesAgain = true; return; }
    state.schedulesLoading = true;
    try {
      const data = await api(scheduleApi());
      state.schedules = data && Array.isArray(data.schedules) ? data.schedules : [];
      state.schedulesLoaded = true;
      renderSchedules();
    } catch (problem) {
      if (state.view.kind === "schedules") showProblem(problem);
    } finally {
      state.schedulesLoading = false;
      if (state.schedulesAgain) { state.schedulesAgain = false; loadSchedules(); }
    }
  }
  function refreshSchedulesSoon() {
    if (state.view.kind !== "schedules") return;
    clearTimeout(state.schedulesTimer);
    state.schedulesTimer = setTimeout(loadSchedules, 150);
  }

  // " · 64% cached": the share of the input read from the provider's prompt
  // cache, the counts in its title.
  function cacheNote(row, words) {
    const note = el("span", "cache-note", " · " + Math.round(100 * (row.cache_hit_ratio || 0)) + "% " + words);
    note.title = num(row.cache_read) + " input tokens read from the provider's cache, " + num(row.cache_write) +
                 " written, " + num(row.tokens_in) + " not cached";
    return note;
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
      const meta = el("span", "meta", num(row.turns) + " turns · " + num(row.last_seq) + " events · " + num(row.tokens_in) + " / " +
                                      num(row.tokens_out) + " tokens · " + cost(row.cost_usd));
      if (row.cache_read > 0) meta.appendChild(cacheNote(row, "of input from cache"));
      head.appendChild(meta);
      if (row.parent_session) {
        const fork = el("span", "fork", "fork of ");
        fork.appendChild(link(sessionHash(row.parent_session), row.parent_session));
        head.appendChild(fork);
      }
      // The session view shows what it does now beside its controls (renderHostBar).
      if (view.kind !== "session") {
        if (row.live && row.live.retry_at_us) head.appendChild(countdown(row.live.retry_at_us));
        if (row.live && row.live.message) head.appendChild(el("span", "live-message", liveText(row.live)));
      }
    }
    if (view.kind === "session") updateHostBar(view);
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
    const bar = el("div", "host-bar");
    bar.id = "host-bar";
    const approvals = el("div", "approvals");
    approvals.id = "approvals";
    approvals.hidden = true;
    const chat = el("section", "chat");
    chat.id = "chat";
    chat.hidden = true;
    main.replaceChildren(head, bar, approvals, chat, layout);
    renderHostBar(view);
    renderTraceHead(view);
  }

  // ---- a session's controls: Stop, Resume, Fork, and what it does now ----
  function renderHostBar(view) {
    const bar = document.getElementById("host-bar");
    if (!bar || state.view !== view) return;
    view.controls = null;
    bar.replaceChildren();
    if (state.mode === "host") {
      const button = (text, test, title) => {
        const b = el("button", "host-button " + test, text);
        b.type = "button";
        b.dataset.test = test;
        b.title = title;
        return b;
      };
      const stop = button("Stop", "stop", "stop its run: session.stopped is recorded, its tools killed");
      const resumeTurns = numberField("resume-turns", "resume-turns", "max turns", "the most turns the resumed run may take");
      const resume = button("Resume", "resume", "go on from where it stopped (step mode)");
      const forkTurn = numberField("fork-turn", "fork-turn", "at turn", "the fork keeps the turns up to this one");
      forkTurn.min = "0";
      const forkTask = textField("fork-task", "fork-task", "task for the fork (optional)", "the fork's task");
      const fork = button("Fork", "fork", "a new session whose history is this one's up to that turn");
      const group = (...children) => { const g = el("span", "host-group"); g.append(...children); return g; };
      bar.append(group(stop), group(resume, resumeTurns), group(forkTurn, forkTask, fork));
      view.controls = { stop, resume, resumeTurns, fork, forkTurn, forkTask };
      stop.addEventListener("click", () => act(view, stop, "stop", {}));
      resume.addEventListener("click", () => {
        let body = {};
        try {
          const maxTurns = wholeNumber(resumeTurns, "max turns");
          if (maxTurns !== undefined) body.max_turns = maxTurns;
        } catch (problem) { showProblem(problem); return; }
        act(view, resume, "resume", body).then((ok) => { if (ok) resumeTurns.value = ""; });
      });
      fork.addEventListener("click", async () => {
        let body;
        try {
          const at = wholeNumber(forkTurn, "the fork's turn");
          if (at === undefined) throw { error: "Fork needs a turn: the fork keeps this session's turns up to it", hint: "Fill in \"at turn\" (0 keeps none)." };
          body = { at_turn: at };
          if (forkTask.value.trim()) body.task = forkTask.value;
        } catch (problem) { showProblem(problem); return; }
        const data = await act(view, fork, "fork", body);
        if (data && data.session) {
          forkTurn.value = forkTask.value = "";
          await openFresh(String(data.session));
        }
      });
    }
    const live = el("span", "live-status");
    live.id = "live-status";
    live.dataset.test = "live-status";
    bar.appendChild(live);
    updateHostBar(view);
  }

  // The buttons' state and the live status, from the session's row.
  function updateHostBar(view) {
    if (state.view !== view) return;
    const row = state.sessions.get(view.id);
    const status = row ? String(row.status || "") : "";
    const c = view.controls;
    if (c) {
      c.stop.disabled = isBusy(c.stop) || status !== "running";
      c.resume.disabled = isBusy(c.resume) || !(status === "stopped" || status === "crashed");
      c.fork.disabled = isBusy(c.fork) || !row;
    }
    const live = document.getElementById("live-status");
    if (live) {
      live.replaceChildren();
      if (row && row.live && row.live.retry_at_us) live.appendChild(countdown(row.live.retry_at_us));
      if (row && row.live && row.live.message) live.appendChild(el("span", "live-message", liveText(row.live)));
    }
  }

  // POST /api/sessions/ID/WHAT with its button off while it runs: the answer's data, or null (the problem shown).
  async function act(view, button, what, body) {
    if (isBusy(button)) return null;
    busy(button, true);
    button.disabled = true;
    try {
      const data = await apiPost(sessionApi(view.id, what), body);
      clearProblem();
      return data;
    } catch (problem) {
      showProblem(problem);
      return null;
    } finally {
      busy(button, false);
      updateHostBar(view);
    }
  }

  // ---- a session's chat: the conversation, the answer streaming in, a message box ----
  const CHAT_TYPES = "user.message,llm.responded";
  const CHAT_WINDOW = 2000;  // events of the log's end the conversation shows at first ("earlier messages" for more)

  function chatEntry(e) {
    const d = e.data && typeof e.data === "object" ? e.data : {};
    const user = e.type === "user.message";
    const li = el("li", "chat-msg " + (user ? "from-user" : "from-model"));
    li.dataset.seq = String(e.seq);
    li.dataset.type = String(e.type || "");
    const who = el("div", "chat-who", user ? (d.follow_up ? "you (follow-up)" : d.queued ? "you (queued)" : "you") : "model");
    who.appendChild(el("span", "chat-when", eventTime(e.ts_us)));
    li.appendChild(who);
    const text = String(d.text || "");
    if (text || user) li.appendChild(el("div", "chat-text", text));
    if (!user && Array.isArray(d.tool_calls)) {
      for (const call of d.tool_calls) {
        const args = call && call.args !== undefined ? (typeof call.args === "string" ? call.args : JSON.stringify(call.args)) : "";
        li.appendChild(el("div", "chat-tool", "→ " + String(call && call.name || "?") + " " + (args.length > 200 ? args.slice(0, 200) + "…" : args)));
      }
    }
    return li;
  }

  function renderChat(view) {
    const box = document.getElementById("chat");
    if (!box || state.view !== view) return;
    box.hidden = false;
    const earlier = el("button", "chat-earlier", "earlier messages");
    earlier.type = "button";
    earlier.dataset.test = "chat-earlier";
    earlier.hidden = view.chat.start <= 1;
    earlier.addEventListener("click", () => loadEarlier(view));
    view.chat.earlier = earlier;
    const log = el("ol", "chat-log");
    log.dataset.test = "chat-log";
    log.appendChild(el("li", "hint chat-empty", "Loading the conversation…"));
    const stream = el("div", "chat-stream");
    stream.dataset.test = "chat-stream";
    stream.hidden = true;
    const input = el("div", "chat-box");
    input.id = "chat-box";
    box.replaceChildren(el("h2", "", "Conversation"), earlier, log, stream, input);
    view.chat.log = log;
    view.chat.stream = stream;
    renderChatBox(view);
  }

  function renderChatBox(view) {
    const box = document.getElementById("chat-box");
    if (!box || state.view !== view) return;
    if (state.mode !== "host") { box.replaceChildren(); box.hidden = true; return; }
    if (box.dataset.built === "1") { box.hidden = false; return; }
    box.dataset.built = "1";
    box.hidden = false;
    const text = el("textarea", "chat-input");
    text.rows = 2;
    text.placeholder = "A message (Enter sends, Shift+Enter a new line)";
    text.dataset.test = "chat-input";
    text.setAttribute("aria-label", "a message to the session");
    const sendButton = el("button", "chat-send", "Send");
    sendButton.type = "button";
    sendButton.dataset.test = "chat-send";
    box.append(text, sendButton);
    const go = async () => {
      if (isBusy(sendButton)) return;
      if (!text.value.trim()) return;
      busy(sendButton, true);
      sendButton.disabled = true;
      try {
        await apiPost(sessionApi(view.id, "messages"), { text: text.value });
        clearProblem();
        text.value = "";
        loadChat(view);
      } catch (problem) {
        showProblem(problem);
      } finally {
        busy(sendButton, false);
        sendButton.disabled = false;
      }
    };
    sendButton.addEventListener("click", go);
    text.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey && !ev.isComposing) { ev.preventDefault(); go(); }
    });
  }

  // The conversation's events after those shown (the whole of it the first time).
  async function loadChat(view) {
    const chat = view.chat;
    if (!chat || !chat.log) return;
    if (chat.loading) { chat.again = true; return; }
    chat.loading = true;
    try {
      for (let rounds = 0; rounds < EVENTS_ROUNDS; ++rounds) {
        const query = hashQuery([["from", chat.cursor], ["limit", 500], ["type", CHAT_TYPES]]);
        const data = await api(sessionApi(view.id, "events") + query);
        if (state.view !== view) return;
        const atBottom = chat.log.scrollHeight - chat.log.scrollTop - chat.log.clientHeight < 24;
        for (const e of data.events || []) {
          if (chat.seen.has(e.seq)) continue;
          chat.seen.add(e.seq);
          if (chat.log.querySelector(".chat-empty")) chat.log.replaceChildren();
          chat.log.appendChild(chatEntry(e));
          if (e.type === "llm.responded") consumeStream(view, String((e.data && e.data.text) || ""));
        }
        if (atBottom) chat.log.scrollTop = chat.log.scrollHeight;
        const events = data.events || [];
        const last = events.length ? events[events.length - 1].seq : 0;
        chat.cursor = data.next !== null && data.next !== undefined ? data.next
                                                                     : Math.max(chat.cursor, last + 1, (data.last_seq || 0) + 1);
        chat.lastSeq = Math.max(chat.lastSeq, data.last_seq || 0);
        if (data.next === null || data.next === undefined) break;
      }
      if (!chat.seen.size) {
        chat.log.replaceChildren(el("li", "hint chat-empty", chat.start > 1 ? "No message in the last " + num(CHAT_WINDOW) + " events." : "No message yet."));
      }
      chat.log.dataset.loaded = String(chat.seen.size);
    } catch (problem) {
      if (state.view !== view) return;
      if (!chat.seen.size) chat.log.replaceChildren(el("li", "hint chat-empty", "The conversation could not be read: " + problem.error));
    } finally {
      chat.loading = false;
      if (chat.again && state.view === view) { chat.again = false; loadChat(view); }
    }
  }

  // The conversation's events before those shown: the window of CHAT_WINDOW events before it.
  async function loadEarlier(view) {
    const chat = view.chat;
    if (!chat || !chat.log || chat.earlierLoading || chat.start <= 1) return;
    chat.earlierLoading = true;
    chat.earlier.disabled = true;
    const to = chat.start, from = Math.max(1, to - CHAT_WINDOW);
    const got = [];
    try {
      let cursor = from;
      for (let rounds = 0; rounds < EVENTS_ROUNDS && cursor < to; ++rounds) {
        const data = await api(sessionApi(view.id, "events") + hashQuery([["from", cursor], ["limit", 500], ["type", CHAT_TYPES]]));
        if (state.view !== view) return;
        const events = data.events || [];
        for (const e of events) if (e.seq < to && !chat.seen.has(e.seq)) got.push(e);
        const last = events.length ? events[events.length - 1].seq : 0;
        if (data.next === null || data.next === undefined || last >= to) break;
        cursor = data.next;
      }
      const height = chat.log.scrollHeight;
      if (got.length && chat.log.querySelector(".chat-empty")) chat.log.replaceChildren();
      const first = chat.log.firstChild;
      for (const e of got) {
        chat.seen.add(e.seq);
        chat.log.insertBefore(chatEntry(e), first);
      }
      chat.log.scrollTop += chat.log.scrollHeight - height;  // what was on screen stays there
      chat.start = from;
    } catch (problem) {
      if (state.view === view) showProblem(problem);
    } finally {
      chat.earlierLoading = false;
      chat.earlier.disabled = false;
      chat.earlier.hidden = chat.start <= 1;
    }
  }

  function setStream(view, text) {
    const chat = view.chat;
    if (!chat || !chat.stream) return;
    chat.streamText = text;
    chat.stream.textContent = text;
    chat.stream.hidden = !text;
  }
  // An answer reached the log: the text that streamed for it leaves the stream. The stream may hold
  // only its end (the page began to watch after it started), or the next answer's start after it.
  function consumeStream(view, answer) {
    const streamed = view.chat ? view.chat.streamText : "";
    if (!streamed || !answer) return;
    if (streamed.startsWith(answer)) return setStream(view, streamed.slice(answer.length));
    if (answer.includes(streamed)) return setStream(view, "");
    for (let k = Math.min(answer.length, streamed.length); k > 0; --k) {
      if (streamed.startsWith(answer.slice(answer.length - k))) return setStream(view, streamed.slice(k));
    }
  }
  function onDelta(view, text) {
    if (!view.chat || !view.chat.stream || !text) return;
    setStream(view, view.chat.streamText + text);
    const log = view.chat.log;
    if (log) log.scrollTop = log.scrollHeight;
  }

  // ---- a session's approval cards ----
  function argsText(args) {
    if (typeof args === "string") {
      try { return JSON.stringify(JSON.parse(args), null, 2); } catch (e) { return args; }
    }
    return JSON.stringify(args === undefined ? {} : args, null, 2);
  }

  function approvalCard(view, a) {
    const question = a.kind === "question";
    const card = el("div", "approval-card " + (question ? "question" : "approval"));
    card.dataset.test = "approval-card";
    card.dataset.call = String(a.call_id || "");
    card.dataset.kind = question ? "question" : "approval";
    const title = el("div", "approval-title");
    title.appendChild(el("strong", "approval-tool", question ? "The model asks" : String(a.tool || "")));
    title.appendChild(el("span", "approval-call", String(a.call_id || "")));
    card.appendChild(title);
    if (question) card.appendChild(el("div", "approval-question", String(a.question || "")));
    else card.appendChild(el("pre", "approval-args", argsText(a.args)));
    if (a.reason || a.asked_by) {
      card.appendChild(el("div", "approval-why", String(a.reason || "") + (a.asked_by ? " [" + String(a.asked_by) + "]" : "")));
    }
    const when = el("div", "approval-when");
    const age = el("span", "approval-age", ageText(a.requested_at_us));
    age.dataset.at = String(a.requested_at_us || 0);
    const expiry = el("span", "approval-expiry", expiryText(a.expires_at_us));
    expiry.dataset.expires = String(a.expires_at_us || 0);
    when.append(age, document.createTextNode(" · "), expiry);
    if (a.expires_at_us && a.on_expiry) when.appendChild(document.createTextNode(" (then " + String(a.on_expiry) + ")"));
    card.appendChild(when);
    const actions = el("div", "approval-actions");
    const buttons = [];
    const decide = async (button, body) => {
      if (buttons.some(isBusy)) return;
      busy(button, true);
      for (const b of buttons) b.disabled = true;
      if (a.args_digest) body.digest = String(a.args_digest);
      try {
        await apiPost(sessionApi(view.id, "approvals/" + encodeURIComponent(String(a.call_id || ""))), body);
        clearProblem();
        card.classList.add("decided");
        view.approvals = view.approvals.filter((x) => x.call_id !== a.call_id);
        renderApprovals(view);
      } catch (problem) {
        showProblem(problem);
        if (problem.status === 409 || problem.status === 404) loadApprovals(view);  // decided elsewhere, or expired
      } finally {
        busy(button, false);
        for (const b of buttons) b.disabled = false;
      }
    };
    if (question) {
      const answer = textField("answer-text", "answer-text", "your answer", "the answer to the model's question");
      const send = el("button", "answer", "Answer");
      send.type = "button";
      send.dataset.test = "answer";
      buttons.push(send);
      send.addEventListener("click", () => {
        if (!answer.value.trim()) { showProblem({ error: "An answer needs its text", hint: "Type it in the field beside Answer." }); return; }
        decide(send, { decision: "answer", text: answer.value });
      });
      answer.addEventListener("keydown", (ev) => { if (ev.key === "Enter" && !ev.isComposing) { ev.preventDefault(); send.click(); } });
      actions.append(answer, send);
    } else {
      const approve = el("button", "approve", "Approve");
      approve.type = "button";
      approve.dataset.test = "approve";
      actions.appendChild(approve);
      buttons.push(approve);
      approve.addEventListener("click", () => decide(approve, { decision: "approve" }));
    }
    const reason = textField("deny-reason", "deny-reason", "why not (optional)", "the reason to deny it");
    const deny = el("button", "deny", "Deny");
    deny.type = "button";
    deny.dataset.test = "deny";
    buttons.push(deny);
    deny.addEventListener("click", () => decide(deny, reason.value.trim() ? { decision: "deny", reason: reason.value } : { decision: "deny" }));
    actions.append(reason, deny);
    card.appendChild(actions);
    return card;
  }

  // The cards of view.approvals: a card already there is kept (what was typed in it too).
  function renderApprovals(view) {
    const box = document.getElementById("approvals");
    if (!box || state.view !== view) return;
    const list = state.mode === "host" ? view.approvals || [] : [];
    box.hidden = !list.length;
    const have = new Map([...box.querySelectorAll(".approval-card")].map((c) => [c.dataset.call, c]));
    const cards = list.map((a) => have.get(String(a.call_id || "")) || approvalCard(view, a));
    box.replaceChildren(...cards);
  }

  async function loadApprovals(view) {
    if (state.mode !== "host" || state.view !== view) return;
    if (view.approvalsLoading) { view.approvalsAgain = true; return; }
    view.approvalsLoading = true;
    try {
      const list = await api("/api/approvals?session=" + encodeURIComponent(view.id));
      if (state.view !== view) return;
      view.approvals = Array.isArray(list) ? list.filter((a) => a.session === view.id) : [];
      renderApprovals(view);
    } catch (problem) {
      if (state.view === view) showProblem(problem);
    } finally {
      view.approvalsLoading = false;
      if (view.approvalsAgain && state.view === view) { view.approvalsAgain = false; loadApprovals(view); }
    }
  }

  // The session's row changed (a socket message): what depends on it follows.
  function sessionChanged(view, before, row) {
    if (!view.loaded || !row) return;
    const statusChanged = !before || before.status !== row.status;
    if (view.chat && (row.last_seq || 0) > view.chat.lastSeq) loadChat(view);
    // A run that ended (stopped, parked, failed, done): what streamed and did not reach the log is gone.
    // Only on the change: a row read from the log a moment behind may still say "completed" while the
    // run a message started already streams.
    if (row.status !== "running" && (!before || before.status === "running")) setStream(view, "");
    if (statusChanged || (row.status === "waiting" && (!before || before.last_seq !== row.last_seq))) loadApprovals(view);
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
      if (view.spansProblem) {  // every span is here after all
        view.spansProblem = false;
        clearProblem();
      }
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
                   selected: spanId || "", detailsFor: "", watching: false, fromSocket: false, failed: false,
                   loaded: false, controls: null, approvals: [], approvalsLoading: false, approvalsAgain: false,
                   chat: { log: null, stream: null, earlier: null, streamText: "", seen: new Set(), start: 1, cursor: 1, lastSeq: 0,
                           loading: false, again: false, earlierLoading: false } };
    state.view = view;
    renderTraceShell(view);
    try {
      let data;
      // A session this page just started may not be in the server's view of the log yet: a moment more.
      for (let tries = 0; ; ++tries) {
        try {
          data = await api("/api/sessions/" + encodeURIComponent(id));
          break;
        } catch (problem) {
          if (!state.fresh.has(id) || tries >= 30 || state.view !== view) throw problem;
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      state.fresh.delete(id);
      if (state.view !== view) return;
      if (data.session) state.sessions.set(data.session.id, data.session);
      view.loaded = true;
      // The conversation: the end of the log first (a long session's whole history is a click away).
      view.chat.start = view.chat.cursor = Math.max(1, Number(data.session && data.session.last_seq || 0) - CHAT_WINDOW + 1);
      renderChat(view);
      loadChat(view);
      loadApprovals(view);
      if (!view.fromSocket) {
        view.trace = { session: id, spans: data.spans || [], last_us: data.last_us || 0, skeleton: data.skeleton,
                       complete: data.complete !== false };
      }
      renderTraceHead(view);
      renderSpans(view);
      view.watching = true;
      send({ type: "watch", session: id, reset: false });
      // The skeleton came with the spans it shows; every span follows (to open a fold, to filter).
      // Should that fail (the server went away), the skeleton stays, watched: the watch sent again on
      // reconnecting brings every span.
      if (!view.trace.complete) {
        let every;
        try {
          every = await api("/api/sessions/" + encodeURIComponent(id) + "?spans=all");
        } catch (problem) {
          if (state.view !== view || view.trace.complete) return;
          view.spansProblem = true;
          showProblem(problem);
          return;
        }
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
    if (parts[0] === "schedules") return { kind: "schedules" };
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
    const section = want.kind === "schedules" ? "schedules" : "list";  // the header's link to mark
    for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("current", a.dataset.view === section);
    if (want.kind === "session") {
      openSession(want.id, want.span, want.params);
    } else if (want.kind === "events") {
      openEvents(want.id, want.params);
    } else if (want.kind === "schedules") {
      state.view = { kind: "schedules" };
      renderSchedulesView();
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
      const before = view.kind === "session" ? state.sessions.get(view.id) : null;
      state.sessions = new Map((m.sessions || []).map((r) => [r.id, r]));
      if (Array.isArray(m.feed)) {
        state.feed = m.feed.slice(0, FEED_MAX).map((f) => ({ type: String(f.type || ""), session: String(f.session || ""),
                                                             message: String(f.message || ""), at_us: Number(f.at_us) || 0 }));
        renderFeed();
      }
      renderRows();
      if (view.kind === "session" || view.kind === "events") renderTraceHead(view);
      if (view.kind === "session") {
        // A reconnection: what was missed while away.
        if (view.loaded) { loadChat(view); loadApprovals(view); }
        sessionChanged(view, before, state.sessions.get(view.id));
      }
      scheduleApprovalsAll();
      refreshSchedulesSoon();  // a reconnection: what changed while away
    } else if (m.type === "session" && m.session) {
      const before = state.sessions.get(m.session.id);
      state.sessions.set(m.session.id, m.session);
      renderRows();
      if (view.kind === "session" && view.id === m.session.id) {
        renderTraceHead(view);
        sessionChanged(view, before, m.session);
      }
      if (!before || before.status !== m.session.status) {
        scheduleApprovalsAll();
        refreshSchedulesSoon();  // a run's start or end (a read-only server sends no `schedule` message)
      }
    } else if (m.type === "schedule") {
      refreshSchedulesSoon();
    } else if (m.type === "delta") {
      if (view.kind === "session" && view.id === m.session) onDelta(view, String(m.text || ""));
    } else if (m.type === "approval" && m.request && typeof m.request === "object") {
      const r = m.request;
      if (view.kind === "session" && view.id === m.session && state.mode === "host") {
        view.approvals = view.approvals.filter((a) => a.call_id !== r.call_id).concat([r]);
        renderApprovals(view);
      }
      if (view.kind === "list") {
        state.approvals = state.approvals.filter((a) => !(a.session === r.session && a.call_id === r.call_id)).concat([r]);
        renderWaiting();
        scheduleApprovalsAll();
      }
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
      loadStatus();  // a server that came back may host, or not
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
    for (const a of document.querySelectorAll(".approval-age")) a.textContent = ageText(Number(a.dataset.at));
    for (const x of document.querySelectorAll(".approval-expiry")) x.textContent = expiryText(Number(x.dataset.expires));
  }, 1000);
  window.addEventListener("hashchange", route);
  window.addEventListener("popstate", route);
  route();
  loadStatus();
  connect();
  api("/api/sessions").then((rows) => {
    if (state.haveHello) return;  // the socket's list is newer
    state.sessions = new Map((rows || []).map((r) => [r.id, r]));
    renderRows();
  }, (problem) => showProblem(problem));
})();
