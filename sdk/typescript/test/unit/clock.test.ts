/** The system clock's sleep: a wait past setTimeout's limit (a deadline years ahead) is waited in parts. */

import assert from "node:assert/strict";
import { afterEach, beforeEach, mock, test } from "node:test";

import { MAX_TIMER_MS, sleep } from "../../src/clock.js";

beforeEach(() => mock.timers.enable({ apis: ["setTimeout"] }));
afterEach(() => mock.timers.reset());

/** Lets the promise callbacks due run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i += 1) await Promise.resolve();
}

test("a wait longer than setTimeout takes ends at its end, not at once", async () => {
  let done = false;
  void sleep(MAX_TIMER_MS * 3 + 5).then(() => (done = true));
  mock.timers.tick(1);
  await settle();
  assert.equal(done, false, "setTimeout alone would have fired after 1 ms");
  for (let part = 0; part < 3; part += 1) {
    mock.timers.tick(MAX_TIMER_MS);
    await settle();
  }
  assert.equal(done, false);
  mock.timers.tick(10); // the 5 ms left (each part starts when the one before fired)
  await settle();
  assert.equal(done, true);
});

test("a wait of Infinity ends only when its signal aborts", async () => {
  const controller = new AbortController();
  let done = false;
  void sleep(Infinity, controller.signal).then(() => (done = true));
  mock.timers.tick(MAX_TIMER_MS * 10);
  await settle();
  assert.equal(done, false);
  controller.abort();
  await settle();
  assert.equal(done, true);
});
