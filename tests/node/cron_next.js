// The next fires of cron expressions by npm's cron-parser (pinned in
// package.json), for the differential test of schedule/cron.cc
// (tests/schedule/cron_differential_test.cc).
//
//   node cron_next.js [NODE_MODULES] < queries.jsonl > answers.jsonl
//
// Each input line {"expr": "0 9 * * mon", "tz": "UTC", "start": "<ISO>", "n": 5}
// gets one output line, {"ok": true, "next": ["<ISO Z>", ...]} or
// {"ok": false, "error": "..."}, in the same order.
"use strict";
const path = require("path");
const readline = require("readline");

const nodeModules = process.argv[2] || path.join(__dirname, "node_modules");
const { CronExpressionParser } = require(path.resolve(nodeModules, "cron-parser"));

const out = [];
readline.createInterface({ input: process.stdin, crlfDelay: Infinity })
  .on("line", (line) => {
    if (!line.trim()) return;
    let answer;
    try {
      const q = JSON.parse(line);
      const it = CronExpressionParser.parse(q.expr, { currentDate: q.start, tz: q.tz });
      const next = [];
      for (let i = 0; i < q.n; ++i) next.push(it.next().toDate().toISOString());
      answer = { ok: true, next };
    } catch (e) {
      answer = { ok: false, error: String(e && e.message ? e.message : e) };
    }
    out.push(JSON.stringify(answer));
    if (out.length >= 1024) process.stdout.write(out.splice(0).join("\n") + "\n");
  })
  .on("close", () => {
    if (out.length) process.stdout.write(out.join("\n") + "\n");
  });
