// Opens the schedules view of a hosting `carapace serve` in Debian's Chromium, headless, and drives
// it as a person would (serve_schedule_check.sh makes the home and the scenario):
//
//   1. the header's Schedules link: #/schedules, no schedule yet; one made from the New schedule
//      form (a cron that fires on January 1st only, so it never fires by itself during the check),
//      listed with its cron, zone, state idle and next fire in its zone;
//   2. one made through the API from Node: its row appears by the socket's `schedule` message;
//   3. Run now: the state `running` (Run now off, and the API's trigger 409 while it goes), then
//      the run in the schedule's last runs, completed; its link opens the session's view, and the
//      session is in the session list;
//   4. Pause (state paused, no next fire), Resume (idle, the next fire again);
//   5. the form with a bad cron: the API's 400 on the page, naming the hour field; a name in use:
//      the 409;
//   6. a second server on the same home (read-only: the host holds it): the schedules, the run,
//      the read-only note, and no form or control; a POST gets 405;
//   7. Remove (after a confirm): the row goes; the schedule is gone from the API and, reloaded, from
//      the read-only page; its run's session stays.
//
// No error in either page but the two refusals step 5 asks for.
//
//   node serve_schedule_check.js NODE_MODULES URL --bin CARAPACE --home HOME [--screenshots DIR]
// (--screenshots: writes serve-schedules.png and serve-schedules-read-only.png there.)
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

function step(text) { console.log("serve_schedule_check: " + text + " (" + ((Date.now() - started) / 1000).toFixed(1) + " s)"); }

