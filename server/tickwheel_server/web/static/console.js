// The Tickwheel console: a read-only view of a tenant's jobs, or of the
// cluster for the operator, drawn from the server's /api/ JSON.
//
// Everything shown is put into the page as text nodes (el() below), never as
// markup, so a job name or an error message cannot become HTML; the page's
// Content-Security-Policy requires Trusted Types, which makes every property
// or call that parses a string as markup throw, so a slip here fails loudly
// instead of opening a hole. The credential lives in sessionStorage: it is gone when
// the tab closes, and only this origin's script reads it.

"use strict";

const CREDENTIAL_KEY = "tickwheel.console.credential";
const SVG_NS = "http://www.w3.org/2000/svg";

const session = { kind: "", tenant: "" };

class ApiError extends Error {
  constructor(status, message, fields) {
    super(message);
    this.status = status;
    this.fields = fields || [];  // [{field, description}] of a 400
  }
}

// ------------------------------------------------------------------ DOM

function append(node, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// el("td", {class: "num", "data-x": 1}, "text", otherNode): attributes are
// set with setAttribute, children strings become text nodes.
function el(tag, attributes, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    if (value === null || value === undefined || value === false) continue;
    node.setAttribute(name, value === true ? "" : String(value));
  }
  return append(node, children);
}

function svg(tag, attributes, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes || {})) {
    node.setAttribute(name, String(value));
  }
  return append(node, children);
}

function table(id, headings, rows) {
  return el("table", { id },
    el("thead", {}, el("tr", {}, headings.map((h) => {
      const [text, cls] = Array.isArray(h) ? h : [h, null];
      return el("th", { class: cls }, text);
    }))),
    el("tbody", {}, rows));
}

function byId(id) {
  return document.getElementById(id);
}

// ------------------------------------------------------------ formatting

// "2026-11-26T08:25:00.123456Z" → "2026-11-26 08:25:00.123Z"
function fmtTime(timestamp) {
  if (!timestamp) return "—";
  const match = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})(\.\d{1,3})?\d*Z$/.exec(timestamp);
  return match ? `${match[1]} ${match[2]}${match[3] || ""}Z` : timestamp;
}

// A protobuf JSON Duration ("0.003512s") in seconds.
function seconds(duration) {
  if (!duration) return 0;
  const value = parseFloat(String(duration).replace(/s$/, ""));
  return Number.isFinite(value) ? value : 0;
}

function fmtSeconds(value) {
  if (value === null || value === undefined) return "—";
  if (value < 0.001) return `${(value * 1e6).toFixed(0)} µs`;
  if (value < 1) return `${(value * 1000).toFixed(value < 0.01 ? 2 : 1)} ms`;
  if (value < 60) return `${value.toFixed(2)} s`;
  const minutes = Math.floor(value / 60);
  return `${minutes} min ${Math.round(value - minutes * 60)} s`;
}

function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

function signedSeconds(value) {
  return `${value < 0 ? "−" : "+"}${fmtSeconds(Math.abs(value))}`;
}

function fmtBound(le) {
  if (le === null) return "> 60 s";
  return le < 1 ? `≤ ${+(le * 1000).toFixed(1)} ms` : `≤ ${le} s`;
}

// "EXECUTION_STATUS_SUCCEEDED" → "succeeded"
function enumText(value, prefix) {
  if (!value) return "unspecified";
  return String(value).replace(prefix, "").toLowerCase();
}

function statusCell(value, prefix) {
  const text = enumText(value, prefix);
  return el("td", { class: `status status-${text}` }, text);
}

function scheduleText(job) {
  const schedule = job.schedule || {};
  if (schedule.cron) return `${schedule.cron.expression} (${schedule.cron.timeZone || "UTC"})`;
  if (schedule.onceAt) return `once at ${fmtTime(schedule.onceAt)}`;
  if (schedule.local) return `once at ${schedule.local.localTime} (${schedule.local.timeZone})`;
  return "—";
}

function targetText(job) {
  const target = job.target || {};
  if (target.http) return `${target.http.method || "POST"} ${target.http.url}`;
  if (target.handler) return `handler ${target.handler.name}`;
  return "—";
}

