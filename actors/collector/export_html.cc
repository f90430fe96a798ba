#include "actors/collector/export_html.h"

namespace carapace {
namespace {

using nlohmann::json;

constexpr std::string_view kHead = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Carapace trace</title>
<style>
body { font: 13px/1.4 system-ui, sans-serif; margin: 0; color: #1d2329; background: #fafbfc; }
header { padding: 10px 16px; background: #1d2329; color: #fff; }
header h1 { font-size: 15px; margin: 0; }
main { display: flex; gap: 12px; padding: 12px 16px; align-items: flex-start; }
#traces { flex: 3; min-width: 0; }
#details { flex: 2; min-width: 0; position: sticky; top: 8px; background: #fff; border: 1px solid #d8dee4;
           border-radius: 6px; padding: 10px; max-height: 92vh; overflow: auto; }
section.trace { background: #fff; border: 1px solid #d8dee4; border-radius: 6px; margin-bottom: 12px; }
section.trace h2 { font-size: 14px; margin: 0; padding: 8px 10px; border-bottom: 1px solid #d8dee4; }
.meta { color: #57606a; font-weight: normal; margin-left: 8px; }
.row { display: flex; align-items: center; cursor: pointer; border-bottom: 1px solid #f0f2f4; height: 24px; }
.row[hidden] { display: none; }
.row:hover { background: #f3f6f9; }
.row.selected { background: #ddf4ff; }
.label { flex: 0 0 45%; display: flex; align-items: center; overflow: hidden; white-space: nowrap; }
.toggle { width: 16px; flex: 0 0 16px; text-align: center; color: #57606a; }
.name { overflow: hidden; text-overflow: ellipsis; }
.status { margin-left: 6px; font-size: 11px; padding: 0 4px; border-radius: 3px; background: #eaeef2; }
.status.bad { background: #ffebe9; color: #a40e26; }
.dur { flex: 0 0 70px; text-align: right; color: #57606a; padding-right: 6px; }
.lane { flex: 1; position: relative; height: 12px; background: #f6f8fa; margin-right: 8px; }
.bar { position: absolute; top: 0; height: 12px; min-width: 2px; border-radius: 2px; background: #8c959f; }
.bar.session { background: #6e7781; } .bar.turn { background: #54aeff; } .bar.llm { background: #8250df; }
.bar.tool { background: #1a7f37; } .bar.hook { background: #bf8700; } .bar.resume { background: #cf222e; }
.bar.bad { outline: 2px solid #cf222e; }
#details h3 { margin: 0 0 6px; font-size: 14px; word-break: break-all; }
#details table { border-collapse: collapse; width: 100%; }
#details td { border-top: 1px solid #f0f2f4; padding: 2px 4px; vertical-align: top; word-break: break-all; }
#details td.k { color: #57606a; white-space: nowrap; width: 1%; }
#details pre { background: #f6f8fa; padding: 6px; white-space: pre-wrap; word-break: break-all; max-height: 40vh; overflow: auto; }
#details h4 { margin: 10px 0 4px; }
.hint { color: #57606a; }
</style>
</head>
<body>
<header><h1 id="title">Carapace trace</h1></header>
<main><div id="traces"></div><aside id="details"><p class="hint">Click a span to see its details.</p></aside></main>
<script type="application/json" id="trace-data">)HTML";

constexpr std::string_view kTail = R"HTML(</script>
<script>
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("trace-data").textContent);
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
    for (const key of Object.keys(obj)) {
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
  const details = document.getElementById("details");
  function select(row, span, trace) {
    for (const r of document.querySelectorAll(".row.selected")) r.classList.remove("selected");
    row.classList.add("selected");
    details.replaceChildren();
    details.appendChild(el("h3", "", span.name));
    const head = { kind: span.kind, status: span.status, span_id: span.span_id, trace_id: span.trace_id,
                   parent_id: span.parent_id || "—", seqs: span.open_seq + "–" + (span.close_seq || "open"),
                   start: new Date(span.start_us / 1000).toISOString(),
                   duration: span.close_seq ? dur(span.end_us - span.start_us) : "open" };
    details.appendChild(table(head));
    details.appendChild(el("h4", "", "Attributes"));
    details.appendChild(table(span.attrs));
    if (span.events.length) {
      details.appendChild(el("h4", "", "Events"));
      for (const e of span.events) details.appendChild(el("div", "event", "#" + e.seq + " " + e.name + " " + JSON.stringify(e.attrs)));
    }
    if (span.links.length) {
      details.appendChild(el("h4", "", "Links"));
      for (const l of span.links) details.appendChild(el("div", "link", l.reason + ": session " + l.session + ", seq " + l.seq + ", span " + l.span_id));
    }
    const content = (trace.content || {})[span.span_id];
    if (content) {
      details.appendChild(el("h4", "", "Content"));
      for (const key of Object.keys(content)) {
        details.appendChild(el("div", "k", key));
        details.appendChild(el("pre", "content", typeof content[key] === "string" ? content[key] : JSON.stringify(content[key], null, 2)));
      }
    }
    for (const which of ["request_body", "response_body"]) {
      const ref = span.attrs[which];
      if (!ref) continue;
      details.appendChild(el("h4", "", which.replace("_", " ")));
      const body = (data.bodies || {})[ref];
      details.appendChild(body === undefined ? el("p", "hint", data.with_content ? "not in the body store" : "left out: export with --with-content to include bodies")
                                             : el("pre", "body", pretty(body)));
    }
  }
  const root = document.getElementById("traces");
  const titles = [];
  for (const trace of data.traces) {
    const spans = trace.spans;
    if (!spans.length) continue;
    titles.push(trace.session);
    const section = el("section", "trace");
    section.setAttribute("data-session", trace.session);
    const h = el("h2", "", "session " + trace.session);
    h.appendChild(el("span", "meta", spans[0].attrs.provider + "/" + spans[0].attrs.model + " · " + spans[0].status + " · " + spans.length + " spans"));
    section.appendChild(h);
    const t0 = spans[0].start_us;
    const total = Math.max(1, trace.last_us - t0);
    const children = new Map(), depth = new Map(), rows = new Map();
    for (const s of spans) {
      depth.set(s.span_id, s.parent_id && depth.has(s.parent_id) ? depth.get(s.parent_id) + 1 : 0);
      if (s.parent_id) { if (!children.has(s.parent_id)) children.set(s.parent_id, []); children.get(s.parent_id).push(s.span_id); }
    }
    function setHidden(id, hidden) {
      for (const c of children.get(id) || []) {
        const r = rows.get(c);
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
      const toggle = el("span", "toggle", hasKids ? "▾" : "");
      label.appendChild(toggle);
      label.appendChild(el("span", "name", s.name));
      label.appendChild(el("span", "status" + (BAD.has(s.status) ? " bad" : ""), s.status));
      row.appendChild(label);
      const end = s.close_seq ? s.end_us : trace.last_us;
      row.appendChild(el("div", "dur", s.close_seq ? dur(s.end_us - s.start_us) : "open"));
      const lane = el("div", "lane");
      const bar = el("div", "bar " + s.kind + (BAD.has(s.status) ? " bad" : ""));
      bar.style.left = (100 * (s.start_us - t0) / total) + "%";
      bar.style.width = (100 * Math.max(0, end - s.start_us) / total) + "%";
      lane.appendChild(bar);
      row.appendChild(lane);
      if (hasKids) {
        toggle.addEventListener("click", (ev) => {
          ev.stopPropagation();
          const collapsed = row.dataset.collapsed === "1";
          row.dataset.collapsed = collapsed ? "0" : "1";
          toggle.textContent = collapsed ? "▾" : "▸";
          setHidden(s.span_id, !collapsed);
        });
      }
      row.addEventListener("click", () => select(row, s, trace));
      rows.set(s.span_id, row);
      section.appendChild(row);
    }
    root.appendChild(section);
  }
  if (!titles.length) root.appendChild(el("p", "hint", "No spans."));
  document.getElementById("title").textContent = "Carapace trace: " + titles.join(", ");
  document.title = "Carapace trace: " + titles.join(", ");
})();
</script>
</body>
</html>
)HTML";

}  // namespace

std::string html_script_json(const json& j) {
  std::string text = j.dump(-1, ' ', true, json::error_handler_t::replace);  // ASCII: U+2028/9 escaped too
  std::string out;
  out.reserve(text.size() + text.size() / 16);
  for (char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else {
      out += c;
    }
  }
  return out;
}

std::string export_html(const ExportInput& input) {
  json traces = json::array();
  json bodies = json::object();
  for (const auto& trace : input.traces) {
    if (trace.empty()) continue;
    json spans = json::array();
    json content = json::object();
    for (const auto& sp : trace) {
      spans.push_back(span_to_json(sp));
      if (!input.with_content) continue;
      auto c = input.content.find(sp.span_id);
      if (c != input.content.end()) content[sp.span_id] = c->second;
      for (const char* which : {"request_body", "response_body"}) {
        auto b = input.bodies.find(sp.attrs.value(which, std::string()));
        if (b != input.bodies.end()) bodies[b->first] = b->second;
      }
    }
    traces.push_back({{"session", trace[0].session}, {"trace_id", trace[0].trace_id},
                      {"last_us", export_last_us(trace)}, {"spans", spans}, {"content", content}});
  }
  json data = {{"traces", traces}, {"bodies", bodies}, {"with_content", input.with_content},
               {"generator", "carapace " + input.service_version}};
  export_redact_json(data, input);
  std::string out(kHead);
  out += html_script_json(data);
  out += kTail;
  return out;
}

}  // namespace carapace
