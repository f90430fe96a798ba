// The trace view: a session's spans as a collapsible tree beside a timeline,
// and one span's details. Shared by the HTML export (inlined in its one file)
// and the page of `carapace serve` (served as /trace_view.js). Every name,
// attribute and body is hostile text: the DOM is built with createElement
// and textContent only.
//
// A long session is shown as `carapace trace show` shows it: the server (or
// the export) sends the skeleton that render_skeleton prints, as data
// (skeleton_items in actors/collector/trace_view.cc: a notable turn whole, a
// clean turn on one line, a run of clean turns, a fork's copied turns and the
// middle of a very long session each one line), and this view draws it; a
// click on a folded line opens it. "every span" shows the whole tree. A
// filter (text, span kind) shows the matching spans. Only the rows on screen
// are in the DOM once there are many.
"use strict";
var CarapaceTrace = (function () {
  const BAD = new Set(["error", "failed", "crashed", "timed_out", "interrupted", "denied", "stopped", "open", "rolled_back"]);
  const ROW_HEIGHT = 24;     // px, .row in trace_view.css
  const ALL_ROWS_UP_TO = 500; // more rows than this: only those on screen (and some around) are built
  const AROUND = 30;

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = String(text);
    return e;
  }

  function dur(us) {
    if (us < 1000) return us + " µs";
    if (us < 1e6) return (us / 1000).toFixed(us < 1e4 ? 1 : 0) + " ms";
    return (us / 1e6).toFixed(us < 1e7 ? 2 : 1) + " s";
  }

  function show(value) { return typeof value === "string" ? value : JSON.stringify(value); }

  function table(obj) {
    const t = el("table");
    for (const key of Object.keys(obj || {})) {
      const tr = el("tr");
      tr.appendChild(el("td", "k", key));
      tr.appendChild(el("td", "v", show(obj[key])));
      t.appendChild(tr);
    }
    return t;
  }

  function pretty(text) {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch (e) { return text; }
  }

  // A span's status as shown: an open span of a live session is not bad.
  function statusClass(span, live) {
    if (span.status === "open" && live) return "open";
    return BAD.has(span.status) ? "bad" : "";
  }

  // Fills `details` with one span: its head, attributes, events, links, then
  // `more`: {content: {key: text|object} | null, bodies: [{title, text?, json?, note?}],
  // note: "..."} (what the caller has beyond the span itself).
  function renderDetails(details, span, more) {
    more = more || {};
    details.replaceChildren();
    details.appendChild(el("h3", "", span.name));
    const head = { kind: span.kind, status: span.status, span_id: span.span_id, trace_id: span.trace_id,
                   parent_id: span.parent_id || "—", seqs: span.open_seq + "–" + (span.close_seq || "open"),
                   start: new Date(span.start_us / 1000).toISOString(),
                   duration: span.close_seq ? dur(span.end_us - span.start_us) : "open" };
    details.appendChild(table(head));
    details.appendChild(el("h4", "", "Attributes"));
    details.appendChild(table(span.attrs));
    if (span.events && span.events.length) {
      details.appendChild(el("h4", "", "Events"));
      for (const e of span.events) details.appendChild(el("div", "event", "#" + e.seq + " " + e.name + " " + JSON.stringify(e.attrs)));
    }
    if (span.links && span.links.length) {
      details.appendChild(el("h4", "", "Links"));
      for (const l of span.links) details.appendChild(el("div", "link", l.reason + ": session " + l.session + ", seq " + l.seq + ", span " + l.span_id));
    }
    if (more.content) {
      details.appendChild(el("h4", "", "Content"));
      for (const key of Object.keys(more.content)) {
        const value = more.content[key];
        details.appendChild(el("div", "k", key));
        details.appendChild(el("pre", "content", typeof value === "string" ? pretty(value) : JSON.stringify(value, null, 2)));
      }
    }
    for (const body of more.bodies || []) {
      details.appendChild(el("h4", "", body.title));
      if (body.json !== undefined) details.appendChild(el("pre", "body", JSON.stringify(body.json, null, 2)));
      else if (body.text !== undefined) details.appendChild(el("pre", "body", pretty(body.text)));
      if (body.note) details.appendChild(el("p", "hint", body.note));
    }
    if (more.note) details.appendChild(el("p", "hint", more.note));
  }

  // What a text filter looks in: the span's name, kind, status, attributes and events.
  const haystacks = new WeakMap();
  function haystack(s) {
    let h = haystacks.get(s);
    if (h === undefined) {
      h = (s.name + "\n" + s.kind + "\n" + s.status + "\n" + JSON.stringify(s.attrs || {}) + "\n" +
           (s.events || []).map((e) => e.name + " " + JSON.stringify(e.attrs || {})).join("\n")).toLowerCase();
      haystacks.set(s, h);
    }
    return h;
  }

  // One session's trace, kept up to date by setTrace. trace: {session, spans
  // (in open_seq order, the session first), last_us, skeleton?, complete?:
  // false while only the spans the skeleton shows are there}. opts: {live:
  // open spans are running, not lost; state: {collapsed: Set of span ids,
  // expanded: Set of turn and fold keys, q, kind, full}, kept by the caller
  // across views; selected: a span id; onSelect(span, row); onState(state):
  // the filter changed}. Rows are .row[data-span-id] (.name, .status, a
  // timeline .bar) and .row.fold[data-fold] for a folded line.
  function traceView(opts) {
    opts = opts || {};
    const state = opts.state || {};
    state.collapsed = state.collapsed || new Set();
    state.expanded = state.expanded || new Set();
    state.q = state.q || "";
    state.kind = state.kind || "";
    state.full = !!state.full;
    let selected = opts.selected || "";
    let trace = null;
    let t = null;        // the tree: {byId, children, depth, index (of a session child), t0, total, last}
    let entries = [];    // what is shown, row by row: {span, depth, folded?, compact?} or {fold, depth}
    let window_ = [-1, -1];

    const section = el("section", "trace");
    const h = el("h2");
    const tools = el("div", "trace-tools");
    const text = el("input", "filter-text");
    text.type = "search";
    text.placeholder = "filter: name, attribute, status…";
    text.value = state.q;
    text.setAttribute("aria-label", "filter the spans by text");
    const kind = el("select", "filter-kind");
    kind.setAttribute("aria-label", "filter the spans by kind");
    const fullBox = el("input", "filter-full");
    fullBox.type = "checkbox";
    fullBox.checked = state.full;
    const fullLabel = el("label", "full");
    fullLabel.appendChild(fullBox);
    fullLabel.appendChild(document.createTextNode(" every span"));
    const count = el("span", "filter-count");
    tools.append(text, kind, fullLabel, count);
    const rows = el("div", "rows");
    section.append(h, tools, rows);

    let typing = 0;
    text.addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => { state.q = text.value; changed(); }, 150);
    });
    kind.addEventListener("change", () => { state.kind = kind.value; changed(); });
    fullBox.addEventListener("change", () => { state.full = fullBox.checked; changed(); });
    function changed() {
      layout();
      if (opts.onState) opts.onState(state);
    }

    function buildTree() {
      const spans = trace.spans;
      const byId = new Map(), children = new Map(), depth = new Map(), index = new Map();
      for (const s of spans) {
        byId.set(s.span_id, s);
        depth.set(s.span_id, s.parent_id && depth.has(s.parent_id) ? depth.get(s.parent_id) + 1 : 0);
        if (s.parent_id) {
          if (!children.has(s.parent_id)) children.set(s.parent_id, []);
          children.get(s.parent_id).push(s);
        }
      }
      const top = spans.length ? children.get(spans[0].span_id) || [] : [];
      top.forEach((s, i) => index.set(s.span_id, i));
      const t0 = spans.length ? spans[0].start_us : 0;
      let last = trace.last_us || t0;
      for (const s of spans) if (s.close_seq && s.end_us > last) last = s.end_us;
      t = { byId, children, depth, index, top, t0, last, total: Math.max(1, last - t0) };
    }

    // The entries of a span and, unless folded, what is under it. `skeleton`:
    // hooks that let a call go on are left out, as render_skeleton's
    // Renderer::span leaves them out.
    function addSpan(out, s, depth, skeleton, compact) {
      const kids = t.children.get(s.span_id) || [];
      const folded = kids.length > 0 && (compact ? !state.expanded.has(s.span_id) : state.collapsed.has(s.span_id));
      out.push({ span: s, depth, folded, compact, kids: kids.length > 0 });
      if (folded) return;
      for (const k of kids) {
        if (skeleton && k.kind === "hook" && k.status === "ok") continue;
        addSpan(out, k, depth + 1, skeleton, false);
      }
    }

    function foldKey(item) { return "fold:" + item.first; }

    function addItems(out, items) {
      for (const item of items) {
        const s = item.span ? t.byId.get(item.span) : null;
        if (item.show === "whole" && s) addSpan(out, s, 1, true, false);
        else if (item.show === "compact" && s) addSpan(out, s, 1, true, true);
        else if (item.show === "fold") {
          const open = state.expanded.has(foldKey(item));
          out.push({ fold: item, depth: 1, folded: !open });
          if (!open) continue;
          if (item.items) { addItems(out, item.items); continue; }
          const from = t.index.get(item.first), to = t.index.get(item.last);
          if (from === undefined || to === undefined) continue;
          for (let i = from; i <= to; ++i) addSpan(out, t.top[i], 1, true, t.top[i].kind === "turn");
        }
      }
    }

    function computeEntries() {
      const spans = trace.spans;
      const out = [];
      if (!spans.length) return out;
      const q = state.q.trim().toLowerCase();
      if (q || state.kind) {
        for (const s of spans) {
          if (state.kind && s.kind !== state.kind) continue;
          if (q && !haystack(s).includes(q)) continue;
          out.push({ span: s, depth: t.depth.get(s.span_id), folded: false, kids: false });
        }
        return out;
      }
      if (state.full || !Array.isArray(trace.skeleton)) {
        addSpan(out, spans[0], 0, false, false);
        return out;
      }
      const root = spans[0];
      const folded = state.collapsed.has(root.span_id);
      out.push({ span: root, depth: 0, folded, kids: t.top.length > 0 });
      if (!folded) addItems(out, trace.skeleton);
      return out;
    }

    function bar(cls, start, end) {
      const lane = el("div", "lane");
      const b = el("div", "bar " + cls);
      b.style.left = (100 * Math.max(0, start - t.t0) / t.total) + "%";
      b.style.width = (100 * Math.max(0, Math.min(end, t.last) - Math.max(start, t.t0)) / t.total) + "%";
      lane.appendChild(b);
      return lane;
    }

    function spanRow(entry) {
      const s = entry.span;
      const row = el("div", "row");
      row.setAttribute("data-span-id", s.span_id);
      row.setAttribute("data-kind", s.kind);
      const label = el("div", "label");
      label.style.paddingLeft = (entry.depth * 16) + "px";
      if (entry.folded) row.dataset.collapsed = "1";
      const toggle = el("span", "toggle", entry.kids ? (entry.folded ? "▸" : "▾") : "");
      label.appendChild(toggle);
      label.appendChild(el("span", "name", s.name));
      const cls = statusClass(s, opts.live);
      label.appendChild(el("span", "status" + (cls ? " " + cls : ""), s.status));
      if (entry.compact) {
        const item = t.steps && t.steps.get(s.span_id);
        if (item) label.appendChild(el("span", "steps", item));
      }
      row.appendChild(label);
      const end = s.close_seq ? s.end_us : t.last;
      row.appendChild(el("div", "dur", s.close_seq ? dur(s.end_us - s.start_us) : "open"));
      row.appendChild(bar(s.kind + (cls ? " " + cls : ""), s.start_us, end));
      if (entry.kids) {
        toggle.addEventListener("click", (ev) => {
          ev.stopPropagation();
          const set = entry.compact ? state.expanded : state.collapsed;
          const key = s.span_id;
          if (set.has(key)) set.delete(key); else set.add(key);
          layout();
        });
      }
      row.addEventListener("click", () => {
        selected = s.span_id;
        for (const r of section.querySelectorAll(".row.selected")) r.classList.remove("selected");
        row.classList.add("selected");
        if (opts.onSelect) opts.onSelect(s, row);
      });
      if (selected === s.span_id) row.classList.add("selected");
      return row;
    }

    function foldRow(entry) {
      const item = entry.fold;
      const row = el("div", "row fold");
      row.setAttribute("data-fold", item.first);
      if (entry.folded) row.dataset.collapsed = "1";
      const label = el("div", "label");
      label.style.paddingLeft = (entry.depth * 16) + "px";
      label.appendChild(el("span", "toggle", entry.folded ? "▸" : "▾"));
      label.appendChild(el("span", "name", item.text));
      row.appendChild(label);
      const first = t.byId.get(item.first), last = t.byId.get(item.last);
      const start = first ? first.start_us : t.t0, end = last ? (last.close_seq ? last.end_us : t.last) : start;
      row.appendChild(el("div", "dur", dur(Math.max(0, end - start))));
      row.appendChild(bar("fold", start, end));
      row.title = entry.folded ? "click to show the " + item.count + " it stands for" : "click to fold";
      row.addEventListener("click", () => {
        const key = foldKey(item);
        if (state.expanded.has(key)) state.expanded.delete(key); else state.expanded.add(key);
        layout();
      });
      return row;
    }

    // Builds the rows of `entries` on screen (all of them when they are few).
    function paint(force) {
      const n = entries.length;
      let from = 0, to = n;
      if (n > ALL_ROWS_UP_TO) {
        const top = rows.getBoundingClientRect().top;
        const first = Math.floor(Math.max(0, -top) / ROW_HEIGHT);
        from = Math.max(0, first - AROUND);
        to = Math.min(n, first + Math.ceil(window.innerHeight / ROW_HEIGHT) + AROUND);
      }
      if (!force && from === window_[0] && to === window_[1]) return;
      window_ = [from, to];
      const built = [];
      if (from > 0) { const pad = el("div", "pad"); pad.style.height = (from * ROW_HEIGHT) + "px"; built.push(pad); }
      for (let i = from; i < to; ++i) built.push(entries[i].fold ? foldRow(entries[i]) : spanRow(entries[i]));
      if (to < n) { const pad = el("div", "pad"); pad.style.height = ((n - to) * ROW_HEIGHT) + "px"; built.push(pad); }
      rows.replaceChildren(...built);
    }

    let scheduled = false;
    function onScroll() {
      if (!section.isConnected) { window.removeEventListener("scroll", onScroll); window.removeEventListener("resize", onScroll); return; }
      if (entries.length <= ALL_ROWS_UP_TO || scheduled) return;
      scheduled = true;
      requestAnimationFrame(() => { scheduled = false; paint(false); });
    }
    window.addEventListener("scroll", onScroll, { passive: true });
    window.addEventListener("resize", onScroll);

    function layout() {
      entries = computeEntries();
      const spans = trace.spans.length;
      const filtering = state.q.trim() || state.kind;
      const partial = trace.complete === false ? " (loading every span…)" : "";
      count.textContent = (filtering ? entries.length.toLocaleString() + " of " + spans.toLocaleString() + " spans match"
                                     : entries.length.toLocaleString() + " rows for " + spans.toLocaleString() + " spans") + partial;
      section.dataset.rows = String(entries.length);
      section.dataset.complete = trace.complete === false ? "0" : "1";
      paint(true);
    }

    function fillKinds() {
      const kinds = [...new Set(trace.spans.map((s) => s.kind))].sort();
      if (state.kind && !kinds.includes(state.kind)) kinds.push(state.kind);
      const want = ["", ...kinds].join("\n");
      if (kind.dataset.kinds === want) return;
      kind.dataset.kinds = want;
      kind.replaceChildren(...["", ...kinds].map((k) => {
        const o = el("option", "", k ? "kind: " + k : "every kind");
        o.value = k;
        return o;
      }));
      kind.value = state.kind;
    }

    function setTrace(next) {
      trace = next;
      section.setAttribute("data-session", trace.session);
      const spans = trace.spans;
      h.replaceChildren(document.createTextNode("session " + trace.session));
      if (spans.length) {
        h.appendChild(el("span", "meta", spans[0].attrs.provider + "/" + spans[0].attrs.model + " · " + spans[0].status + " · " +
                                         spans.length + " spans"));
      }
      buildTree();
      t.steps = new Map();
      const walk = (items) => {
        for (const item of items || []) {
          if (item.show === "compact") t.steps.set(item.span, item.steps);
          if (item.items) walk(item.items);
        }
      };
      walk(trace.skeleton);
      fillKinds();
      layout();
    }

    // Shows span `id`: opens what folds it, selects it and scrolls it into view.
    function reveal(id) {
      selected = id;
      if (!t || !t.byId.has(id)) return;
      const s = t.byId.get(id);
      let turn = t.index.has(id) ? s : null;  // the child of the session it is under
      for (let p = s.parent_id && t.byId.get(s.parent_id); p; p = p.parent_id && t.byId.get(p.parent_id)) {
        state.collapsed.delete(p.span_id);
        state.expanded.add(p.span_id);
        if (t.index.has(p.span_id)) turn = p;
      }
      const at = turn ? t.index.get(turn.span_id) : -1;
      const open = (items) => {
        for (const item of items || []) {
          if (item.show !== "fold") continue;
          const from = t.index.get(item.first), to = t.index.get(item.last);
          if (at >= from && at <= to) { state.expanded.add(foldKey(item)); open(item.items); }
        }
      };
      if (at >= 0) open(trace.skeleton);
      layout();
      const i = entries.findIndex((e) => e.span && e.span.span_id === id);
      if (i >= 0 && entries.length > ALL_ROWS_UP_TO) {
        const top = rows.getBoundingClientRect().top + window.scrollY + i * ROW_HEIGHT;
        if (top < window.scrollY || top > window.scrollY + window.innerHeight - ROW_HEIGHT) window.scrollTo(0, top - window.innerHeight / 3);
        paint(false);
      }
      const row = rows.querySelector('.row[data-span-id="' + id.replace(/[^0-9a-f]/g, "") + '"]');
      if (row) {
        for (const r of section.querySelectorAll(".row.selected")) r.classList.remove("selected");
        row.classList.add("selected");
        if (entries.length <= ALL_ROWS_UP_TO && row.scrollIntoViewIfNeeded) row.scrollIntoViewIfNeeded();
      }
    }

    return { element: section, setTrace, reveal, state };
  }

  // One session's trace as a section (see traceView).
  function renderTrace(trace, opts) {
    const view = traceView(opts);
    view.setTrace(trace);
    return view.element;
  }

  return { BAD, el, dur, table, pretty, renderDetails, renderTrace, traceView };
})();