// The API from Node, as a program would call it: {status, body}.
async function call(method, p, body, { origin = base.origin } = {}) {
  const headers = { Authorization: "Bearer " + token };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(new URL(p, origin), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let parsed = null;
  try { parsed = await res.json(); } catch (e) { parsed = null; }
  return { status: res.status, body: parsed };
}

// `carapace serve --port 0 --read-only` on the same home: {child, url}.
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

// Where "0 0 1 1 *" in Europe/Berlin fires next, as the API's next_local writes it.
function nextNewYearInBerlin() {
  const year = Number(new Intl.DateTimeFormat("en", { timeZone: "Europe/Berlin", year: "numeric" }).format(new Date()));
  return (year + 1) + "-01-01 00:00 +01:00";
}

// What a page shows of errors: uncaught exceptions, console errors, HTTP answers >= 400.
function watchErrors(page) {
  const errors = [];
  page.on("pageerror", (e) => errors.push({ what: "page error: " + e.message }));
  page.on("console", (m) => { if (m.type() === "error") errors.push({ what: "console: " + m.text(), url: m.location().url }); });
  page.on("response", (r) => {
    if (r.status() >= 400) errors.push({ what: "HTTP " + r.status() + " for " + r.request().method() + " " + r.url(), status: r.status() });
  });
  return errors;
}

(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
                                          args: ["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"] });
  let failed = false;
  let second = null;
  try {
    assert.ok(token, "the URL carapace serve printed carries #token=: " + url);
    const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    await context.route("**/*", (route) => (new URL(route.request().url()).hostname === "127.0.0.1" ? route.continue() : route.abort()));
    const tab = await context.newPage();
    const errors = watchErrors(tab);
    const dialogs = [];
    tab.on("dialog", async (d) => { dialogs.push(d.message()); await d.accept(); });
    const received = [];
    tab.on("websocket", (ws) => ws.on("framereceived", (f) => {
      try { received.push(JSON.parse(f.payload)); } catch (e) { /* not JSON */ }
    }));
    const test = (name, page = tab) => page.locator(`[data-test="${name}"]`);
    const row = (name, page = tab) => page.locator(`tr.schedule[data-schedule="${name}"]`);
    const inState = (name, st, page = tab) => row(name, page).locator(`[data-test="schedule-state"][data-state="${st}"]`);
    const problem = tab.locator("#problem");
    const expectedNext = nextNewYearInBerlin();

    // 1. The view, and the New schedule form.
    await tab.goto(base.origin + "/#token=" + token);
    await tab.locator("#conn.connected").waitFor(WAIT);
    await test("nav-schedules").click();
    await tab.waitForFunction(() => location.hash === "#/schedules", null, WAIT);
    await tab.locator("#schedules .empty", { hasText: "No schedules" }).waitFor(WAIT);
    assert.ok(await test("nav-schedules").evaluate((a) => a.classList.contains("current")), "the Schedules link marked current");
    await test("schedule-name").fill("nightly");
    await test("schedule-cron").fill("0 0 1 1 *");
    await test("schedule-task").fill("Tidy the notes");
    await test("schedule-tz").fill("Europe/Berlin");
    await test("schedule-overlap").selectOption("skip");
    await test("schedule-create").click();
    await row("nightly").waitFor(WAIT);
    await row("nightly").locator('[data-test="schedule-next"]', { hasText: expectedNext }).waitFor(WAIT);
    const nightlyText = await row("nightly").textContent();
    for (const want of ["0 0 1 1 *", "Europe/Berlin", "Tidy the notes", "defined by api", "0 fired"]) {
      assert.ok(nightlyText.includes(want), "the row shows " + JSON.stringify(want) + ": " + nightlyText);
    }
    await inState("nightly", "idle").waitFor(WAIT);
    assert.strictEqual(await test("schedule-name").inputValue(), "", "the form emptied once the schedule was made");
    const made = await call("GET", "/api/schedules/nightly");
    assert.strictEqual(made.status, 200, "GET /api/schedules/nightly: " + JSON.stringify(made.body));
    assert.strictEqual(made.body.data.next_local, expectedNext, "its next_local: " + JSON.stringify(made.body.data));
    assert.strictEqual(made.body.data.source, "api", "its source");
    step("a schedule made from the form: listed with cron, zone, state idle, next fire " + expectedNext);

    // 2. One made through the API: the socket's push brings it.
    const weekly = await call("POST", "/api/schedules", { name: "weekly", cron: "0 9 * * mon", task: "Write the weekly report" });
    assert.strictEqual(weekly.status, 200, "POST /api/schedules (weekly): " + JSON.stringify(weekly.body));
    await row("weekly").waitFor(WAIT);
    assert.ok(received.some((m) => m.type === "schedule" && m.name === "weekly"), "a `schedule` message for weekly on the socket");
    assert.match(await row("weekly").textContent(), /UTC/, "a schedule without tz shows UTC");
    step("a schedule made through the API appeared by the socket's push (no reload)");

    // 3. Run now: running, then its run completed.
    await row("nightly").locator('[data-test="schedule-trigger"]').click();
    await inState("nightly", "running").waitFor(WAIT);
    assert.ok(await row("nightly").locator('[data-test="schedule-trigger"]').isDisabled(), "Run now on while a run goes (overlap skip)");
    const twice = await call("POST", "/api/schedules/nightly/trigger", {});
    assert.strictEqual(twice.status, 409, "a trigger while a run goes (overlap skip): " + JSON.stringify(twice.body));
    const run = row("nightly").locator('[data-test="schedule-run"][data-outcome="completed"]');
    await run.waitFor({ timeout: 30000 });
    const runId = await run.getAttribute("data-session");
    assert.match(runId, /^nightly-\d{8}-\d{6}-trigger$/, "the run's session id");
    assert.match(await run.textContent(), /trigger/, "the run's trigger shown");
    await inState("nightly", "idle").waitFor(WAIT);
    await row("nightly").locator('[data-test="schedule-counts"]', { hasText: "1 fired" }).waitFor(WAIT);
    step("Run now: state running (Run now off, the API's trigger 409), then run " + runId + " completed in its last runs");
    if (opt.screenshots) await tab.screenshot({ path: path.join(opt.screenshots, "serve-schedules.png"), fullPage: true });
    await run.locator("a").click();
    await tab.waitForFunction((id) => location.hash === "#/session/" + encodeURIComponent(id), runId, WAIT);
    await tab.locator("#trace-head .badge", { hasText: /^completed$/ }).waitFor(WAIT);
    await tab.locator('[data-test="chat-log"] .chat-msg', { hasText: "Tidy the notes" }).waitFor(WAIT);
    await test("nav-sessions").click();
    await tab.locator(`tr[data-session="${runId}"] .badge`, { hasText: /^completed$/ }).waitFor(WAIT);
    step("the run's link opened its session (completed, the task in its chat); the session list has it");

    // 4. Pause, Resume.
    await test("nav-schedules").click();
    await row("nightly").locator('[data-test="schedule-pause"]').click();
    await inState("nightly", "paused").waitFor(WAIT);
    await row("nightly").locator('[data-test="schedule-next"]', { hasText: "none while paused" }).waitFor(WAIT);
    assert.strictEqual((await call("GET", "/api/schedules/nightly")).body.data.paused, true, "paused, says the API");
    await row("nightly").locator('[data-test="schedule-resume"]').click();
    await inState("nightly", "idle").waitFor(WAIT);
    await row("nightly").locator('[data-test="schedule-next"]', { hasText: expectedNext }).waitFor(WAIT);
    assert.strictEqual(await row("nightly").locator('[data-test="schedule-pause"]').count(), 1, "Pause back after Resume");
    step("Pause: state paused, no next fire; Resume: idle, next fire " + expectedNext);

    // 5. The API's refusals, in the form.
    await test("schedule-name").fill("broken");
    await test("schedule-cron").fill("0 24 * * *");
    await test("schedule-task").fill("Never runs");
    await test("schedule-create").click();
    await problem.filter({ hasText: "hour field '24'" }).waitFor(WAIT);
    const badCron = await problem.textContent();
    assert.ok(badCron.includes("schedule broken.cron") && badCron.includes("24 is out of 0-23"), "the 400 on the page: " + badCron);
    assert.strictEqual(await test("schedule-cron").inputValue(), "0 24 * * *", "the form keeps what was typed after a refusal");
    assert.strictEqual(await row("broken").count(), 0, "a row for the refused schedule");
    await test("schedule-name").fill("nightly");
    await test("schedule-cron").fill("0 0 1 1 *");
    await test("schedule-create").click();
    await problem.filter({ hasText: "exists already" }).waitFor(WAIT);
    assert.match(await problem.textContent(), /replace/, "the 409's hint on the page");
    step("the form's refusals shown: " + JSON.stringify(badCron) + "; a name in use: 409");

    // 6. A read-only server on the same home: the schedules, no control.
    second = await startReadOnly();
    const other = await context.newPage();
    const otherErrors = watchErrors(other);
    const secondUrl = new URL(second.url);
    await other.goto(secondUrl.origin + "/" + secondUrl.hash.replace(/^#token=[^&]*/, "$&&/schedules"));
    await other.locator("#conn.connected").waitFor(WAIT);
    await other.locator("#mode").waitFor({ state: "visible", ...WAIT });
    await other.waitForFunction(() => location.hash === "#/schedules", null, WAIT);
    await row("weekly", other).waitFor(WAIT);
    await row("nightly", other).locator(`[data-test="schedule-run"][data-session="${runId}"][data-outcome="completed"]`).waitFor(WAIT);
    await row("nightly", other).locator('[data-test="schedule-next"]', { hasText: expectedNext }).waitFor(WAIT);
    for (const name of ["schedule-create", "schedule-name", "schedule-pause", "schedule-resume", "schedule-trigger", "schedule-remove"]) {
      assert.strictEqual(await test(name, other).count(), 0, "a " + name + " control on a read-only page");
    }
    const refused = await call("POST", "/api/schedules/nightly/pause", {}, { origin: secondUrl.origin });
    assert.strictEqual(refused.status, 405, "a POST to a read-only server: " + JSON.stringify(refused.body));
    if (opt.screenshots) await other.screenshot({ path: path.join(opt.screenshots, "serve-schedules-read-only.png"), fullPage: true });
    step("a read-only server on the same home: both schedules, the run completed, the next fire; no form or control; a POST gets 405");

    // 7. Remove, after a confirm.
    await row("nightly").locator('[data-test="schedule-remove"]').click();
    await row("nightly").waitFor({ state: "detached", ...WAIT });
    assert.strictEqual(dialogs.length, 1, "one confirm: " + JSON.stringify(dialogs));
    assert.match(dialogs[0], /nightly/, "the confirm names the schedule");
    const removed = await call("GET", "/api/schedules/nightly");
    assert.strictEqual(removed.status, 404, "GET /api/schedules/nightly once removed (the read-only server and the POSTs say 404): " +
                                            JSON.stringify(removed.body).slice(0, 200));
    assert.strictEqual((await call("GET", "/api/sessions/" + encodeURIComponent(runId))).status, 200, "the removed schedule's run's session");
    await row("weekly").waitFor(WAIT);
    await other.reload();
    await row("weekly", other).waitFor(WAIT);
    assert.strictEqual(await row("nightly", other).count(), 0, "the removed schedule on the read-only page, reloaded");
    step("Remove (confirmed): the row went; the API says 404, the read-only page reloaded lists weekly only; the run's session stays");

    // Step 5's two refusals, as the answer and as Chromium's console line for it; nothing else.
    const refusal = (e) => (e.status === 400 || e.status === 409) && / POST .*\/api\/schedules$/.test(e.what) ||
                           e.url && new URL(e.url).pathname === "/api/schedules" && /status of 40[09]/.test(e.what);
    assert.strictEqual(errors.filter((e) => refusal(e) && e.status).length, 2, "the page's refused POSTs: " + JSON.stringify(errors));
    assert.deepStrictEqual(errors.filter((e) => !refusal(e)).map((e) => e.what), [], "errors in the page");
    assert.deepStrictEqual(otherErrors.map((e) => e.what), [], "errors in the read-only page");
    step("no error in either page but the two refusals asked for");
    await other.close();
    console.log("serve_schedule_check: ok");
  } catch (e) {
    console.error("serve_schedule_check: FAILED: " + (e && e.stack ? e.stack : String(e)));
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
