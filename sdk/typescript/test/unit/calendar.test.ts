/**
 * The calendar helpers against a scripted SchedulerService on a real gRPC
 * (HTTP/2) server: the builder's weekdays and dates, the request each
 * method sends, the retry rule of each (a create carries a request id and
 * reads are retried; an update or a delete never is), paging, and errors
 * with their field violations.
 */

import assert from "node:assert/strict";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { after, before, beforeEach, describe, test } from "node:test";

import { clone, create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";

import { calendar, weekday } from "../../src/builders.js";
import { TickwheelClient } from "../../src/client.js";
import { TickwheelError } from "../../src/errors.js";
import { BadRequestSchema } from "../../src/gen/google/rpc/error_details_pb.js";
import {
  CalendarSchema,
  CreateCalendarResponseSchema,
  DeleteCalendarResponseSchema,
  GetCalendarResponseSchema,
  ListCalendarsResponseSchema,
  UpdateCalendarResponseSchema,
  Weekday,
  type Calendar,
} from "../../src/gen/tickwheel/v1/calendar_pb.js";
import { SchedulerService } from "../../src/gen/tickwheel/v1/scheduler_pb.js";

/** Every request the fake received, by method, and failures to answer first. */
const received: { method: string; request: any; authorization: string | null }[] = [];
let failFirst: Record<string, ConnectError[]> = {};

function answer<T>(method: string, request: unknown, authorization: string | null, reply: () => T): T {
  received.push({ method, request, authorization });
  const failure = failFirst[method]?.shift();
  if (failure !== undefined) throw failure;
  return reply();
}

const stored = (name: string, version = 1n) => create(CalendarSchema, { name, timeZone: "Europe/London", version });

/** `sent` as stored at `version`. */
function withVersion(sent: Calendar | undefined, version: bigint): Calendar {
  const out = sent === undefined ? create(CalendarSchema) : clone(CalendarSchema, sent);
  out.version = version;
  return out;
}

let server: http2.Http2Server;
let address = "";

before(async () => {
  const handler = connectNodeAdapter({
    routes: (router) =>
      router.service(SchedulerService, {
        createCalendar: (request, context) => answer("createCalendar", request, context.requestHeader.get("authorization"),
          () => create(CreateCalendarResponseSchema, { calendar: withVersion(request.calendar, 1n), created: true })),
        getCalendar: (request, context) => answer("getCalendar", request, context.requestHeader.get("authorization"),
          () => create(GetCalendarResponseSchema, { calendar: stored(request.name) })),
        listCalendars: (request, context) => answer("listCalendars", request, context.requestHeader.get("authorization"),
          () => {
            const page = Number(request.pageToken || "0");
            return create(ListCalendarsResponseSchema, {
              calendars: [stored(`cal-${page * 2}`), stored(`cal-${page * 2 + 1}`)],
              nextPageToken: page < 2 ? String(page + 1) : "",
            });
          }),
        updateCalendar: (request, context) => answer("updateCalendar", request, context.requestHeader.get("authorization"),
          () => create(UpdateCalendarResponseSchema, { calendar: withVersion(request.calendar, (request.calendar?.version ?? 0n) + 1n) })),
        deleteCalendar: (request, context) => answer("deleteCalendar", request, context.requestHeader.get("authorization"),
          () => create(DeleteCalendarResponseSchema, {})),
      }),
  });
  server = http2.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
});

after(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  received.length = 0;
  failFirst = {};
});

const waits: number[] = [];
function client(): TickwheelClient {
  waits.length = 0;
  const clock = { now: () => new Date(), monotonicMs: () => performance.now(), sleep: async (ms: number) => void waits.push(ms) };
  return new TickwheelClient({ address, apiKey: "twk_cal", clock, random: () => 0.5, retries: 3 });
}

const down = () => new ConnectError("store unavailable", Code.Unavailable);

describe("calendar builder", () => {
  test("weekdays by name, abbreviation or ISO number; dates as text or a Date's UTC date", () => {
    const built = calendar("uk-banks", "Europe/London", {
      businessDays: ["mon", "Tuesday", 3, " THU ", Weekday.FRIDAY],
      holidays: ["2027-12-27", new Date("2027-12-28T23:30:00Z")],
      halfDays: [new Date(Date.UTC(2027, 11, 24))],
    });
    assert.equal(built.name, "uk-banks");
    assert.equal(built.timeZone, "Europe/London");
    assert.deepEqual(built.businessDays, [Weekday.MONDAY, Weekday.TUESDAY, Weekday.WEDNESDAY, Weekday.THURSDAY, Weekday.FRIDAY]);
    assert.deepEqual(built.holidays, ["2027-12-27", "2027-12-28"]);
    assert.deepEqual(built.halfDays, ["2027-12-24"]);
    assert.deepEqual(calendar("plain", "UTC").businessDays, [], "empty: the server's Monday to Friday");
  });

  test("what is not a weekday or a date throws here", () => {
    for (const bad of [0, 8, 1.5, "funday", "", "mo"]) {
      assert.throws(() => weekday(bad), RangeError, String(bad));
    }
    assert.throws(() => calendar("x", "UTC", { holidays: [new Date("nope")] }), TypeError);
  });
});

