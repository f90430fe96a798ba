// A small MCP server for the tests (stdio transport, newline-delimited
// JSON-RPC 2.0), which misbehaves on demand.
//
// Tools: echo {text} (read-only), add {a, b} (idempotent), note {text}
// (appends to notes.txt in its working directory; neither), crash (exits
// mid-call), hang (never answers; notes cancellations in --calls), big {bytes} (a text block of that many
// 'x'), rich (an image block, a resource and structuredContent), fail
// (isError), ask (sends the client a sampling/createMessage request and a
// ping, and reports what came back), env {name} (the value of a variable),
// slow {ms}, slow_echo {text, ms} (read-only).
//
// Flags: --page-size N (tools/list pages), --garbage (a non-JSON line
// before every answer), --wrong-id (answers tools/call with another id),
// --protocol V (answers initialize with V), --no-initialize (never answers
// it), --invalid-schema (adds a tool "broken" with an invalid inputSchema),
// --list-changed (after the first call, adds a tool "extra" and says so),
// --list-changed-after-list (the same right after the first tools/list),
// --stderr TEXT (printed on stderr at start), --exit-at-start N (exits with
// N at once), --ignore-term (ignores SIGTERM and stdin's end), --child
// (starts a `sleep 600` child at start), --calls FILE (appends the tool's
// name for each tools/call it runs), --fast (slow and slow_echo do not wait),
// --stderr-flood N (writes N numbered lines on stderr at start, from a
// thread, as fast as it can; 0: without end).
//
// --escapes adds a tool whose description holds terminal controls and one
// whose name does. Tool flood_stdout {bytes} answers with one line of that many bytes,
// written 1 MiB at a time (never held whole). Tool deep_result {depth}
// (listed with --deep-result) answers with structuredContent nested that
// deep, and --deep-schema N adds
// a tool "deep" whose inputSchema nests N deep (both written as text: the
// server itself never holds such a value).

#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

using nlohmann::json;

