// Opens the page of a hosting `carapace serve` in Debian's Chromium, headless, and drives it as a
// person would (serve_host_check.sh makes the home, its approval policy and the scenario):
//
//   1. a session started from the list's New session form; the page goes to its view;
//   2. it parks on write_file: status `waiting`, an approval card (tool, args, reason), Approve;
//   3. the answer arrives in the chat log, streamed first (`delta` frames for the session);
//   4. a message from the chat box (Enter), its slow answer streaming in, then in the log;
//   5. a second session: "waiting for you" on the list, its card, Deny with a reason; a message
//      whose answer is slow, Stop while it runs (`stopped`), Resume (`completed`), Fork at turn 1
//      (the fork's view opens and it completes);
//   6. a fork of the first at turn 3 with a task (the Fork controls' task): its model asks a
//      question (ask_user); the question's card, answered from it;
//   7. the API from Node: a POST without the token gets 401, one with an unknown field 400, a
//      second decision 409 naming the first;
//   8. a second server on the same home (read-only: the host holds it): its page shows the
//      conversation and the read-only note, and no write control.
//
// Every request to another origin is aborted and counted; the token is in no address the page asks
// for; no HTTP error and no console error in the page.
//
//   node serve_host_check.js NODE_MODULES URL --bin CARAPACE --home HOME [--screenshots DIR]
// (--screenshots: writes serve-host-approval.png, serve-host-chat.png and serve-host-list.png there.)
//
// Exit 0 and one line per step when it holds; 1 and what was expected otherwise.
"use strict";
const path = require("path");
const assert = require("assert");
const { spawn } = require("child_process");