function jobLink(id, text) {
  return el("a", { href: `#/jobs/${encodeURIComponent(id)}`, class: "job-link" }, text);
}

// -------------------------------------------------------------- the API

async function api(path) {
  const credential = sessionStorage.getItem(CREDENTIAL_KEY) || "";
  return request(path, credential);
}

async function request(path, credential) {
  const response = await fetch(path, {
    headers: { Authorization: `Bearer ${credential}`, Accept: "application/json" },
    cache: "no-store",
    credentials: "omit",
    redirect: "error",
  });
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (!response.ok) {
    const message = body && body.error ? body.error.message : `${response.status} ${response.statusText}`;
    throw new ApiError(response.status, message, body && body.error ? body.error.fields : []);
  }
  return body;
}

// ---------------------------------------------------------- sign in/out

function showLogin(message) {
  session.kind = "";
  session.tenant = "";
  byId("view").hidden = true;
  byId("view").replaceChildren();
  byId("nav").hidden = true;
  byId("nav").replaceChildren();
  byId("sign-out").hidden = true;
  byId("who").textContent = "";
  byId("login-view").hidden = false;
  const error = byId("login-error");
  error.textContent = message || "";
  error.hidden = !message;
  byId("credential").focus();
}

function signOut(message) {
  sessionStorage.removeItem(CREDENTIAL_KEY);
  if (location.hash) history.replaceState(null, "", location.pathname);
  showLogin(message);
}

function loginMessage(error) {
  if (error.status === 401) return "That credential was not accepted: it is unknown, expired or revoked.";
  if (error.status === 403) return error.message;
  return `The server could not be asked (${error.message}).`;
}

async function signIn(event) {
  event.preventDefault();
  const credential = byId("credential").value.trim();
  if (!credential) {
    showLogin("Enter a tenant API key or the admin token.");
    return;
  }
  try {
    const who = await request("/api/session", credential);
    sessionStorage.setItem(CREDENTIAL_KEY, credential);
    byId("credential").value = "";
    enter(who);
  } catch (error) {
    sessionStorage.removeItem(CREDENTIAL_KEY);
    showLogin(loginMessage(error));
  }
}

function enter(who) {
  session.kind = who.kind;
  session.tenant = who.tenant || "";
  byId("login-view").hidden = true;
  byId("login-error").hidden = true;
  byId("who").textContent = who.kind === "admin" ? "operator (admin token)" : `tenant ${who.tenant}`;
  byId("sign-out").hidden = false;
  const links = who.kind === "admin"
    ? [["#/cluster", "Cluster"]]
    : [["#/jobs", "Jobs"], ["#/deadletters", "Dead letters"]];
  byId("nav").replaceChildren(...links.map(([href, text]) => el("a", { href, "data-route": href }, text)));
  byId("nav").hidden = false;
  const home = who.kind === "admin" ? "#/cluster" : "#/jobs";
  if (!location.hash || location.hash === "#/") {
    location.hash = home;
  } else {
    route();
  }
}

// --------------------------------------------------------------- views

let renderSerial = 0;

async function route() {
  if (!session.kind) return;
  const hash = location.hash || "#/";
  for (const link of byId("nav").querySelectorAll("a")) {
    link.classList.toggle("current", hash === link.dataset.route || hash.startsWith(`${link.dataset.route}/`));
  }
  const view = byId("view");
  const serial = ++renderSerial;
  view.hidden = false;
  view.setAttribute("aria-busy", "true");
  view.replaceChildren(el("p", { class: "note" }, "Loading…"));
  let content;
  try {
    const job = /^#\/jobs\/([^/]+)$/.exec(hash);
    if (hash === "#/jobs") content = await jobsView();
    else if (job) content = await jobView(decodeURIComponent(job[1]));
    else if (hash === "#/deadletters") content = await deadLettersView();
    else if (hash === "#/cluster") content = await clusterView();
    else content = [el("h1", {}, "Not found"), el("p", { class: "note" }, "There is no such page in the console.")];
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      signOut("Your credential is no longer accepted; sign in again.");
      return;
    }
    content = [el("p", { id: "view-error", class: "error", role: "alert" }, error.message)];
  }
  if (serial !== renderSerial) return;  // a later navigation won
  view.replaceChildren(append(document.createDocumentFragment(), content));
  view.removeAttribute("aria-busy");
}

