#include "actors/collector/export_html.h"

#include "actors/collector/html_assets.h"
#include "actors/collector/trace_view.h"

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
main { padding: 12px 16px; }
)HTML";

// Then the shared trace view's CSS (html/trace_view.css), and:
constexpr std::string_view kBody = R"HTML(</style>
</head>
<body>
<header><h1 id="title">Carapace trace</h1></header>
<main class="trace-layout"><div id="traces"></div><aside id="details"><p class="hint">Click a span to see its details.</p></aside></main>
<script type="application/json" id="trace-data">)HTML";

// The data, then:
constexpr std::string_view kScript = R"HTML(</script>
<script>
)HTML";

// The shared trace view's script (html/trace_view.js), then what puts the data on screen:
constexpr std::string_view kTail = R"HTML(
(function () {
  const data = JSON.parse(document.getElementById("trace-data").textContent);
  const details = document.getElementById("details");
  const root = document.getElementById("traces");
  function more(trace, span) {
    const bodies = [];
    for (const which of ["request_body", "response_body"]) {
      const ref = span.attrs[which];
      if (!ref) continue;
      const body = (data.bodies || {})[ref];
      bodies.push(body === undefined
        ? { title: which.replace("_", " "), note: data.with_content ? "not in the body store" : "left out: export with --with-content to include bodies" }
        : { title: which.replace("_", " "), text: body });
    }
    return { content: (trace.content || {})[span.span_id], bodies: bodies };
  }
  const titles = [];
  for (const trace of data.traces) {
    if (!trace.spans.length) continue;
    titles.push(trace.session);
    root.appendChild(CarapaceTrace.renderTrace(trace, {
      onSelect: (span) => CarapaceTrace.renderDetails(details, span, more(trace, span)) }));
  }
  if (!titles.length) root.appendChild(CarapaceTrace.el("p", "hint", "No spans."));
  document.getElementById("title").textContent = "Carapace trace: " + titles.join(", ");
  document.title = "Carapace trace: " + titles.join(", ");
})();
</script>
</body>
</html>
)HTML";

std::string_view shared(std::string_view path) {
  for (const auto& asset : trace_html::html_assets()) {
    if (asset.path == path) return asset.body;
  }
  return {};
}

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
                      {"last_us", export_last_us(trace)}, {"spans", spans}, {"skeleton", skeleton_json(trace)},
                      {"content", content}});
  }
  json data = {{"traces", traces}, {"bodies", bodies}, {"with_content", input.with_content},
               {"generator", "carapace " + input.service_version}};
  export_redact_json(data, input);
  std::string out(kHead);
  out += shared("/trace_view.css");
  out += kBody;
  out += html_script_json(data);
  out += kScript;
  out += shared("/trace_view.js");
  out += kTail;
  return out;
}

}  // namespace carapace