const [nodeModules, url, ...rest] = process.argv.slice(2);
const opt = { bin: "", home: "", screenshots: "" };
for (let i = 0; i < rest.length; ++i) {
  const key = rest[i].replace(/^--/, "").replace(/-([a-z])/g, (_, c) => c.toUpperCase());
  if (!(key in opt)) throw new Error("unknown option " + rest[i]);
  opt[key] = rest[++i];
}
const { chromium } = require(path.resolve(nodeModules, "playwright-core"));
const base = new URL(url);
const token = (/^#token=(.+)$/.exec(base.hash) || [])[1] || "";
const WAIT = { timeout: 20000 };
const started = Date.now();
const SLOW_ANSWER = "Thinking it over slowly: this answer takes its time to arrive.";

function step(text) { console.log("serve_host_check: " + text); }

async function until(check, what, timeout = WAIT.timeout) {
  for (const end = Date.now() + timeout; !(await check()); await new Promise((r) => setTimeout(r, 50))) {
    if (Date.now() > end) throw new Error("timed out after " + timeout + " ms waiting for " + what);
  }
}

// The API from Node, as a program would call it: {status, body}.
async function call(method, p, body, { auth = true, origin = base.origin } = {}) {
  const headers = {};
  if (auth && token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(new URL(p, origin), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let parsed = null;
  try { parsed = await res.json(); } catch (e) { parsed = null; }
  return { status: res.status, body: parsed };
}

// `carapace serve --port 0` on the same home (read-only, since the host holds it): {child, url}.
async function startReadOnly() {
  const child = spawn(opt.bin, ["--home", opt.home, "serve", "--port", "0", "--read-only"], { stdio: ["ignore", "pipe", "pipe"] });
  let out = "", err = "";
  child.stderr.on("data", (d) => { err += d; });
  const found = await new Promise((resolve) => {
    child.stdout.on("data", (d) => {
      out += d;
      const m = /listening on (http:\S+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on("exit", () => resolve(""));
    setTimeout(() => resolve(""), 10000);
  });
  if (!found) throw new Error("a second carapace serve --read-only did not start: " + out + err);
  return { child, url: found };
}

(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
                                          args: ["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"] });
  let failed = false;
  let second = null;
  try {
    assert.ok(token, "the URL carapace serve printed carries #token=: " + url);
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    const blocked = [];
    await context.route("**/*", (route) => {
      const u = new URL(route.request().url());
      if (u.hostname === "127.0.0.1") return route.continue();
      blocked.push(u.href);
      return route.abort();
    });
    const tab = await context.newPage();
    const errors = [];
    const addresses = [];  // every address the page asked for, to see the token is in none
    tab.on("request", (r) => addresses.push(r.url()));
    tab.on("pageerror", (e) => errors.push("page error: " + e.message));
    tab.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
    tab.on("response", (r) => { if (r.status() >= 400) errors.push("HTTP " + r.status() + " for " + r.request().method() + " " + r.url()); });
    const received = [];
    tab.on("websocket", (ws) => {
      addresses.push(ws.url());
      if (new URL(ws.url()).host !== base.host) blocked.push(ws.url());
      ws.on("framereceived", (f) => {
        let m;
        try { m = JSON.parse(f.payload); } catch (e) { m = { payload: f.payload }; }
        if (m && typeof m === "object") m.at_ms = Date.now();
        received.push(m);
      });
    });
    // What the socket brought for a session since frame `from`, in short: for messages.
    const framesOf = (session, from) => received.slice(from).filter((m) => m.session === session || (m.session && m.session.id === session))
      .map((m) => (m.at_ms - started) + " ms " + (m.type === "delta" ? "delta " + JSON.stringify(m.text)
                                                   : m.type === "session" ? "row " + m.session.status + " seq " + m.session.last_seq : m.type));
    // The contract: a run's answer streams (`delta` frames) to a page that watches the session. Noted
    // here and reported at the end, so that the page's own steps are all checked first.
    const streamProblems = [];
    const expectStreamed = (what, session, from, answer) => {
      const text = received.slice(from).filter((m) => m.type === "delta" && m.session === session).map((m) => String(m.text)).join("");
      if (!text.includes(answer.slice(0, 20))) {
        streamProblems.push("expected `delta` frames carrying " + what + " (" + JSON.stringify(answer) + "); the socket brought for " +
                            session + ": " + JSON.stringify(framesOf(session, from)));
      }
    };
    const test = (name) => tab.locator(`[data-test="${name}"]`);
    const badge = (status) => tab.locator("#trace-head .badge", { hasText: new RegExp("^" + status + "$") });
    const sessionOfHash = async () => decodeURIComponent((/^#\/session\/([^/?]+)/.exec(await tab.evaluate(() => location.hash)) || [])[1] || "");
    const chatHas = (text) => tab.locator('[data-test="chat-log"] .chat-msg', { hasText: text });

    // The status says host.
    const status = await call("GET", "/api/status");
    assert.strictEqual(status.status, 200, "GET /api/status: " + JSON.stringify(status.body));
    assert.strictEqual(status.body.data.mode, "host", "GET /api/status's mode (expected \"host\"): " + JSON.stringify(status.body.data));

    // 1. The New session form.
    await tab.goto(base.origin + "/#token=" + token);
    await tab.locator("#conn.connected").waitFor(WAIT);
    await test("new-task").waitFor(WAIT);
    assert.strictEqual(await tab.locator("#mode").isVisible(), false, "the read-only note on a host's page");
    await test("new-task").fill("Write hi into note.txt");
    await test("new-id").fill("first");
    await test("new-start").click();
    await tab.waitForFunction(() => location.hash === "#/session/first", null, WAIT);
    step("a session started from the New session form; the page went to #/session/first");

    // 2. It parks: waiting, and the card.
    await badge("waiting").waitFor(WAIT);
    const card = tab.locator('[data-test="approval-card"][data-call]');
    await card.first().waitFor(WAIT);
    const cardText = await card.first().textContent();
    for (const want of ["write_file", "note.txt", "\"content\": \"hi\"", "approvals policy"]) {
      assert.ok(cardText.includes(want), "the approval card shows " + want + ": " + cardText);
    }
    assert.ok(/asked \d+ s ago/.test(cardText) && cardText.includes("never expires"), "the card's age and expiry: " + cardText);
    assert.ok(received.some((m) => m.type === "approval" && m.session === "first" && m.request && m.request.tool === "write_file"),
              "an `approval` message for first on the socket");
    step("status waiting; approval card for write_file shown (args, reason, age, expiry)");
    if (opt.screenshots) await tab.screenshot({ path: path.join(opt.screenshots, "serve-host-approval.png") });
    const firstCall = await card.first().getAttribute("data-call");
    const approvedAt = received.length;  // before the click: the answer may stream before the card goes
    await card.first().locator('[data-test="approve"]').click();
    await card.first().waitFor({ state: "detached", ...WAIT });

    // 3. The answer in the chat log. (That it streamed first is the server's side: checked at the end.)
    await chatHas("All done: the note is written.").waitFor(WAIT);
    await badge("completed").waitFor(WAIT);
    assert.ok(await chatHas("Write hi into note.txt").count() === 1, "the task in the chat log");
    expectStreamed("the answer that followed the approval of first's write_file", "first", approvedAt, "All done: the note is written.");
    step("approved; the answer is in the chat log; status completed");

    // A second decision of the same call: 409, naming the first.
    const again = await call("POST", "/api/sessions/first/approvals/" + encodeURIComponent(firstCall), { decision: "deny" });
    assert.strictEqual(again.status, 409, "a second decision: " + JSON.stringify(again.body));
    assert.match(again.body.error.message, /approved by web/, "the 409 names the first decision");

    // 4. A message from the chat box (Enter sends): it shows, the session runs, its (slow) answer
    // arrives in the log. (That it streamed is the server's side: checked at the end.)
    const messagedAt = received.length;
    await test("chat-input").fill("And now?");
    await test("chat-input").press("Enter");
    await chatHas("And now?").waitFor(WAIT);
    assert.strictEqual(await test("chat-input").inputValue(), "", "the chat box emptied once the message was taken");
    await chatHas(SLOW_ANSWER).waitFor(WAIT);
    await badge("completed").waitFor(WAIT);
    await tab.waitForFunction(() => { const s = document.querySelector('[data-test="chat-stream"]'); return s && s.hidden; }, null, WAIT);
    expectStreamed("the answer to the message sent to first", "first", messagedAt, SLOW_ANSWER);
    step("message sent from the chat box (Enter); its answer in the chat log; status completed");

    // 5. A second session: on the list's "waiting for you", denied from its card.
    await tab.evaluate(() => { location.hash = "#/"; });
    await test("new-task").fill("Write hi again");
    await test("new-start").click();
    await tab.waitForFunction(() => /^#\/session\/./.test(location.hash), null, WAIT);
    const secondId = await sessionOfHash();
    assert.ok(secondId && secondId !== "first", "the second session's id from the address: " + secondId);
    await badge("waiting").waitFor(WAIT);
    await tab.evaluate(() => { location.hash = "#/"; });
    const waitingItem = tab.locator(`[data-test="waiting"] .waiting-item[data-session="${secondId}"]`);
    await waitingItem.waitFor(WAIT);
    assert.match(await waitingItem.textContent(), /write_file/, "the waiting item names the tool");
    step("the list shows the second session (" + secondId + ") waiting for you");
    if (opt.screenshots) await tab.screenshot({ path: path.join(opt.screenshots, "serve-host-list.png") });
    await waitingItem.locator("a").click();
    await tab.waitForFunction((id) => location.hash === "#/session/" + encodeURIComponent(id), secondId, WAIT);
    const card2 = tab.locator('[data-test="approval-card"]').first();
    await card2.waitFor(WAIT);
    await card2.locator('[data-test="deny-reason"]').fill("not today");
    await card2.locator('[data-test="deny"]').click();
    await card2.waitFor({ state: "detached", ...WAIT });
    await badge("completed").waitFor(WAIT);
    const denied = await call("GET", "/api/sessions/" + encodeURIComponent(secondId) + "/events?type=approval.decided");
    assert.strictEqual(denied.status, 200, "the second session's decisions");
    const decision = (denied.body.data.events[0] || {}).data || {};
    assert.strictEqual(decision.decision, "denied", "the recorded decision: " + JSON.stringify(decision));
    assert.strictEqual(decision.reason, "not today", "the deny reason recorded: " + JSON.stringify(decision));
    assert.strictEqual(decision.by, "web", "the decision's by: " + JSON.stringify(decision));
    step("denied from its card with a reason (recorded by web); status completed");

    // Its slow answer: Stop while it runs, Resume, completed.
    await test("chat-input").fill("Take your time.");
    await test("chat-send").click();
    await badge("running").waitFor(WAIT);
    await tab.locator('[data-test="stop"]:not([disabled])').waitFor(WAIT);
    assert.ok(await test("resume").isDisabled(), "Resume enabled while it runs");
    await test("stop").click();
    await badge("stopped").waitFor(WAIT);
    assert.ok(await test("stop").isDisabled(), "Stop enabled once it stopped");
    step("stopped while its slow answer ran: status stopped");
    await tab.locator('[data-test="resume"]:not([disabled])').waitFor(WAIT);
    const resumedAt = received.length;
    await test("resume").click();
    await badge("running").waitFor(WAIT);
    // The resumed run's answer takes 5 s: it streams in first (the resume streams from its start).
    try {
      await tab.waitForFunction((t) => {
        const s = document.querySelector('[data-test="chat-stream"]');
        return s && !s.hidden && s.textContent.includes(t);
      }, SLOW_ANSWER.slice(0, 30), WAIT);
    } catch (e) {
      throw new Error("expected the resumed run's answer streaming in [data-test=chat-stream]; the socket brought for " +
                      secondId + ": " + JSON.stringify(framesOf(secondId, resumedAt)));
    }
    assert.strictEqual(await chatHas(SLOW_ANSWER).count(), 0, "the slow answer in the chat log before the model answered");
    if (opt.screenshots) await tab.screenshot({ path: path.join(opt.screenshots, "serve-host-chat.png") });
    step("resumed: its answer streaming in the chat-stream");
    await badge("completed").waitFor({ timeout: 30000 });
    await chatHas(SLOW_ANSWER).waitFor(WAIT);
    await tab.waitForFunction(() => { const s = document.querySelector('[data-test="chat-stream"]'); return s && s.hidden; }, null, WAIT);
    step("status completed; the answer in the chat log, the stream cleared");

    // Fork at turn 1: the fork's view.
    await test("fork-turn").fill("1");
    await test("fork").click();
    await tab.waitForFunction((id) => /^#\/session\/./.test(location.hash) && location.hash !== "#/session/" + encodeURIComponent(id),
                             secondId, WAIT);
    const forkId = await sessionOfHash();
    await tab.locator("#trace-head .fork", { hasText: secondId }).waitFor(WAIT);
    await badge("completed").waitFor(WAIT);
    const forkRow = await call("GET", "/api/sessions/" + encodeURIComponent(forkId));
    assert.strictEqual(forkRow.status, 200, "GET the fork");
    assert.strictEqual(forkRow.body.data.session.parent_session, secondId, "the fork's parent");
    assert.strictEqual(forkRow.body.data.session.parent_turn, 1, "the fork's turn");
    step("forked at turn 1: the fork's view (" + forkId + ") opened, fork of " + secondId + ", completed");

    // 6. A question: a fork of first at turn 3 with a task; its model asks (ask_user); answered from the card.
    await tab.evaluate(() => { location.hash = "#/session/first"; });
    await badge("completed").waitFor(WAIT);
    await test("fork-turn").fill("3");
    await test("fork-task").fill("Ask me before you go on");
    await test("fork").click();
    await tab.waitForFunction(() => /^#\/session\/./.test(location.hash) && location.hash !== "#/session/first", null, WAIT);
    const askId = await sessionOfHash();
    await badge("waiting").waitFor(WAIT);
    const question = tab.locator('[data-test="approval-card"][data-kind="question"]').first();
    await question.waitFor(WAIT);
    assert.ok((await question.textContent()).includes("Which colour should the note be?"), "the question on its card");
    assert.strictEqual(await question.locator('[data-test="approve"]').count(), 0, "an Approve button on a question");
    await chatHas("Ask me before you go on").waitFor(WAIT);
    await question.locator('[data-test="answer-text"]').fill("blue");
    await question.locator('[data-test="answer"]').click();
    await question.waitFor({ state: "detached", ...WAIT });
    await chatHas("Blue it is, then.").waitFor(WAIT);
    await badge("completed").waitFor(WAIT);
    const answered = await call("GET", "/api/sessions/" + encodeURIComponent(askId) + "/events?type=approval.decided");
    const answer = (answered.body.data.events.slice(-1)[0] || {}).data || {};
    assert.strictEqual(answer.answer, "blue", "the answer recorded: " + JSON.stringify(answer));
    step("forked first at turn 3 with a task (" + askId + "); its question's card answered (\"blue\", recorded); completed");

    // 7. The API's refusals, from Node.
    const noToken = await call("POST", "/api/sessions", { task: "no token" }, { auth: false });
    assert.strictEqual(noToken.status, 401, "a POST without the token: " + JSON.stringify(noToken.body));
    const unknown = await call("POST", "/api/sessions", { task: "x", colour: "blue" });
    assert.strictEqual(unknown.status, 400, "a POST with an unknown field: " + JSON.stringify(unknown.body));
    assert.match(unknown.body.error.message, /colour/, "the 400 names the unknown field");
    const wrongType = await call("POST", "/api/sessions/first/messages", { text: 5 });
    assert.strictEqual(wrongType.status, 400, "a field of the wrong type: " + JSON.stringify(wrongType.body));
    step("the API: no token 401, an unknown field 400 (named), a wrong type 400, a second decision 409");

    assert.deepStrictEqual(errors, [], "errors in the page");
    assert.deepStrictEqual(blocked, [], "the page asked another host for something");
    assert.deepStrictEqual(addresses.filter((a) => a.includes(token)), [], "the token in an address the page asked for");
    assert.deepStrictEqual(await context.cookies(), [], "cookies set");
    step("no error in the page; the token in none of " + addresses.length + " addresses; no cookie; nothing asked elsewhere");

    // 8. A read-only server on the same home: the conversation, the note, no write control.
    second = await startReadOnly();
    const other = await context.newPage();
    const otherErrors = [];
    other.on("pageerror", (e) => otherErrors.push("page error: " + e.message));
    other.on("response", (r) => { if (r.status() >= 400) otherErrors.push("HTTP " + r.status() + " for " + r.url()); });
    const secondUrl = new URL(second.url);
    await other.goto(secondUrl.origin + "/" + secondUrl.hash);
    await other.locator("#conn.connected").waitFor(WAIT);
    await other.locator("#mode").waitFor({ state: "visible", ...WAIT });
    assert.match(await other.locator("#mode").textContent(), /read-only/, "the read-only note");
    await other.locator('tr[data-session="first"]').waitFor(WAIT);
    assert.strictEqual(await other.locator('[data-test="new-start"], [data-test="new-task"]').count(), 0, "the New session form on a read-only page");
    await other.evaluate(() => { location.hash = "#/session/first"; });
    await other.locator('[data-test="chat-log"] .chat-msg', { hasText: SLOW_ANSWER }).waitFor(WAIT);
    for (const name of ["stop", "resume", "fork", "chat-input", "chat-send", "approve", "deny"]) {
      assert.strictEqual(await other.locator(`[data-test="${name}"]`).count(), 0, "a " + name + " control on a read-only page");
    }
    const refused = await call("POST", "/api/sessions", { task: "x" }, { origin: secondUrl.origin });
    assert.ok(refused.status === 403 || refused.status === 405, "a POST to a read-only server: " + refused.status);
    assert.match(refused.body.error.message, /read-only/, "the read-only server's refusal says why");
    assert.deepStrictEqual(otherErrors, [], "errors in the read-only page");
    step("a read-only server on the same home: the conversation and the note shown, no write control; a POST gets " +
         refused.status);
    await other.close();
    // The server's side of streaming: every run of a watched session streams its answer.
    if (streamProblems.length) throw new Error("the page's steps held, but the server streamed less than it should:\n  " + streamProblems.join("\n  "));
    step("every answer streamed to the page (delta frames): after an approval, after a message, after a resume");
    console.log("serve_host_check: ok");
  } catch (e) {
    console.error("serve_host_check: FAILED: " + (e && e.stack ? e.stack : String(e)));
    failed = true;
  } finally {
    if (second) {
      second.child.kill("SIGTERM");
      await new Promise((resolve) => { second.child.on("exit", resolve); setTimeout(resolve, 5000); });
    }
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
})();