// A "Load more" button that appends the next page's rows to a table body.
function moreButton(label, token, load) {
  if (!token) return null;
  const button = el("button", { type: "button", class: "more" }, label);
  let next = token;
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      next = await load(next);
    } catch (error) {
      button.replaceWith(el("p", { class: "error", role: "alert" }, error.message));
      return;
    }
    if (next) button.disabled = false;
    else button.remove();
  });
  return button;
}

// A stored error (escaped by the server: `\x1b`, `\n`) with its escaped line
// breaks as line breaks, which the cell's `white-space: pre-wrap` shows: a
// handler's traceback reads as written. It is set as text, never markup, and
// nothing but LF is unescaped (no bidi override, no control reaches the page).
function errorText(text) {
  return (text || "").replaceAll("\\r\\n", "\n").replaceAll("\\n", "\n");
}

function lastRunCell(job) {
  const last = job.lastRun;
  if (!last) return el("td", { class: "note" }, "none yet");
  const text = enumText(last.status, "EXECUTION_STATUS_");
  return el("td", { class: `status status-${text}`, title: last.error || null },
    text, el("span", { class: "note" }, ` · ${fmtTime(last.finishedAt)}`));
}

function jobRow(job) {
  return el("tr", { class: "job", "data-job-id": job.id },
    el("td", { class: "name" }, jobLink(job.id, job.name)),
    el("td", { class: "mono" }, scheduleText(job)),
    statusCell(job.state, "JOB_STATE_"),
    el("td", {}, fmtTime(job.nextRunAt)),
    lastRunCell(job));
}

async function jobsView() {
  const page = await api("/api/jobs");
  const jobs = page.jobs || [];
  const body = el("tbody");
  append(body, jobs.map(jobRow));
  const content = [
    el("h1", {}, "Jobs"),
    el("table", { id: "jobs" },
      el("thead", {}, el("tr", {}, ["Name", "Schedule", "State", "Next run (UTC)", "Last run"].map((h) => el("th", {}, h)))),
      body),
  ];
  if (!jobs.length) content.push(el("p", { class: "note" }, "This tenant has no jobs."));
  content.push(moreButton("More jobs", page.nextPageToken, async (token) => {
    const next = await api(`/api/jobs?page_token=${encodeURIComponent(token)}`);
    append(body, (next.jobs || []).map(jobRow));
    return next.nextPageToken;
  }));
  return content;
}

function executionRows(execution) {
  const attempts = execution.attempts || [];
  const first = attempts[0];
  const why = execution.deadReason || execution.error || "";
  const rows = [el("tr", { class: "execution", "data-execution-id": execution.id },
    el("td", { class: "mono" }, fmtTime(execution.nominalAt)),
    el("td", {}, enumText(execution.origin, "EXECUTION_ORIGIN_")),
    statusCell(execution.status, "EXECUTION_STATUS_"),
    el("td", { class: "num" }, String(attempts.length)),
    el("td", {}, first ? fmtTime(first.startedAt) : "—"),
    el("td", { class: "num" }, first ? fmtSeconds(seconds(first.lateness)) : "—"),
    el("td", {}, fmtTime(execution.finishedAt)),
    el("td", { class: "error-text" }, errorText(why)))];
  for (const attempt of attempts) {
    rows.push(el("tr", { class: "attempt", "data-execution-id": execution.id },
      el("td", {}, `attempt ${attempt.attempt || 0} · delivery ${attempt.delivery || 0}`),
      el("td", {}, attempt.workerId || ""),
      statusCell(attempt.status, "ATTEMPT_STATUS_"),
      el("td", {}, ""),
      el("td", {}, fmtTime(attempt.startedAt)),
      el("td", { class: "num" }, fmtSeconds(seconds(attempt.lateness))),
      el("td", {}, fmtTime(attempt.finishedAt)),
      el("td", { class: "error-text" }, errorText(attempt.error))));
  }
  return rows;
}