namespace {

struct Flags {
  size_t page_size = 0;
  bool garbage = false;
  bool wrong_id = false;
  std::string protocol = "2025-11-25";
  bool no_initialize = false;
  bool invalid_schema = false;
  bool list_changed = false;
  bool ignore_term = false;
  std::string calls_file;
  bool fast = false;
  bool list_changed_after_list = false;
  size_t deep_schema = 0;
  bool deep_result = false;
  bool escapes = false;
};

// {"a":{"a":...1...}}, `depth` objects deep.
std::string nested_text(size_t depth) {
  std::string out;
  out.reserve(depth * 6 + 1);
  for (size_t k = 0; k < depth; ++k) out += "{\"a\":";
  out += "1";
  out.append(depth, '}');
  return out;
}

Flags flags;
bool extra_tool = false;

void write_line(const json& message) {
  if (flags.garbage)
    std::cout << "this is not JSON {"
              << "\n";
  std::cout << message.dump() << "\n" << std::flush;
}

json schema(json properties, std::vector<std::string> required) {
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", required}};
}

json tool(const std::string& name, const std::string& description, json input, json annotations = nullptr) {
  json t = {{"name", name}, {"description", description}, {"inputSchema", std::move(input)}};
  if (!annotations.is_null()) t["annotations"] = std::move(annotations);
  return t;
}

std::vector<json> tools() {
  json text_prop = {{"text", {{"type", "string"}}}};
  std::vector<json> out = {
      tool("echo", "Returns its text", schema(text_prop, {"text"}), {{"readOnlyHint", true}}),
      tool("add", "Adds a and b",
           schema({{"a", {{"type", "number"}}}, {"b", {{"type", "number"}}}}, {"a", "b"}),
           {{"idempotentHint", true}}),
      tool("note", "Appends text to notes.txt", schema(text_prop, {"text"})),
      tool("crash", "Exits in the middle of the call", schema(json::object(), {})),
      tool("hang", "Never answers", schema(json::object(), {})),
      tool("big", "Returns that many bytes", schema({{"bytes", {{"type", "integer"}}}}, {"bytes"})),
      tool("rich", "Returns an image, a resource and structured content", schema(json::object(), {})),
      tool("fail", "Fails", schema(json::object(), {})),
      tool("ask", "Asks the client something", schema(json::object(), {})),
      tool("env", "Returns an environment variable", schema({{"name", {{"type", "string"}}}}, {"name"})),
      tool("slow", "Answers after ms milliseconds", schema({{"ms", {{"type", "integer"}}}}, {"ms"})),
      tool("slow_echo", "Returns its text after ms milliseconds",
           schema({{"text", {{"type", "string"}}}, {"ms", {{"type", "integer"}}}}, {"text"}),
           {{"readOnlyHint", true}}),
  };
  if (flags.invalid_schema) {
    out.push_back(tool("broken", "Has a bad schema", {{"type", "string"}}));
    out.push_back({{"name", "bad name!"}, {"inputSchema", schema(json::object(), {})}});
  }
  if (extra_tool) out.push_back(tool("extra", "Appeared after a call", schema(json::object(), {})));
  if (flags.escapes) {
    // A title change, a screen clear and an 8-bit CSI in what a client prints.
    out.push_back(tool("ansi",
                       "Harmless\x1b]0;pwned\x07\x1b[2J\xc2\x9b"
                       "31m",
                       schema(json::object(), {})));
    out.push_back(tool("esc\x1b[31mname", "A name with a control in it", schema(json::object(), {})));
  }
  if (flags.deep_result) {
    out.push_back(tool("deep_result", "Returns structured content nested depth deep",
                       schema({{"depth", {{"type", "integer"}}}}, {"depth"}), {{"readOnlyHint", true}}));
  }
  return out;
}

json text_result(const std::string& text, bool is_error = false) {
  return {{"content", json::array({{{"type", "text"}, {"text", text}}})}, {"isError", is_error}};
}

// Reads lines until the answer to `id` arrives; returns it.
json await_answer(const std::string& id) {
  std::string line;
  while (std::getline(std::cin, line)) {
    json m = json::parse(line, nullptr, false);
    if (m.is_object() && m.contains("id") && m["id"] == id && !m.contains("method")) return m;
  }
  std::exit(0);
}

json call(const std::string& name, const json& args) {
  if (!flags.calls_file.empty()) std::ofstream(flags.calls_file, std::ios::app) << name << "\n";
  if (name == "echo") return text_result(args.value("text", ""));
  if (name == "add") return text_result(std::to_string(args.value("a", 0.0) + args.value("b", 0.0)));
  if (name == "note") {
    std::ofstream("notes.txt", std::ios::app) << args.value("text", "") << "\n";
    return text_result("noted");
  }
  if (name == "crash") {
    std::fprintf(stderr, "crashing on purpose\n");
    std::_Exit(7);
  }
  if (name == "hang") {
    // Never answers; notes each cancellation it hears.
    std::string line;
    while (std::getline(std::cin, line)) {
      json m = json::parse(line, nullptr, false);
      if (m.is_object() && m.value("method", "") == "notifications/cancelled" && !flags.calls_file.empty())
        std::ofstream(flags.calls_file, std::ios::app) << "cancelled\n";
    }
    if (!flags.ignore_term) std::exit(0);
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  if (name == "big") return text_result(std::string(args.value("bytes", size_t{0}), 'x'));
  if (name == "rich") {
    return {{"content",
             json::array(
                 {{{"type", "text"}, {"text", "a picture:"}},
                  {{"type", "image"}, {"data", "aGVsbG8="}, {"mimeType", "image/png"}},
                  {{"type", "resource"},
                   {"resource", {{"uri", "file:///a.txt"}, {"mimeType", "text/plain"}, {"text", "A"}}}}})},
            {"structuredContent", {{"answer", 42}}}};
  }
  if (name == "fail") return text_result("it failed on purpose", true);
  if (name == "ask") {
    write_line({{"jsonrpc", "2.0"},
                {"id", "srv-1"},
                {"method", "sampling/createMessage"},
                {"params", json::object()}});
    json a = await_answer("srv-1");
    write_line({{"jsonrpc", "2.0"}, {"id", "srv-2"}, {"method", "ping"}});
    json b = await_answer("srv-2");
    std::string first =
        a.contains("error") ? "error " + std::to_string(a["error"].value("code", 0)) : "a result";
    std::string second = b.contains("result") ? "pong" : "no pong";
    return text_result("sampling: " + first + "; ping: " + second);
  }
  if (name == "env") {
    const char* v = std::getenv(args.value("name", "").c_str());
    return text_result(v == nullptr ? "(unset)" : v);
  }
  if (name == "slow" || name == "slow_echo") {
    if (!flags.fast) std::this_thread::sleep_for(std::chrono::milliseconds(args.value("ms", 0)));
    return text_result(name == "slow" ? "done" : args.value("text", ""));
  }
  if (name == "extra" && extra_tool) return text_result("extra ran");
  return json();  // unknown
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--page-size")
      flags.page_size = std::stoul(next());
    else if (a == "--garbage")
      flags.garbage = true;
    else if (a == "--wrong-id")
      flags.wrong_id = true;
    else if (a == "--protocol")
      flags.protocol = next();
    else if (a == "--no-initialize")
      flags.no_initialize = true;
    else if (a == "--invalid-schema")
      flags.invalid_schema = true;
    else if (a == "--list-changed")
      flags.list_changed = true;
    else if (a == "--stderr")
      std::fprintf(stderr, "%s\n", next().c_str());
    else if (a == "--exit-at-start")
      return std::atoi(next().c_str());
    else if (a == "--ignore-term")
      flags.ignore_term = true;
    else if (a == "--calls")
      flags.calls_file = next();
    else if (a == "--fast")
      flags.fast = true;
    else if (a == "--list-changed-after-list")
      flags.list_changed_after_list = true;
    else if (a == "--deep-schema")
      flags.deep_schema = std::stoul(next());
    else if (a == "--deep-result")
      flags.deep_result = true;
    else if (a == "--escapes")
      flags.escapes = true;
    else if (a == "--stderr-flood") {
      long n = std::atol(next().c_str());
      std::thread([n] {
        std::string pad(60, 'x');
        for (long k = 0; n == 0 || k < n; ++k) {
          std::string line = "flood line " + std::to_string(k) + " " + pad + "\n";
          if (::write(2, line.data(), line.size()) < 0) return;
        }
      }).detach();
    } else if (a == "--child") {
      if (fork() == 0) {
        execlp("sleep", "sleep", "600", static_cast<char*>(nullptr));
        _exit(127);
      }
    }
  }
  if (flags.ignore_term) signal(SIGTERM, SIG_IGN);
  std::string line;
  for (;;) {
    if (!std::getline(std::cin, line)) {
      if (!flags.ignore_term) return 0;
      for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
    }
    json m = json::parse(line, nullptr, false);
    if (!m.is_object() || !m.contains("method")) continue;
    std::string method = m["method"];
    if (!m.contains("id")) continue;  // notifications
    json id = m["id"];
    json params = m.value("params", json::object());
    json result;
    if (method == "initialize") {
      if (flags.no_initialize) continue;
      result = {{"protocolVersion", flags.protocol},
                {"capabilities", {{"tools", {{"listChanged", true}}}}},
                {"serverInfo", {{"name", "carapace-test-server"}, {"version", "1"}}}};
    } else if (method == "ping") {
      result = json::object();
    } else if (method == "tools/list") {
      std::vector<json> all = tools();
      size_t start = params.contains("cursor") ? std::stoul(params["cursor"].get<std::string>()) : 0;
      size_t end = flags.page_size == 0 ? all.size() : std::min(all.size(), start + flags.page_size);
      result = {{"tools", json(std::vector<json>(all.begin() + static_cast<long>(start),
                                                 all.begin() + static_cast<long>(end)))}};
      if (end < all.size()) result["nextCursor"] = std::to_string(end);
      if (flags.deep_schema > 0) {
        std::string text = json{{"jsonrpc", "2.0"}, {"id", id}, {"result", result}}.dump();
        size_t at = text.find("\"tools\":[") + 9;
        text.insert(at,
                    R"({"name":"deep","description":"Deep","inputSchema":{"type":"object","properties":)" +
                        nested_text(flags.deep_schema) + "}},");
        std::cout << text << "\n" << std::flush;
        continue;
      }
      if (flags.list_changed_after_list && !extra_tool) {
        // The answer first, then (between calls) the news that the list changed.
        write_line({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
        extra_tool = true;
        write_line({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
        continue;
      }
    } else if (method == "tools/call" && params.value("name", "") == "flood_stdout") {
      size_t bytes = params.contains("arguments") ? params["arguments"].value("bytes", size_t{0}) : 0;
      std::cout << R"({"jsonrpc":"2.0","id":)" << id.dump()
                << R"(,"result":{"content":[{"type":"text","text":")";
      std::string chunk(1 << 20, 'x');
      for (size_t sent = 0; sent < bytes && std::cout; sent += chunk.size()) {
        std::cout.write(chunk.data(), static_cast<std::streamsize>(std::min(chunk.size(), bytes - sent)));
      }
      std::cout << R"("}]}})"
                << "\n"
                << std::flush;
      continue;
    } else if (method == "tools/call" && params.value("name", "") == "deep_result") {
      size_t depth = params.contains("arguments") ? params["arguments"].value("depth", size_t{0}) : 0;
      std::cout << R"({"jsonrpc":"2.0","id":)" << id.dump()
                << R"(,"result":{"content":[{"type":"text","text":"deep"}],"structuredContent":)"
                << nested_text(depth) << "}}\n"
                << std::flush;
      continue;
    } else if (method == "tools/call") {
      std::string name = params.value("name", "");
      result = call(name, params.value("arguments", json::object()));
      if (result.is_null()) {
        write_line({{"jsonrpc", "2.0"},
                    {"id", id},
                    {"error", {{"code", -32602}, {"message", "unknown tool " + name}}}});
        continue;
      }
      if (flags.list_changed && !extra_tool) {
        extra_tool = true;
        write_line({{"jsonrpc", "2.0"}, {"method", "notifications/tools/list_changed"}});
      }
      if (flags.wrong_id) id = id.is_number() ? json(id.get<int64_t>() + 1000) : json("wrong");
    } else {
      write_line(
          {{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", -32601}, {"message", "no " + method}}}});
      continue;
    }
    write_line({{"jsonrpc", "2.0"}, {"id", id}, {"result", result}});
  }
}
