// Opens an HTML trace export in Debian's Chromium, headless, with the
// network cut off (an offline context; every request but the page itself
// aborted and counted), and checks that it renders: collapsed as `carapace
// trace show` collapses it (--rows: one row per line of the CLI naming a span
// or standing for several), a folded turn opening on a click, then with
// "every span" one tree row per span with a timeline bar, a hostile name
// shown as text and never run, a collapsible tree, a span's details on click.
//
//   node html_check.js NODE_MODULES PAGE.html SPANS --rows N [--hostile TEXT] [--click NAME [--nth N] --expect TEXT] [--screenshot OUT.png]
//
// Exit 0 and one summary line when it holds; 1 and the first problem otherwise.
"use strict";
const path = require("path");
const assert = require("assert");

const [nodeModules, page, spans, ...rest] = process.argv.slice(2);
const opt = { rows: -1, hostile: "", click: "", nth: 0, expect: [], screenshot: "" };
for (let i = 0; i < rest.length; ++i) {
  if (rest[i] === "--rows") opt.rows = Number(rest[++i]);
  else if (rest[i] === "--hostile") opt.hostile = rest[++i];
  else if (rest[i] === "--click") opt.click = rest[++i];
  else if (rest[i] === "--nth") opt.nth = Number(rest[++i]);
  else if (rest[i] === "--expect") opt.expect.push(rest[++i]);
  else if (rest[i] === "--screenshot") opt.screenshot = rest[++i];
  else throw new Error("unknown option " + rest[i]);
}
const { chromium } = require(path.resolve(nodeModules, "playwright-core"));

(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
                                          args: ["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND"] });
  let failed = false;
  try {
    const context = await browser.newContext({ offline: true, viewport: { width: 1280, height: 720 } });
    const blocked = [];
    const pageUrl = "file://" + path.resolve(page);
    await context.route("**/*", (route) => {
      if (route.request().url() === pageUrl) return route.continue();
      blocked.push(route.request().url());
      return route.abort();
    });
    const tab = await context.newPage();
    const errors = [];
    tab.on("pageerror", (e) => errors.push("page error: " + e.message));
    tab.on("console", (m) => { if (m.type() === "error") errors.push("console: " + m.text()); });
    tab.on("request", (r) => { if (r.url() !== pageUrl) blocked.push(r.url()); });
    await tab.goto(pageUrl);
    await tab.waitForSelector(".row");

    // Collapsed as the CLI collapses it; a turn on one line opens on a click.
    const shownRows = () => tab.evaluate(() => Number(document.querySelector("section.trace").dataset.rows));
    assert.strictEqual(await shownRows(), opt.rows, "rows against the CLI's lines");
    assert.strictEqual(await tab.locator(".row").count(), opt.rows, "rows built");
    const folded = tab.locator('.row[data-kind="turn"][data-collapsed="1"]');
    const foldedTurns = await folded.count();
    if (foldedTurns) {
      await folded.first().locator(".toggle").click();
      assert.ok(await shownRows() > opt.rows, "a folded turn opened");
    }

    // Every span: the tree, one row per span, each with a timeline bar.
    await tab.locator(".filter-full").check();
    const rows = tab.locator(".row");
    assert.strictEqual(await rows.count(), Number(spans), "rows");
    assert.strictEqual(await tab.locator(".row .bar").count(), Number(spans), "timeline bars");
    const firstName = await rows.first().locator(".name").textContent();
    assert.match(firstName, /^session /, "the first row is the session");
    const bars = await tab.$$eval(".bar", (all) => all.map((b) => [parseFloat(b.style.left), parseFloat(b.style.width)]));
    assert.ok(bars.every(([l, w]) => l >= 0 && w >= 0 && l + w <= 100.0001), "bars within the timeline");
    assert.ok(bars[0][0] === 0 && bars[0][1] > 90, "the session's bar spans the timeline");

    // A hostile name: shown as text, nothing it says is run or loaded.
    if (opt.hostile) {
      const shown = await tab.$$eval(".row .name", (names) => names.map((n) => n.textContent));
      assert.ok(shown.some((t) => t.includes(opt.hostile)), "the hostile name is shown as text");
      assert.strictEqual(await tab.evaluate(() => window.__pwned === undefined), true, "the hostile name ran");
      assert.strictEqual(await tab.locator("#traces img, #details img").count(), 0, "an element from the data");
    }

    // Collapsible: the root's toggle hides every other row of its tree, and shows them again.
    const total = await rows.count();
    await rows.first().locator(".toggle").click();
    assert.strictEqual(await tab.locator(".row:visible").count(), 1, "collapsed: only the root shows");
    await rows.first().locator(".toggle").click();
    assert.strictEqual(await tab.locator(".row:visible").count(), total, "expanded again");

    // A span's details on click.
    if (opt.click) {
      const row = tab.locator(".row", { has: tab.locator(".name", { hasText: opt.click }) }).nth(opt.nth);
      await row.click();
      assert.strictEqual(await tab.locator("#details h3").textContent(), opt.click);
      const details = await tab.locator("#details").textContent();
      for (const want of opt.expect) assert.ok(details.includes(want), "details lack " + JSON.stringify(want) + ": " + details);
      assert.ok(await row.evaluate((r) => r.classList.contains("selected")), "the clicked row is selected");
    }
    if (opt.screenshot) await tab.screenshot({ path: opt.screenshot, fullPage: true });
    assert.deepStrictEqual(errors, [], "errors in the page");
    assert.deepStrictEqual(blocked, [], "the page asked the network for something");
    console.log(`html_check: ${path.basename(page)}: ${opt.rows} rows as the CLI's lines (${foldedTurns} turns folded), ` +
                `${total} rows with timeline bars with every span, collapsible, details on click, ` +
                `no request, no error` + (opt.hostile ? ", hostile name shown as text" : ""));
  } catch (e) {
    console.error(e && e.stack ? e.stack : String(e));
    failed = true;
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
})();