function skipRow(skip) {
  return el("tr", { class: "skip" },
    el("td", {}, fmtTime(skip.fromAt)),
    el("td", {}, fmtTime(skip.toAt)),
    el("td", { class: "num" }, String(skip.count || 0)),
    el("td", { class: "reason" }, enumText(skip.reason, "SKIP_REASON_")));
}

// The lateness histogram as an SVG bar chart: one bar per bucket (empty
// buckets have no height), the count above each non-empty bar.
function latenessChart(data) {
  const width = 760, height = 230, left = 36, right = 8, top = 18, bottom = 46;
  const buckets = data.buckets || [];
  const plotWidth = width - left - right, plotHeight = height - top - bottom;
  const slot = plotWidth / Math.max(1, buckets.length);
  const highest = Math.max(1, ...buckets.map((b) => b.count));
  const chart = svg("svg", {
    id: "lateness-chart", class: "chart", viewBox: `0 0 ${width} ${height}`, width, height,
    role: "img", "aria-label": `Start lateness of ${data.count} attempts`,
  });
  append(chart, [
    svg("line", { class: "axis", x1: left, y1: top + plotHeight, x2: width - right, y2: top + plotHeight }),
    svg("line", { class: "axis", x1: left, y1: top, x2: left, y2: top + plotHeight }),
    svg("text", { x: left - 4, y: top + 4, "text-anchor": "end" }, String(highest)),
    svg("text", { x: left - 4, y: top + plotHeight, "text-anchor": "end" }, "0"),
  ]);
  buckets.forEach((bucket, index) => {
    const barHeight = bucket.count ? Math.max(1, (bucket.count / highest) * plotHeight) : 0;
    const x = left + index * slot + slot * 0.15;
    const y = top + plotHeight - barHeight;
    const label = fmtBound(bucket.le);
    append(chart, [
      svg("rect", {
        class: "bar", x: x.toFixed(1), y: y.toFixed(1), width: (slot * 0.7).toFixed(1), height: barHeight.toFixed(1),
        "data-le": bucket.le === null ? "+Inf" : String(bucket.le), "data-count": String(bucket.count),
      }, svg("title", {}, `${label}: ${bucket.count} attempt${bucket.count === 1 ? "" : "s"}`)),
      svg("text", {
        x: (left + index * slot + slot / 2).toFixed(1), y: top + plotHeight + 14, "text-anchor": "middle",
        transform: `rotate(35 ${(left + index * slot + slot / 2).toFixed(1)} ${top + plotHeight + 14})`,
      }, label.replace("≤ ", "")),
    ]);
    if (bucket.count) {
      const labelX = (x + slot * 0.35).toFixed(1);
      append(chart, svg("text", { class: "count", x: labelX, y: (y - 3).toFixed(1), "text-anchor": "middle" },
        String(bucket.count)));
    }
  });
  return chart;
}

function latenessSection(data) {
  const summary = data.count
    ? `${plural(data.count, "attempt")} of the last ${plural(data.executions, "execution")}` +
      ` · p50 ${fmtSeconds(data.p50)} · p95 ${fmtSeconds(data.p95)} · p99 ${fmtSeconds(data.p99)}` +
      ` · max ${fmtSeconds(data.max)}`
    : "No attempts yet: the chart fills in as the job runs.";
  return [
    el("h2", {}, "Start lateness"),
    latenessChart(data),
    el("p", { id: "lateness-summary", class: "chart-summary" }, summary),
  ];
}

// ------------------------------------------------- a schedule change, previewed

function fireCells(fire) {
  return [el("td", { class: "mono" }, fmtTime(fire.nominalAt)), el("td", { class: "mono" }, fire.localTime || "")];
}

function diffTable(id, title, count, rows, headings) {
  if (!count) return null;
  const shown = rows.length < count ? ` (the first ${rows.length})` : "";
  return [el("h3", {}, `${title}: ${count}${shown}`), table(id, headings, rows)];
}

