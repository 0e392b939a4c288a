// SPDX-License-Identifier: MIT
// What the real-client scripts share: an inbox of the messages sbxd sent, waited on with a
// deadline (a hang is a failure, reported, never a stuck test), and the JSON report the
// end-to-end test (tests/e2e/test_clients.py) reads from stdout.
'use strict';

const report = { steps: [] };
let current = 'start';

// Ends the process with the report once `seconds` have passed: sbxd left the client waiting.
function guard(seconds) {
  const t = setTimeout(() => {
    report.timeout = current;
    process.stdout.write(JSON.stringify(report) + '\n');
    process.exit(3);
  }, seconds * 1000);
  t.unref();
}

function step(name) {
  current = name;
  report.steps.push(name);
}

function done() {
  process.stdout.write(JSON.stringify(report) + '\n');
  process.exit(0);
}

function fail(err) {
  report.exception = String(err && err.stack ? err.stack : err);
  report.failed_in = current;
  process.stdout.write(JSON.stringify(report) + '\n');
  process.exit(2);
}

function hex(b) {
  return Buffer.from(b).toString('hex');
}

// Every message received, and promises waiting for one that matches.
class Inbox {
  constructor() {
    this.msgs = [];
    this.waiters = [];
  }

  push(msg) {
    this.msgs.push(msg);
    this.waiters = this.waiters.filter((w) => {
      if (!w.pred(msg)) {
        return true;
      }
      w.resolve(msg);
      return false;
    });
  }

  // The first message (already received or still to come) for which pred holds.
  waitFor(pred) {
    const seen = this.msgs.find(pred);
    if (seen) {
      return Promise.resolve(seen);
    }
    return new Promise((resolve) => this.waiters.push({ pred, resolve }));
  }
}

module.exports = { report, guard, step, done, fail, hex, Inbox };
