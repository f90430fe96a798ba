// The page of `carapace serve` on a long session (serve_scale_check.sh: 10,000
// turns of `carapace log synth`), in Debian's Chromium, headless. It measures,
// in the page, from the address's change to the first rows drawn: the trace
// and the events must answer within --limit-ms. It checks that the trace is
// collapsed as `carapace trace show` collapses it (one row per line of the
// CLI naming a span or standing for several), that a fold opens on a click
// with only the rows on screen in the DOM, that "every span", the text filter
// and the kind filter work and are kept in the address, that the events come
// a page at a time with their payloads and their own filters, that the
// activity feed holds the log's retries on load, and that a long payload
// wraps between words.
//
//   node serve_scale_check.js NODE_MODULES URL --session ID --cli-rows N --trace-json FILE [--limit-ms 1000]
// Exit 0 and the figures when it holds; 1 and the first problem otherwise.
"use strict";
const path = require("path");
const fs = require("fs");
const assert = require("assert");

const [nodeModules, url, ...rest] = process.argv.slice(2);
const opt = { session: "", cliRows: 0, traceJson: "", limitMs: 1000 };
for (let i = 0; i < rest.length; ++i) {
  const key = rest[i].replace(/^--/, "").replace(/-([a-z])/g, (_, c) => c.toUpperCase());
  if (!(key in opt)) throw new Error("unknown option " + rest[i]);
  opt[key] = rest[++i];
}
const { chromium } = require(path.resolve(nodeModules, "playwright-core"));
const base = new URL(url);
const token = (/^#token=(.+)$/.exec(base.hash) || [])[1] || "";
const WAIT = { timeout: 30000 };
const LIMIT = Number(opt.limitMs);
const spans = JSON.parse(fs.readFileSync(opt.traceJson, "utf8")).data.spans;

// In the page: sets the address to `hash` and resolves with the milliseconds
// until `selector` matches (looked for at every frame).
function timeTo(tab, hash, selector) {
  return tab.evaluate(([h, sel]) => new Promise((resolve, reject) => {
    const t0 = performance.now();
    location.hash = h;
    const check = () => {
      if (document.querySelector(sel)) return resolve(performance.now() - t0);
      if (performance.now() - t0 > 30000) return reject(new Error("no " + sel + " in 30 s"));
      requestAnimationFrame(check);
    };
    check();
  }), [hash, selector]);
}

// In the page: runs `act` (a page function's text) and resolves with the
// milliseconds until the trace's data-rows is no longer `before`.
async function timeRows(tab, before, act) {
  const start = await tab.evaluate(() => performance.now());
  await act();
  await tab.waitForFunction((b) => document.querySelector("section.trace").dataset.rows !== String(b), before, WAIT);
  return (await tab.evaluate(() => performance.now())) - start;
}

const rowsOf = (tab) => tab.evaluate(() => Number(document.querySelector("section.trace").dataset.rows));
const domRows = (tab) => tab.locator("section.trace .row").count();

(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
                                          args: ["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"] });
  let failed = false;
  try {
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    await context.route("**/*", (route) => new URL(route.request().url()).origin === base.origin ? route.continue() : route.abort());
    const tab = await context.newPage();
    const errors = [];
    tab.on("pageerror", (e) => errors.push("page error: " + e.message));
    tab.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
    const figures = {};

    // The list, and the activity feed filled from the log before any event arrives live.
    await tab.goto(base.origin + "/#token=" + token + "&/");
    await tab.locator('tr[data-session="' + opt.session + '"]').waitFor(WAIT);
    await tab.locator("#feed li.status").first().waitFor(WAIT);
    const feed = await tab.locator("#feed li").count();
    assert.strictEqual(feed, 50, "the feed holds the last 50 retries of the log");
    assert.match(await tab.locator("#feed li.status .msg").first().textContent(), /attempt 1 failed: HTTP 429/);
    await tab.locator("#conn.connected").waitFor(WAIT);

    // The trace: its first rows within the limit, collapsed as the CLI collapses it.
    figures.trace = await timeTo(tab, "#/session/" + opt.session, "section.trace .row");
    const collapsed = await rowsOf(tab);
    assert.strictEqual(collapsed, Number(opt.cliRows), "rows of the trace against the CLI's lines");
    assert.ok(collapsed * 50 < spans.length, collapsed + " rows for " + spans.length + " spans");
    assert.strictEqual(await domRows(tab), collapsed, "every row drawn");
    assert.match(await tab.locator("section.trace .row.fold .name", { hasText: /turns not shown/ }).first().textContent(),
                 /… turns \d+-\d+: \d+ turns not shown/, "the middle of the session is one line, as in the CLI");
    await tab.locator('section.trace[data-complete="1"]').waitFor(WAIT);
    figures.everySpanLoaded = await tab.evaluate(() => performance.now());

    // A fold opens on a click: many more rows, only those on screen in the DOM; and closes.
    const middle = tab.locator("section.trace .row.fold", { has: tab.locator(".name", { hasText: /turns not shown/ }) });
    const middleAt = await middle.evaluate((r) => r.getBoundingClientRect().top + window.scrollY);
    figures.unfold = await timeRows(tab, collapsed, () => middle.click());
    const opened = await rowsOf(tab);
    assert.ok(opened > collapsed + 100, "the fold opened: " + opened + " rows");
    assert.ok(await domRows(tab) < 300, "only the rows on screen are built: " + await domRows(tab));
    await tab.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
    await tab.waitForFunction(() => document.querySelector("section.trace .rows").lastElementChild.classList.contains("row"), null, WAIT);
    assert.ok(await domRows(tab) < 300, "only the rows on screen are built at the end too");
    await tab.evaluate((y) => window.scrollTo(0, y - 200), middleAt);  // back to it: it is built again
    await timeRows(tab, opened, () => middle.click());
    await tab.evaluate(() => window.scrollTo(0, 0));
    assert.strictEqual(await rowsOf(tab), collapsed, "folded again");
    // A clean turn shown on one line opens on its toggle.
    const compact = tab.locator('section.trace .row[data-kind="turn"][data-collapsed="1"]').first();
    const turnName = await compact.locator(".name").textContent();
    await timeRows(tab, collapsed, () => compact.locator(".toggle").click());
    assert.ok(await rowsOf(tab) > collapsed, "the turn " + turnName + " opened");
    await tab.locator("section.trace .row", { has: tab.locator(".name", { hasText: new RegExp("^" + turnName + "$") }) }).locator(".toggle").click();

    // Every span: one row each, only those on screen built.
    figures.everySpan = await timeRows(tab, await rowsOf(tab), () => tab.locator("section.trace .filter-full").check());
    assert.strictEqual(await rowsOf(tab), spans.length, "every span");
    assert.ok(await domRows(tab) < 300, "only the rows on screen are built");
    assert.match(await tab.evaluate(() => location.hash), /full=1/, "every span in the address");
    await tab.locator("section.trace .filter-full").uncheck();

    // The text filter (debounced, case-insensitive) and the kind filter, in the address.
    const retried = spans.filter((s) => s.name === "llm attempt 2").length;
    figures.filterText = await timeRows(tab, await rowsOf(tab), () => tab.locator("section.trace .filter-text").fill("LLM ATTEMPT 2"));
    const matching = await rowsOf(tab);
    assert.strictEqual(matching, retried, "spans matching 'llm attempt 2'");
    const names = await tab.$$eval("section.trace .row .name", (all) => all.map((n) => n.textContent));
    assert.ok(names.length > 0 && names.every((n) => n === "llm attempt 2"), "the matching rows: " + names.slice(0, 5));
    assert.match(await tab.evaluate(() => location.hash), /q=LLM\+ATTEMPT\+2|q=LLM%20ATTEMPT%202/, "the filter in the address");
    await tab.locator("section.trace .filter-text").fill("");
    await tab.waitForFunction((n) => document.querySelector("section.trace").dataset.rows === String(n), collapsed, WAIT);
    const tools = spans.filter((s) => s.kind === "tool").length;
    figures.filterKind = await timeRows(tab, collapsed, () => tab.locator("section.trace .filter-kind").selectOption("tool"));
    assert.strictEqual(await rowsOf(tab), tools, "tool spans");
    // The filter in the address is restored on a reload.
    await tab.reload();
    await tab.waitForFunction((n) => { const t = document.querySelector("section.trace"); return t && t.dataset.rows === String(n); }, tools, WAIT);
    assert.strictEqual(await tab.locator("section.trace .filter-kind").inputValue(), "tool", "the kind filter after a reload");

    // The events: the first page within the limit, then more, each with its payload.
    figures.events = await timeTo(tab, "#/session/" + opt.session + "/events", "#events .event-row");
    await tab.waitForFunction(() => document.querySelector("#events").dataset.loaded === "200", null, WAIT);
    assert.strictEqual(await tab.locator("#events .event-row").first().getAttribute("data-seq"), "1");
    await tab.locator("#events-more").click();
    await tab.waitForFunction(() => document.querySelector("#events").dataset.loaded === "400", null, WAIT);
    assert.strictEqual(await tab.locator("#events .event-row").last().getAttribute("data-seq"), "400");
    const longSeq = await tab.$$eval('#events .event-row[data-type="tool.completed"]',
                                     (all) => (all.find((r) => Number((/"kept_bytes":(\d+)/.exec(r.querySelector(".preview").textContent) || [])[1]) > 300) || all[0]).dataset.seq);
    const row = tab.locator('#events .event-row[data-seq="' + longSeq + '"]');
    await row.locator(".event-head").click();
    const payload = JSON.parse(await row.locator("pre.payload").textContent());
    assert.strictEqual(payload.type, "tool.completed");
    assert.ok(typeof payload.data.output === "string" && payload.data.output.length > 100, "the payload, whole");
    // A long payload wraps between words: no word of it is split over two lines.
    const split = await row.locator("pre.payload").evaluate((pre) => {
      const text = pre.firstChild;
      const words = [];
      const re = /[A-Za-z]{4,}/g;
      let m;
      while ((m = re.exec(text.data)) && words.length < 300) {
        const r = document.createRange();
        r.setStart(text, m.index);
        r.setEnd(text, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].map((c) => Math.round(c.top)));
        if (lines.size > 1) words.push(m[0]);
      }
      return { split: words, lines: Math.round(pre.getBoundingClientRect().height / parseFloat(getComputedStyle(pre).lineHeight || "16")) };
    });
    assert.deepStrictEqual(split.split, [], "words split across lines");
    assert.ok(split.lines > 3, "the payload wrapped onto " + split.lines + " lines");
    // By type: only that type, from the whole log (a page of them); the address keeps it.
    const retries = spans.filter((s) => s.kind === "llm" && s.status === "error").length;
    figures.eventsType = await tab.evaluate(() => performance.now());
    await tab.locator(".events-tools .filter-type").selectOption("llm.failed");
    await tab.waitForFunction(() => { const l = document.querySelector("#events"); return l.dataset.loaded && l.querySelector('.event-row[data-type="llm.failed"]') && !l.querySelector('.event-row:not([data-type="llm.failed"])'); }, null, WAIT);
    figures.eventsType = (await tab.evaluate(() => performance.now())) - figures.eventsType;
    const failedShown = await tab.locator("#events .event-row").count();
    assert.strictEqual(failedShown, Math.min(200, retries), "llm.failed events on the first page");
    assert.match(await tab.evaluate(() => location.hash), /type=llm\.failed/);
    // By text too.
    await tab.locator(".events-tools .filter-text").fill("NO SUCH TEXT ANYWHERE");
    await tab.locator("#events li.hint", { hasText: "No event matches." }).waitFor(WAIT);

    assert.deepStrictEqual(errors, [], "errors in the page");
    for (const k of ["trace", "events"]) assert.ok(figures[k] < LIMIT, k + " took " + figures[k].toFixed(0) + " ms, over " + LIMIT);
    const f = (ms) => ms.toFixed(0) + " ms";
    console.log(`serve_scale_check: ${spans.length} spans; trace first rows in ${f(figures.trace)} (limit ${LIMIT}), ` +
                `${collapsed} rows as the CLI's ${opt.cliRows} lines; fold opened in ${f(figures.unfold)} (${opened} rows); ` +
                `every span in ${f(figures.everySpan)}; text filter in ${f(figures.filterText)} (150 ms debounce, ${matching} match), ` +
                `kind filter in ${f(figures.filterKind)} (${tools}); events first page in ${f(figures.events)}, ` +
                `by type in ${f(figures.eventsType)}; feed of 50 from the log; payload wraps between words`);
  } catch (e) {
    console.error(e && e.stack ? e.stack : String(e));
    failed = true;
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
})();