describe("calendar calls", () => {
  test("a create sends the calendar with a request id and is retried under that id", async () => {
    const c = client();
    try {
      failFirst["createCalendar"] = [down(), down()];
      const created = await c.createCalendar(calendar("uk", "Europe/London", { holidays: ["2027-12-27"] }));
      assert.equal(created.created, true);
      assert.equal(created.calendar?.version, 1n);
      const sent = received.map((r) => r.request.requestId as string);
      assert.equal(sent.length, 3);
      assert.equal(new Set(sent).size, 1, "every attempt carries the same request id");
      assert.match(sent[0]!, /^[0-9a-f-]{36}$/);
      assert.deepEqual(received[0]!.request.calendar.holidays, ["2027-12-27"]);
      assert.deepEqual(waits, [100, 200]);
      assert.equal(received[0]!.authorization, "Bearer twk_cal");

      received.length = 0;
      await c.createCalendar({ name: "given", timeZone: "UTC" }, { requestId: "cal-req-1" });
      assert.equal(received[0]!.request.requestId, "cal-req-1");
    } finally {
      c.close();
    }
  });

  test("reads are retried; an update and a delete are never repeated", async () => {
    const c = client();
    try {
      failFirst["getCalendar"] = [down()];
      assert.equal((await c.getCalendar("uk")).calendar?.name, "uk");
      failFirst["listCalendars"] = [down()];
      await c.listCalendars({ pageSize: 2 });
      assert.deepEqual(received.map((r) => r.method), ["getCalendar", "getCalendar", "listCalendars", "listCalendars"]);
      assert.equal(received[3]!.request.pageSize, 2);

      received.length = 0;
      failFirst["updateCalendar"] = [down()];
      failFirst["deleteCalendar"] = [down()];
      const current = stored("uk", 4n);
      await assert.rejects(c.updateCalendar(current, { updateMask: ["holidays"] }),
        (e: unknown) => e instanceof TickwheelError && e.code === Code.Unavailable);
      await assert.rejects(c.deleteCalendar("uk", { version: 4 }),
        (e: unknown) => e instanceof TickwheelError && e.code === Code.Unavailable);
      assert.deepEqual(received.map((r) => r.method), ["updateCalendar", "deleteCalendar"], "one attempt each");

      received.length = 0;
      const updated = await c.updateCalendar(current, { updateMask: ["holidays"] });
      assert.equal(updated.calendar?.version, 5n);
      assert.deepEqual(received[0]!.request.updateMask.paths, ["holidays"]);
      assert.equal(received[0]!.request.calendar.version, 4n);
      await c.deleteCalendar("uk", { version: 5 });
      assert.equal(received[1]!.request.version, 5n);
      await c.updateCalendar(current);
      assert.equal(received[2]!.request.updateMask, undefined, "no mask: every field");
    } finally {
      c.close();
    }
  });

  test("iterCalendars follows the page tokens to the end", async () => {
    const c = client();
    try {
      const names: string[] = [];
      for await (const item of c.iterCalendars({ pageSize: 2 })) names.push(item.name);
      assert.deepEqual(names, ["cal-0", "cal-1", "cal-2", "cal-3", "cal-4", "cal-5"]);
      assert.deepEqual(received.map((r) => r.request.pageToken), ["", "1", "2"]);
    } finally {
      c.close();
    }
  });

  test("a refusal is a TickwheelError with its code and field violations, not retried", async () => {
    const c = client();
    try {
      failFirst["createCalendar"] = [new ConnectError("invalid", Code.InvalidArgument, undefined, [
        { desc: BadRequestSchema, value: { fieldViolations: [{ field: "calendar.holidays[0]", description: "not a date" }] } },
      ])];
      failFirst["getCalendar"] = [new ConnectError("calendar 'gone' not found", Code.NotFound)];
      await assert.rejects(c.createCalendar(calendar("bad", "UTC", { holidays: ["2027-02-30"] })), (e: unknown) =>
        e instanceof TickwheelError && e.codeName === "INVALID_ARGUMENT" &&
        e.violation("calendar.holidays[0]")?.description === "not a date");
      await assert.rejects(c.getCalendar("gone"), (e: unknown) => e instanceof TickwheelError && e.code === Code.NotFound);
      assert.deepEqual(received.map((r) => r.method), ["createCalendar", "getCalendar"]);
      assert.deepEqual(waits, []);
    } finally {
      c.close();
    }
  });
});