function runDiffView(diff) {
  const added = diff.added || [], removed = diff.removed || [], moved = diff.moved || [];
  const count = (name) => Number(diff[name] || 0);
  const summary = `From ${fmtTime(diff.fromAt)} to ${fmtTime(diff.toAt)}: ` +
    `${count("addedCount")} added, ${count("removedCount")} removed, ${count("movedCount")} moved, ` +
    `${count("unchangedCount")} unchanged` + (diff.windowTruncated ? " (the window was cut short: too many runs)" : "") + ".";
  return [
    el("p", { id: "preview-summary" }, summary),
    diffTable("preview-added", "Added", count("addedCount"),
      added.map((fire) => el("tr", { class: "added" }, fireCells(fire))), ["Nominal (UTC)", "Local time"]),
    diffTable("preview-removed", "Removed", count("removedCount"),
      removed.map((fire) => el("tr", { class: "removed" }, fireCells(fire))), ["Nominal (UTC)", "Local time"]),
    diffTable("preview-moved", "Moved", count("movedCount"),
      moved.map((m) => el("tr", { class: "moved" }, fireCells(m.before || {}), fireCells(m.after || {}))),
      ["Before (UTC)", "Before, local", "After (UTC)", "After, local"]),
  ];
}

// A form that asks the server what a new cron expression or zone would do to
// the job's runs. Nothing is changed here: the console is read-only, and the
// change itself is made with the API or `tickwheel job update`.
function previewSection(path, job) {
  const cron = (job.schedule || {}).cron || {};
  const expression = el("input", { id: "preview-cron", name: "cron", class: "mono", required: "", maxlength: "512" });
  expression.value = cron.expression || "";
  const zone = el("input", { id: "preview-zone", name: "time_zone", class: "mono", required: "", maxlength: "64" });
  zone.value = cron.timeZone || "UTC";
  const days = el("input", { id: "preview-days", name: "days", type: "number", min: "1", max: "366" });
  days.value = "30";
  const result = el("div", { id: "preview-result", "aria-live": "polite" });
  const button = el("button", { type: "submit" }, "Preview");
  const form = el("form", { id: "preview-form", class: "preview" },
    el("label", {}, "Cron expression ", expression),
    el("label", {}, "Time zone ", zone),
    el("label", {}, "Days ", days),
    button);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    const query = new URLSearchParams({ cron: expression.value, time_zone: zone.value, days: days.value || "30" });
    try {
      const answer = await api(`${path}/preview?${query}`);
      result.replaceChildren(append(document.createDocumentFragment(), runDiffView(answer.runDiff || {})));
    } catch (error) {
      const fields = (error.fields || []).map((f) => el("li", {}, el("span", { class: "mono" }, f.field), `: ${f.description}`));
      result.replaceChildren(el("div", { class: "error", role: "alert", id: "preview-error" },
        error.message, fields.length ? el("ul", {}, fields) : null));
    } finally {
      button.disabled = false;
    }
  });
  return [
    el("p", { class: "note" }, "What a new schedule would do to this job's runs. Nothing is changed here: " +
      "apply a change with the API or `tickwheel job update`, which checks the same way."),
    form,
    result,
  ];
}

