// The trace view: a session's spans as a collapsible tree beside a timeline,
// and one span's details. Shared by the HTML export (inlined in its one file)
// and the page of `carapace serve` (served as /trace_view.js). Every name,
// attribute and body is hostile text: the DOM is built with createElement
// and textContent only.
"use strict";
var CarapaceTrace = (function () {
  const BAD = new Set(["error", "failed", "crashed", "timed_out", "interrupted", "denied", "stopped", "open", "rolled_back"]);

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

  // One session's spans (in open_seq order, the session span first) as a
  // section: a row per span (.row[data-span-id] with .name, .status and a
  // timeline .bar). trace: {session, spans, last_us}. opts: {live: open spans
  // are running, not lost; collapsed: a Set of span ids kept across renders;
  // selected: a span id; onSelect(span, row)}.
  function renderTrace(trace, opts) {
    opts = opts || {};
    const collapsed = opts.collapsed || new Set();
    const spans = trace.spans;
    const section = el("section", "trace");
    section.setAttribute("data-session", trace.session);
    const h = el("h2", "", "session " + trace.session);
    if (spans.length) {
      h.appendChild(el("span", "meta", spans[0].attrs.provider + "/" + spans[0].attrs.model + " · " + spans[0].status + " · " +
                                       spans.length + " spans"));
    }
    section.appendChild(h);
    if (!spans.length) return section;
    const t0 = spans[0].start_us;
    let last = trace.last_us || t0;
    for (const s of spans) if (s.close_seq && s.end_us > last) last = s.end_us;
    const total = Math.max(1, last - t0);
    const children = new Map(), depth = new Map(), rows = new Map();
    for (const s of spans) {
      depth.set(s.span_id, s.parent_id && depth.has(s.parent_id) ? depth.get(s.parent_id) + 1 : 0);
      if (s.parent_id) { if (!children.has(s.parent_id)) children.set(s.parent_id, []); children.get(s.parent_id).push(s.span_id); }
    }
    function setHidden(id, hidden) {
      for (const c of children.get(id) || []) {
        const r = rows.get(c);
        if (!r) continue;
        r.hidden = hidden;
        if (hidden || r.dataset.collapsed !== "1") setHidden(c, hidden);
      }
    }
    for (const s of spans) {
      const row = el("div", "row");
      row.setAttribute("data-span-id", s.span_id);
      row.setAttribute("data-kind", s.kind);
      const label = el("div", "label");
      label.style.paddingLeft = (depth.get(s.span_id) * 16) + "px";
      const hasKids = children.has(s.span_id);
      const folded = hasKids && collapsed.has(s.span_id);
      if (folded) row.dataset.collapsed = "1";
      const toggle = el("span", "toggle", hasKids ? (folded ? "▸" : "▾") : "");
      label.appendChild(toggle);
      label.appendChild(el("span", "name", s.name));
      const cls = statusClass(s, opts.live);
      label.appendChild(el("span", "status" + (cls ? " " + cls : ""), s.status));
      row.appendChild(label);
      const end = s.close_seq ? s.end_us : last;
      row.appendChild(el("div", "dur", s.close_seq ? dur(s.end_us - s.start_us) : "open"));
      const lane = el("div", "lane");
      const bar = el("div", "bar " + s.kind + (cls ? " " + cls : ""));
      bar.style.left = (100 * Math.max(0, s.start_us - t0) / total) + "%";
      bar.style.width = (100 * Math.max(0, Math.min(end, last) - Math.max(s.start_us, t0)) / total) + "%";
      lane.appendChild(bar);
      row.appendChild(lane);
      if (hasKids) {
        toggle.addEventListener("click", (ev) => {
          ev.stopPropagation();
          const was = row.dataset.collapsed === "1";
          row.dataset.collapsed = was ? "0" : "1";
          toggle.textContent = was ? "▾" : "▸";
          if (was) collapsed.delete(s.span_id); else collapsed.add(s.span_id);
          setHidden(s.span_id, !was);
        });
      }
      row.addEventListener("click", () => {
        for (const r of document.querySelectorAll(".row.selected")) r.classList.remove("selected");
        row.classList.add("selected");
        if (opts.onSelect) opts.onSelect(s, row);
      });
      if (opts.selected === s.span_id) row.classList.add("selected");
      rows.set(s.span_id, row);
      section.appendChild(row);
    }
    for (const id of collapsed) if (rows.has(id) && children.has(id)) setHidden(id, true);
    return section;
  }

  return { BAD, el, dur, table, pretty, renderDetails, renderTrace };
})();
