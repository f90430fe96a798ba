// Checks an OTLP/JSON export with OpenTelemetry's own definitions of the
// protocol (the protobufjs code @opentelemetry/otlp-transformer generates
// from opentelemetry-proto), then asserts the span tree and the GenAI
// attributes of a Carapace trace.
//
//   node otlp_check.js NODE_MODULES EXPORT.json [--spans N] [--content] [--response-model M]
//
// Exit 0 and one summary line when it holds; 1 and the first problem otherwise.
"use strict";
const fs = require("fs");
const path = require("path");
const assert = require("assert");

const [nodeModules, file, ...rest] = process.argv.slice(2);
const opt = { spans: -1, content: false, responseModel: "" };
for (let i = 0; i < rest.length; ++i) {
  if (rest[i] === "--spans") opt.spans = Number(rest[++i]);
  else if (rest[i] === "--content") opt.content = true;
  else if (rest[i] === "--response-model") opt.responseModel = rest[++i];
  else throw new Error("unknown option " + rest[i]);
}
const root = require(path.resolve(nodeModules, "@opentelemetry/otlp-transformer/build/src/generated/root.js"));
const Request = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

const original = JSON.parse(fs.readFileSync(file, "utf8"));
const HEX32 = /^[0-9a-f]{32}$/, HEX16 = /^[0-9a-f]{16}$/, NANOS = /^[0-9]+$/;

// The JSON mapping writes ids as hex; protobufjs' fromObject reads a string
// for a bytes field as base64: give it the bytes.
function toBytes(hex, re, what) {
  assert.match(hex, re, what + " is not lowercase hex of the right length: " + hex);
  return Buffer.from(hex, "hex");
}
const converted = JSON.parse(JSON.stringify(original));
for (const rs of converted.resourceSpans) {
  for (const ss of rs.scopeSpans) {
    for (const s of ss.spans) {
      s.traceId = toBytes(s.traceId, HEX32, "traceId");
      s.spanId = toBytes(s.spanId, HEX16, "spanId");
      if (s.parentSpanId !== undefined) s.parentSpanId = toBytes(s.parentSpanId, HEX16, "parentSpanId");
      for (const l of s.links || []) {
        l.traceId = toBytes(l.traceId, HEX32, "link traceId");
        l.spanId = toBytes(l.spanId, HEX16, "link spanId");
      }
    }
  }
}

// 1. OpenTelemetry's definitions: fromObject, verify, the binary encoding and back.
const message = Request.fromObject(converted);
const problem = Request.verify(message);
assert.strictEqual(problem, null, "ExportTraceServiceRequest.verify: " + problem);
const decoded = Request.decode(Request.encode(message).finish());
assert.strictEqual(Request.verify(decoded), null);

// 2. Nothing dropped on the way: what fromObject kept, written back as JSON,
// is the export (an unknown or misspelt field, a wrong value type, would be
// missing or changed).
const back = Request.toObject(message, { longs: String, enums: Number, bytes: String, defaults: false });
function hexIds(obj) {
  if (Array.isArray(obj)) return obj.map(hexIds);
  if (obj && typeof obj === "object") {
    const out = {};
    for (const [k, v] of Object.entries(obj)) {
      out[k] = ["traceId", "spanId", "parentSpanId"].includes(k) ? Buffer.from(v, "base64").toString("hex") : hexIds(v);
    }
    return out;
  }
  return obj;
}
// (An empty repeated field is the same as an absent one in protobuf.)
function withoutEmpty(obj) {
  if (Array.isArray(obj)) return obj.map(withoutEmpty);
  if (obj && typeof obj === "object") {
    const out = {};
    for (const [k, v] of Object.entries(obj)) {
      if (!(Array.isArray(v) && v.length === 0)) out[k] = withoutEmpty(v);
    }
    return out;
  }
  return obj;
}
assert.deepStrictEqual(withoutEmpty(hexIds(back)), withoutEmpty(original),
                       "the export does not survive OpenTelemetry's definitions unchanged");
const spansOf = (req) => req.resourceSpans.flatMap((rs) => rs.scopeSpans.flatMap((ss) => ss.spans));
const spans = spansOf(original);
const decodedSpans = spansOf(decoded);
assert.strictEqual(decodedSpans.length, spans.length, "spans lost in the binary round trip");
for (let i = 0; i < spans.length; ++i) {
  assert.strictEqual(decodedSpans[i].attributes.length, spans[i].attributes.length, "attributes lost: " + spans[i].name);
  assert.strictEqual(decodedSpans[i].events.length, (spans[i].events || []).length, "events lost: " + spans[i].name);
  assert.strictEqual(decodedSpans[i].links.length, (spans[i].links || []).length, "links lost: " + spans[i].name);
}
if (opt.spans >= 0) assert.strictEqual(spans.length, opt.spans, "span count");

// 3. The resource, the tree and the GenAI attributes.
const resAttrs = Object.fromEntries(original.resourceSpans[0].resource.attributes.map((a) => [a.key, a.value]));
assert.deepStrictEqual(resAttrs["service.name"], { stringValue: "carapace" });
assert.ok(resAttrs["service.version"] && resAttrs["service.version"].stringValue, "service.version");