async function jobView(id) {
  const path = `/api/jobs/${encodeURIComponent(id)}`;
  const [detail, history, lateness] = await Promise.all([
    api(path), api(`${path}/executions`), api(`${path}/lateness`),
  ]);
  const job = detail.job;
  const facts = [
    ["Id", el("span", { class: "mono" }, job.id)],
    ["Schedule", el("span", { class: "mono" }, scheduleText(job))],
    ["State", enumText(job.state, "JOB_STATE_") + (job.pauseReason ? ` (${job.pauseReason})` : "")],
    ["Target", targetText(job)],
    ["Runs so far", String(job.runCount || 0)],
    ["Overlap", enumText(job.overlapPolicy, "OVERLAP_POLICY_")],
    ["Misfire", enumText(job.misfirePolicy, "MISFIRE_POLICY_")],
    ["Last run", job.lastRun
      ? `${enumText(job.lastRun.status, "EXECUTION_STATUS_")} at ${fmtTime(job.lastRun.finishedAt)}` +
        (job.lastRun.error ? `: ${job.lastRun.error}` : "")
      : "none yet"],
  ];
  const nextRuns = (detail.nextRuns || []).map((fire) => el("tr", { class: "next-run" },
    el("td", { class: "mono" }, fmtTime(fire.nominalAt)),
    el("td", { class: "mono" }, fmtTime(fire.dueAt)),
    el("td", { class: "mono" }, fire.localTime || ""),
    el("td", { class: "note" }, fire.note || "")));

  const historyBody = el("tbody");
  append(historyBody, (history.executions || []).map(executionRows));
  const skipsBody = el("tbody");
  append(skipsBody, (history.skips || []).map(skipRow));
  const historyTable = el("table", { id: "history" },
    el("thead", {}, el("tr", {}, ["Nominal (UTC)", "Origin / worker", "Status", ["Attempts", "num"], "Started (UTC)", ["Lateness", "num"],
      "Finished (UTC)", "Error"]
      .map((h) => Array.isArray(h) ? el("th", { class: h[1] }, h[0]) : el("th", {}, h)))),
    historyBody);
  const skipsTable = el("table", { id: "skips" },
    el("thead", {}, el("tr", {}, ["From (UTC)", "To (UTC)", "Count", "Reason"].map((h) => el("th", {}, h)))),
    skipsBody);

  return [
    el("p", { class: "note" }, el("a", { href: "#/jobs" }, "← Jobs")),
    el("h1", { id: "job-title" }, job.name),
    el("dl", { class: "facts" }, facts.map(([term, value]) => [el("dt", {}, term), el("dd", {}, value)])),
    el("h2", {}, "Next runs"),
    nextRuns.length
      ? table("next-runs", ["Nominal (UTC)", "Due (UTC)", "Local time", "Note"], nextRuns)
      : el("p", { class: "note", id: "next-runs" }, "No runs ahead (the job is not active, or its schedule has ended)."),
    el("h2", {}, "Preview a schedule change"),
    previewSection(path, job),
    latenessSection(lateness),
    el("h2", {}, "History"),
    historyTable,
    (history.executions || []).length ? null : el("p", { class: "note" }, "No executions yet."),
    moreButton("Older executions", history.nextPageToken, async (token) => {
      const next = await api(`${path}/executions?page_token=${encodeURIComponent(token)}`);
      append(historyBody, (next.executions || []).map(executionRows));
      append(skipsBody, (next.skips || []).map(skipRow));
      return next.nextPageToken;
    }),
    el("h2", {}, "Skipped occurrences"),
    skipsTable,
    (history.skips || []).length ? null : el("p", { class: "note" }, "None in this span of the history."),
  ];
}

function deadLetterRow(execution) {
  const attempts = execution.attempts || [];
  const last = attempts[attempts.length - 1];
  return el("tr", { class: "dead-letter", "data-execution-id": execution.id },
    el("td", { class: "mono" }, execution.id),
    el("td", {}, jobLink(execution.jobId, execution.jobId)),
    el("td", {}, fmtTime(execution.nominalAt)),
    el("td", {}, fmtTime(execution.finishedAt)),
    el("td", { class: "reason" }, execution.deadReason || ""),
    el("td", { class: "error-text" }, errorText(execution.error || (last && last.error))),
    el("td", { class: "num" }, String(attempts.length)));
}

async function deadLettersView() {
  const page = await api("/api/deadletters");
  const body = el("tbody");
  append(body, (page.executions || []).map(deadLetterRow));
  return [
    el("h1", {}, "Dead letters"),
    el("p", { class: "note" }, "Executions that ended without succeeding. Replay one with: tickwheel dlq replay ID"),
    el("table", { id: "dead-letters" },
      el("thead", {}, el("tr", {}, ["Execution", "Job", "Nominal (UTC)", "Died (UTC)", "Reason", "Last error", "Attempts"]
        .map((h) => el("th", {}, h)))),
      body),
    (page.executions || []).length ? null : el("p", { class: "note" }, "No dead letters."),
    moreButton("Older dead letters", page.nextPageToken, async (token) => {
      const next = await api(`/api/deadletters?page_token=${encodeURIComponent(token)}`);
      append(body, (next.executions || []).map(deadLetterRow));
      return next.nextPageToken;
    }),
  ];
}

