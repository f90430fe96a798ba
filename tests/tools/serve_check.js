// Opens the page of `carapace serve` in Debian's Chromium, headless, and
// checks it against a real server: the session list (a fork showing its
// parent), a trace with its timeline, a span's details from the span API, an
// unknown session's error, a hostile tool name shown as text and never run, a
// session started while the page is open appearing, waiting out a rate limit
// and completing without a reload, and the page reconnecting to a restarted
// server. Every request to another origin is aborted and counted.
//
// URL is the one carapace serve printed: http://127.0.0.1:PORT/#token=T. The
// page takes the token out of the address and sends it in a header (the
// API) or a WebSocket subprotocol; the check asserts the token is never in a
// request's address, no cookie is set, a reload keeps it (this tab's
// sessionStorage), and a page opened without it says what is missing.
//
//   node serve_check.js NODE_MODULES URL --bin CARAPACE --home HOME --workspace DIR --live-scenario FILE
//        --spans-q N --rows-q N --spans-h N --rows-h N --hostile TEXT [--serve-pid PID] [--screenshots DIR]
// (--rows-*: the lines of `carapace trace show` naming a span or standing for several.)
// With --serve-pid it stops that server at the end and starts another on its port, and checks the
// page reconnects.
//
// Exit 0 and one summary line when it holds; 1 and the first problem otherwise.
"use strict";
const path = require("path");
const assert = require("assert");
const { spawn, execFileSync } = require("child_process");

const [nodeModules, url, ...rest] = process.argv.slice(2);
const opt = { servePid: "", bin: "", home: "", workspace: "", liveScenario: "", spansQ: 0, rowsQ: 0, spansH: 0, rowsH: 0,
              hostile: "", screenshots: "" };