function attrs(s) {
  const out = {};
  for (const a of s.attributes) {
    assert.ok(!(a.key in out), s.name + ": attribute " + a.key + " twice");
    const kinds = Object.keys(a.value);
    assert.strictEqual(kinds.length, 1, a.key + ": one typed value");
    out[a.key] = a.value;
  }
  return out;
}
const str = (v) => (v && "stringValue" in v ? v.stringValue : undefined);
const int = (v) => (v && "intValue" in v ? BigInt(v.intValue) : undefined);
const byId = new Map();
for (const s of spans) {
  assert.ok(!byId.has(s.spanId), "span id twice: " + s.spanId);
  byId.set(s.spanId, s);
}
const count = { invoke_agent: 0, chat: 0, execute_tool: 0, other: 0 };
for (const s of spans) {
  const a = attrs(s);
  assert.match(s.startTimeUnixNano, NANOS);
  assert.match(s.endTimeUnixNano, NANOS);
  assert.ok(BigInt(s.endTimeUnixNano) >= BigInt(s.startTimeUnixNano), s.name + ": ends before it starts");
  assert.ok(str(a["gen_ai.conversation.id"]), s.name + ": gen_ai.conversation.id");
  for (const key of Object.keys(a)) {
    assert.ok(/^(gen_ai|error|carapace)\./.test(key), s.name + ": attribute outside gen_ai./error./carapace.: " + key);
  }
  if (s.parentSpanId !== undefined) {
    const parent = byId.get(s.parentSpanId);
    assert.ok(parent, s.name + ": parent " + s.parentSpanId + " is not in the export");
    assert.strictEqual(parent.traceId, s.traceId, s.name + ": parent in another trace");
  }
  if (s.status.code === 2) {
    assert.ok(str(a["error.type"]), s.name + ": an error without error.type");
    assert.ok(s.status.message, s.name + ": an error without a message");
  }
  const op = str(a["gen_ai.operation.name"]);
  const kind = str(a["carapace.kind"]);
  if (kind === "session") {
    ++count.invoke_agent;
    assert.strictEqual(s.parentSpanId, undefined, "the session span is a root");
    assert.strictEqual(op, "invoke_agent");
    assert.strictEqual(s.name, "invoke_agent " + str(a["gen_ai.agent.name"]));
    assert.strictEqual(s.kind, 1, "invoke_agent is INTERNAL");
    assert.ok(str(a["gen_ai.provider.name"]), "invoke_agent: gen_ai.provider.name");
    assert.ok(str(a["gen_ai.request.model"]), "invoke_agent: gen_ai.request.model");
  } else if (kind === "llm") {
    ++count.chat;
    assert.strictEqual(op, "chat");
    assert.strictEqual(s.kind, 3, "chat is CLIENT");
    assert.strictEqual(s.name, "chat " + str(a["gen_ai.request.model"]));
    assert.ok(str(a["gen_ai.provider.name"]), s.name + ": gen_ai.provider.name");
    assert.strictEqual(str(a["carapace.kind"] && byId.get(s.parentSpanId) && attrs(byId.get(s.parentSpanId))["carapace.kind"]), "turn",
                       s.name + ": a model call's parent is its turn");
    if (str(a["carapace.status"]) === "ok") {
      assert.strictEqual(s.status.code, 1);
      const reasons = a["gen_ai.response.finish_reasons"];
      assert.ok(reasons && reasons.arrayValue && reasons.arrayValue.values.length === 1 && str(reasons.arrayValue.values[0]),
                s.name + ": gen_ai.response.finish_reasons is an array of strings");
      assert.ok(int(a["gen_ai.usage.input_tokens"]) > 0n, s.name + ": gen_ai.usage.input_tokens");
      assert.ok(int(a["gen_ai.usage.output_tokens"]) >= 0n, s.name + ": gen_ai.usage.output_tokens");
      assert.ok(int(a["gen_ai.usage.cache_read.input_tokens"]) >= 0n, s.name + ": cache read tokens");
      assert.ok(int(a["gen_ai.usage.cache_creation.input_tokens"]) >= 0n, s.name + ": cache creation tokens");
      if (opt.responseModel) {
        assert.strictEqual(str(a["gen_ai.response.model"]), opt.responseModel, s.name + ": gen_ai.response.model");
        assert.ok(str(a["gen_ai.response.id"]), s.name + ": gen_ai.response.id");
      }
      if (opt.content) {
        const output = JSON.parse(str(a["gen_ai.output.messages"]));
        assert.strictEqual(output[0].role, "assistant");
        assert.ok(Array.isArray(output[0].parts) && output[0].parts.length > 0, "output message parts");
      }
    } else {
      assert.strictEqual(s.status.code, 2, s.name + ": a failed model call is an ERROR");
    }
    if (!opt.content) assert.ok(!("gen_ai.input.messages" in a) && !("gen_ai.output.messages" in a), "content without --with-content");
  } else if (kind === "tool") {
    ++count.execute_tool;
    assert.strictEqual(op, "execute_tool");
    assert.strictEqual(s.kind, 1, "execute_tool is INTERNAL");
    assert.strictEqual(s.name, "execute_tool " + str(a["gen_ai.tool.name"]));
    assert.ok(str(a["gen_ai.tool.call.id"]), s.name + ": gen_ai.tool.call.id");
  } else {
    ++count.other;
    assert.ok(op === undefined, s.name + ": no GenAI operation");
  }
}
const traces = new Set(spans.map((s) => s.traceId));
assert.strictEqual(count.invoke_agent, traces.size, "one invoke_agent root per trace");
assert.ok(count.chat > 0, "no chat span");
console.log(`otlp_check: ${path.basename(file)}: ${spans.length} spans (${count.invoke_agent} invoke_agent, ${count.chat} chat, ` +
            `${count.execute_tool} execute_tool, ${count.other} other) pass OpenTelemetry's definitions and the GenAI checks`);