async function clusterView() {
  const view = await api("/api/cluster");
  const cluster = view.cluster || {};
  const servers = (cluster.servers || []).map((server) => el("tr", { class: "server", "data-server-id": server.serverId },
    el("td", { class: "mono" }, server.serverId,
      server.serverId === view.answeredBy ? el("span", { class: "note" }, " (this server)") : null,
      server.serverId === cluster.reaperServerId ? el("span", { class: "note" }, " (reaper)") : null),
    el("td", { class: "mono" }, server.address || ""),
    el("td", {}, server.version || ""),
    el("td", {}, fmtTime(server.startedAt)),
    el("td", { class: "num" }, String(server.workers || 0)),
    el("td", { class: "num" }, String(server.partitionsOwned || 0)),
    el("td", { class: "num" }, String(server.wheelSize || 0)),
    el("td", { class: "num" }, server.clockSkew ? signedSeconds(seconds(server.clockSkew)) : "—"),
    el("td", { class: server.draining ? "status status-paused" : "" }, server.draining ? "draining" : "serving")));
  const owners = (view.owners || []).map((owner) => el("tr", { class: "owner", "data-server-id": owner.serverId },
    el("td", { class: "mono" }, owner.serverId || "(none)"),
    el("td", { class: "num" }, String(owner.partitions)),
    el("td", { class: owner.live ? "live-yes" : "live-no" }, owner.live ? "live" : "not live")));
  const atCap = (count) => Number(count || 0) >= view.readyCountCap;
  const queues = (cluster.queues || []).map((queue) => el("tr", { class: "queue", "data-tenant": queue.tenant },
    el("td", {}, queue.tenant),
    el("td", { class: "num ready" }, `${atCap(queue.ready) ? "≥ " : ""}${queue.ready || 0}`),
    el("td", { class: "num running" }, String(queue.running || 0)),
    el("td", { class: "num" }, queue.oldestReadyAge ? fmtSeconds(seconds(queue.oldestReadyAge)) : "—")));
  return [
    el("h1", {}, "Cluster"),
    el("dl", { class: "facts" }, [
      ["Partitions", String(cluster.partitionCount || 0)],
      ["Store", `${cluster.storeEngine || "?"}, schema ${cluster.schemaVersion || 0}`],
      ["tzdata", cluster.tzdataVersion || ""],
      ["Answered by", view.answeredBy],
    ].map(([term, value]) => [el("dt", {}, term), el("dd", {}, value)])),
    el("h2", {}, "Servers"),
    table("servers", ["Server", "Address", "Version", "Started (UTC)", ["Workers", "num"], ["Partitions", "num"],
      ["Wheel", "num"], ["Clock skew", "num"], "State"], servers),
    el("h2", {}, "Partitions per owner"),
    table("owners", ["Owner", ["Partitions", "num"], "Status"], owners),
    view.unownedPartitions
      ? el("p", { class: "note", id: "unowned" }, `${view.unownedPartitions} partitions have no owner right now.`)
      : null,
    el("h2", {}, "Deepest queues"),
    table("queues", ["Tenant", ["Ready", "num"], ["Running", "num"], ["Oldest ready", "num"]], queues),
    queues.length ? null : el("p", { class: "note" }, "Every queue is empty."),
    (cluster.queues || []).some((queue) => atCap(queue.ready))
      ? el("p", { class: "note" }, `Ready counts stop at ${view.readyCountCap}: "≥" marks a queue at least that deep.`)
      : null,
  ];
}

// ---------------------------------------------------------------- start

async function start() {
  byId("login-form").addEventListener("submit", signIn);
  byId("sign-out").addEventListener("click", () => signOut(""));
  window.addEventListener("hashchange", route);
  const credential = sessionStorage.getItem(CREDENTIAL_KEY);
  if (!credential) {
    showLogin("");
    return;
  }
  try {
    enter(await request("/api/session", credential));
  } catch (error) {
    signOut(loginMessage(error));
  }
}

document.addEventListener("DOMContentLoaded", start);