for (let i = 0; i < rest.length; ++i) {
  const key = rest[i].replace(/^--/, "").replace(/-([a-z])/g, (_, c) => c.toUpperCase());
  if (!(key in opt)) throw new Error("unknown option " + rest[i]);
  opt[key] = rest[++i];
}
const { chromium } = require(path.resolve(nodeModules, "playwright-core"));
const base = new URL(url);
const token = (/^#token=(.+)$/.exec(base.hash) || [])[1] || "";
const WAIT = { timeout: 20000 };
const debug = {};

async function until(check, what) {
  for (const end = Date.now() + WAIT.timeout; !check(); await new Promise((r) => setTimeout(r, 50))) {
    if (Date.now() > end) throw new Error("timed out waiting for " + what + (process.env.SERVE_CHECK_DEBUG ? " " + JSON.stringify(debug) : ""));
  }
}

async function apiGet(p) {
  const res = await fetch(new URL(p, base.origin), { headers: token ? { Authorization: "Bearer " + token } : {} });
  return { status: res.status, body: await res.json() };
}

function spanCount(session) {
  const out = execFileSync(opt.bin, ["--home", opt.home, "trace", "show", session, "--json"], { encoding: "utf8" });
  return JSON.parse(out).data.spans.length;
}

// `carapace serve` again on `port` (the old one's port may take a moment to free): the process.
async function startServer(port) {
  for (let attempt = 0; attempt < 20; ++attempt) {
    const child = spawn(opt.bin, ["--home", opt.home, "serve", "--port", String(port)], { stdio: ["ignore", "pipe", "pipe"] });
    const up = await new Promise((resolve) => {
      let out = "";
      child.stdout.on("data", (d) => { out += d; if (out.includes("listening on")) resolve(true); });
      child.on("exit", () => resolve(false));
    });
    if (up) return child;
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error("carapace serve --port " + port + " did not start again");
}

(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
                                          args: ["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"] });
  let failed = false;
  let live = null, restarted = null;
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 800 } });
    const blocked = [];
    let refuseSpansOf = null;  // the next request for every span of this session fails, as if the server had gone
    await context.route("**/*", (route) => {
      const u = new URL(route.request().url());
      if (u.origin === base.origin) {
        if (refuseSpansOf !== null && u.pathname === "/api/sessions/" + refuseSpansOf && u.searchParams.get("spans") === "all") {
          refuseSpansOf = null;
          return route.abort("connectionrefused");
        }
        return route.continue();
      }
      blocked.push(u.href);
      return route.abort();
    });
    const tab = await context.newPage();
    const errors = [];
    const addresses = [];  // every address the page asked for, to see the token is in none
    tab.on("request", (r) => addresses.push(r.url()));
    let expect404 = false, expectSocketDown = false;
    tab.on("pageerror", (e) => errors.push("page error: " + e.message));
    tab.on("console", (m) => {
      if (m.type() !== "error") return;
      if (expect404 && /status of 404/.test(m.text())) return;  // the unknown session's answer, asked for on purpose
      if (expectSocketDown && /WebSocket connection to .* failed/.test(m.text())) return;  // the server stopped on purpose
      if (expectSocketDown && /Failed to load resource: net::ERR_CONNECTION_REFUSED/.test(m.text())) return;  // refused on purpose
      errors.push("console: " + m.text());
    });
    tab.on("response", (r) => {
      if (r.status() < 400) return;
      if (expect404 && r.status() === 404 && r.url().includes("/api/sessions/no-such-session")) return;
      errors.push("HTTP " + r.status() + " for " + r.url());
    });
    const sent = [], received = [];
    debug.sent = sent;
    tab.on("websocket", (ws) => {
      if (new URL(ws.url()).host !== base.host) blocked.push(ws.url());
      ws.on("framesent", (f) => { try { sent.push(JSON.parse(f.payload)); } catch (e) { sent.push(f.payload); } });
      ws.on("framereceived", (f) => { try { received.push(JSON.parse(f.payload)); } catch (e) { received.push(f.payload); } });
    });
    const text = async (selector) => (await tab.locator(selector).first().textContent()).trim();

    // A span the span API has more of: quickstart's `tool shell`, whose result only /spans/ID gives.
    const q = await apiGet("/api/sessions/q?spans=all");
    assert.strictEqual(q.status, 200, "GET /api/sessions/q");
    const shell = q.body.data.spans.find((s) => s.name === "tool shell");
    assert.ok(shell, "quickstart has a `tool shell` span");
    const onlyInDetails = "19 notes/summary.txt";
    assert.ok(!JSON.stringify(q.body.data).includes(onlyInDetails), "the session API already gives " + onlyInDetails);

    // A deep link to a span, behind the token: the trace with that span's details open, and
    // the token out of the address.
    assert.ok(token, "the URL carapace serve printed carries #token=: " + url);
    await tab.goto(base.origin + "/#token=" + token + "&/session/q/span/" + shell.span_id);
    await tab.waitForSelector(".row", WAIT);
    await tab.locator("#details pre", { hasText: onlyInDetails }).waitFor(WAIT);
    assert.strictEqual(await text("#details h3"), "tool shell", "the linked span's details");
    assert.strictEqual(new URL(tab.url()).hash, "#/session/q/span/" + shell.span_id, "the address after the token");
    // A reload keeps the token (this tab's sessionStorage).
    await tab.reload();
    await tab.locator("#details pre", { hasText: onlyInDetails }).waitFor(WAIT);
    await tab.locator("#conn.connected").waitFor(WAIT);

    // The list: every session, with status, tokens, cost.
    await tab.evaluate(() => { location.hash = "#/"; });
    const rowQ = tab.locator('tr[data-session="q"]');
    await rowQ.waitFor(WAIT);
    await tab.evaluate(() => { window.__sameLoad = 1; });
    assert.strictEqual((await rowQ.locator(".badge").textContent()).trim(), "completed", "q's status");
    assert.match(await rowQ.locator("td.tokens").textContent(), /^[1-9][\d,]* \/ [1-9][\d,]*$/, "q's tokens");
    const qCost = (await rowQ.locator("td.cost").textContent()).trim();
    assert.match(qCost, /^\$\d+\.\d{4}$/, "q's cost");
    assert.notStrictEqual(qCost, "$0.0000", "q's cost");
    assert.match(await rowQ.locator("td.model").textContent(), /scripted/, "q's provider");
    await tab.locator('tr[data-session="h"]').waitFor(WAIT);
    // h's model calls read 630 of its 800 input tokens from the provider's cache.
    const hCache = tab.locator('tr[data-session="h"] td.tokens .cache-note');
    assert.strictEqual((await hCache.textContent()).trim(), "· 79% cached", "h's cache share");
    assert.match(await hCache.getAttribute("title"), /^630 input tokens read from the provider's cache, 20 written, 150 not cached$/);
    assert.strictEqual(await rowQ.locator(".cache-note").count(), 0, "q read nothing from a cache");
    const fork = tab.locator('tr[data-session="qf"] .fork');
    await fork.waitFor(WAIT);
    assert.strictEqual((await fork.textContent()).trim(), "fork of q at turn 1", "the fork's parent");
    await tab.locator("#conn.connected").waitFor(WAIT);
    assert.ok(received.some((m) => m.type === "hello"), "the socket's hello");

    // An unknown session: its error and hint on the page, not a blank one.
    expect404 = true;
    await tab.evaluate(() => { location.hash = "#/session/no-such-session"; });
    await tab.locator("#problem").waitFor({ state: "visible", ...WAIT });
    const problem = await text("#problem");
    const missing = await apiGet("/api/sessions/no-such-session");
    assert.strictEqual(missing.status, 404, "GET an unknown session");
    assert.strictEqual(missing.body.error.code, "not found", "the CLI's error envelope");
    assert.ok(problem.includes(missing.body.error.message), "the page shows the error: " + problem);
    if (missing.body.error.hint) assert.ok(problem.includes(missing.body.error.hint), "the page shows the hint: " + problem);
    assert.ok((await text("#traces")).includes("no-such-session"), "the trace area says which session");
    expect404 = false;

    // The trace: a click on the row; collapsed as `trace show` collapses it; with every span, a
    // tree row and a timeline bar per span, the session first.
    await tab.evaluate(() => { location.hash = "#/"; });
    await rowQ.click();
    await tab.waitForFunction((n) => document.querySelectorAll(".row").length === n, Number(opt.rowsQ), WAIT);
    await tab.locator('section.trace[data-complete="1"]').waitFor(WAIT);
    await tab.locator(".filter-full").check();
    await tab.waitForFunction((n) => document.querySelectorAll(".row").length === n, Number(opt.spansQ), WAIT);
    assert.strictEqual(await tab.locator(".row .bar").count(), Number(opt.spansQ), "timeline bars");
    assert.match(await text(".row .name"), /^session q/, "the first row is the session");
    const bars = await tab.$$eval(".bar", (all) => all.map((b) => [parseFloat(b.style.left), parseFloat(b.style.width)]));
    assert.ok(bars.every(([l, w]) => l >= 0 && w >= 0 && l + w <= 100.0001), "bars within the timeline");
    assert.ok(bars[0][0] === 0 && bars[0][1] > 90, "the session's bar spans the timeline");
    await until(() => sent.some((m) => m.type === "watch" && m.session === "q"), "a watch for q sent");
    // A span's details: what only the span API has.
    await tab.locator(".row", { has: tab.locator(".name", { hasText: /^tool shell$/ }) }).click();
    await tab.locator("#details pre", { hasText: onlyInDetails }).waitFor(WAIT);
    assert.strictEqual(await text("#details h3"), "tool shell");
    assert.ok((await text("#details")).includes("wc -c notes/summary.txt"), "the tool's arguments");
    assert.strictEqual(await tab.evaluate(() => location.hash), "#/session/q/span/" + shell.span_id + "?full=1", "the span and the filter in the address");
    if (opt.screenshots) await tab.screenshot({ path: path.join(opt.screenshots, "serve-trace.png") });

    // A hostile tool name: shown as text, never run.
    await tab.evaluate(() => { location.hash = "#/session/h"; });
    await tab.waitForFunction((n) => document.querySelectorAll(".row").length === n, Number(opt.rowsH), WAIT);
    await tab.evaluate(() => { location.hash = "#/session/h?full=1"; });  // every span, from the address
    await tab.waitForFunction((n) => document.querySelectorAll(".row").length === n, Number(opt.spansH), WAIT);
    await until(() => sent.some((m) => m.type === "unwatch" && m.session === "q"), "q unwatched on leaving it");
    const names = await tab.$$eval(".row .name", (all) => all.map((n) => n.textContent));
    assert.ok(names.includes("tool " + opt.hostile), "the hostile name is shown as text: " + JSON.stringify(names));
    await tab.locator(".row", { has: tab.locator(".name", { hasText: opt.hostile }) }).first().click();
    await tab.locator("#details[data-loaded]").waitFor(WAIT);
    assert.strictEqual(await text("#details h3"), "tool " + opt.hostile, "the hostile name in the details");
    assert.strictEqual(await tab.evaluate(() => window.__pwned === undefined), true, "the hostile name ran");
    assert.strictEqual(await tab.locator("img, main script, iframe").count(), 0, "an element from the data");

    // A session started while the page shows the list: its row appears, waits out the rate limit with
    // a countdown, and completes, all without a reload.
    await tab.evaluate(() => { location.hash = "#/"; });
    await rowQ.waitFor(WAIT);
    live = spawn(opt.bin, ["--home", opt.home, "run", "Go live", "--scenario", opt.liveScenario, "--workspace", opt.workspace,
                           "--session", "live"], { stdio: ["ignore", "ignore", "pipe"] });
    let liveErr = "";
    live.stderr.on("data", (d) => { liveErr += d; });
    const liveDone = new Promise((resolve) => live.on("exit", (code) => resolve(code)));
    const rowLive = tab.locator('tr[data-session="live"]');
    await rowLive.waitFor(WAIT);
    await rowLive.locator("td.live .countdown", { hasText: /retrying in \d+ s/ }).waitFor(WAIT);
    const first = await rowLive.locator(".countdown").textContent();
    await tab.waitForFunction((was) => {
      const c = document.querySelector('tr[data-session="live"] .countdown');
      return c && c.textContent !== was;
    }, first, { timeout: 3000 });  // it ticks
    await tab.locator("#feed li", { has: tab.locator(".sid", { hasText: /^live$/ }) }).first().waitFor(WAIT);
    assert.ok(received.some((m) => m.type === "status" && m.session === "live"), "a status message for live");
    if (opt.screenshots) await tab.screenshot({ path: path.join(opt.screenshots, "serve-sessions.png") });

    // Its trace while it runs: spans arrive over the socket.
    await rowLive.click();
    await tab.waitForSelector(".row", WAIT);
    await tab.locator(".filter-full").check();
    const before = await tab.locator(".row").count();
    await tab.waitForFunction((n) => document.querySelectorAll(".row").length > n, before, WAIT);
    await until(() => received.some((m) => m.type === "spans" && m.session === "live" && m.reset === false), "a spans update for live");
    assert.strictEqual(await liveDone, 0, "carapace run --session live: " + liveErr);
    live = null;
    const liveSpans = spanCount("live");
    await tab.waitForFunction((n) => document.querySelectorAll(".row").length === n &&
                                     !document.querySelector(".row .status.open"), liveSpans, WAIT);
    await tab.locator("#trace-head .badge", { hasText: "completed" }).waitFor(WAIT);
    await tab.evaluate(() => { location.hash = "#/"; });
    await rowLive.locator(".badge", { hasText: /^completed$/ }).waitFor(WAIT);
    assert.strictEqual(await tab.evaluate(() => window.__sameLoad), 1, "the page was reloaded");

    // The server goes away and comes back on the same port: the page says so, reconnects and
    // watches the open trace again.
    // The server goes first while the page asks for every span of q, after the skeleton and the watch
    // (a race a loaded machine hit): the skeleton stays, and the watch sent again brings every span.
    if (opt.servePid) {
      const watchesOfQ = () => sent.filter((m) => m.type === "watch" && m.session === "q").length;
      const before = watchesOfQ();
      expectSocketDown = true;
      refuseSpansOf = "q";
      await tab.evaluate(() => { location.hash = "#/session/q"; });
      await until(() => watchesOfQ() > before, "a watch for q sent again");
      await until(() => refuseSpansOf === null, "every span of q asked for");
      await tab.locator("#problem", { hasText: "did not answer" }).waitFor(WAIT);
      const watches = watchesOfQ();
      process.kill(Number(opt.servePid), "SIGTERM");
      await tab.locator("#conn.reconnecting").waitFor(WAIT);
      restarted = await startServer(base.port);
      await tab.locator("#conn.connected").waitFor(WAIT);
      expectSocketDown = false;
      await until(() => sent.filter((m) => m.type === "watch" && m.session === "q").length > watches, "the watch sent again on reconnecting");
      await tab.locator("#trace-head .badge", { hasText: "completed" }).waitFor(WAIT);
      // The trace is fetched again on reconnecting: its rows come back, all of them.
      await tab.waitForFunction((n) => document.querySelectorAll(".row").length === n, Number(opt.rowsQ), WAIT)
        .catch(() => {});
      assert.strictEqual(await tab.locator(".row").count(), Number(opt.rowsQ), "q's rows after reconnecting");
      assert.ok(await tab.locator("#problem").isHidden(), "the problem still shown once every span came");
    }

    assert.deepStrictEqual(errors, [], "errors in the page");
    assert.deepStrictEqual(blocked, [], "the page asked another host for something");
    assert.deepStrictEqual(addresses.filter((a) => a.includes(token)), [], "the token in an address the page asked for");
    assert.deepStrictEqual(await context.cookies(), [], "cookies set");

    // Without the token (another browser's page): the server's error, which says what is missing.
    const stranger = await browser.newContext();
    const other = await stranger.newPage();
    await other.goto(base.origin + "/");
    await other.locator("#problem").waitFor({ state: "visible", ...WAIT });
    assert.match(await other.locator("#problem").textContent(), /needs its token/, "the page without a token");
    await stranger.close();
    console.log(`serve_check: list with status, tokens, cost; trace q: ${opt.spansQ} rows with bars, span details from the API; ` +
                `unknown session's error shown; hostile name shown as text; session live appeared, counted down, ` +
                `completed with ${liveSpans} spans, no reload; ` +
                (opt.servePid ? "reconnected to a restarted server and watched again; " : "") +
                "token never in an address, no cookie, a page without it told so; no request elsewhere, no error");
  } catch (e) {
    console.error(e && e.stack ? e.stack : String(e));
    failed = true;
  } finally {
    if (live) live.kill("SIGKILL");
    if (restarted) {
      restarted.kill("SIGTERM");
      await new Promise((resolve) => { restarted.on("exit", resolve); setTimeout(resolve, 5000); });
    }
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
})();
