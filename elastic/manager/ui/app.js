// The live page of the pool: the manager's view (GET /v1/view) as server-sent events from
// /v1/view/stream, drawn into the tables without reloading. Every state is written as text
// (never by colour alone); data is set as text, never as markup.
"use strict";

const byId = (id) => document.getElementById(id);
let offset = 0; // the manager's clock minus ours, in seconds
let manager = null;
let latest = null;
let paused = false;

function cell(row, text, numeric) {
  const td = row.insertCell();
  td.textContent = text;
  if (numeric) td.className = "num";
  return td;
}

function fill(table, rows, columns, key) {
  const body = byId(table).tBodies[0];
  body.replaceChildren();
  for (const item of rows) {
    const row = body.insertRow();
    if (key) row.dataset[key.data] = item[key.field];
    for (const [value, numeric] of columns(item)) cell(row, value, numeric);
  }
  if (!rows.length) {
    const row = body.insertRow();
    const td = cell(row, "none");
    td.colSpan = byId(table).tHead.rows[0].cells.length;
  }
}

function seconds(s) {
  if (s === null || s === undefined) return "never";
  if (s < 90) return `${s.toFixed(0)} s`;
  if (s < 5400) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}

function now() {
  return Date.now() / 1000 + offset;
}

const POWER_MARK = { on: "● on", off: "○ off", "powering up": "◐ powering up",
  "powering down": "◑ powering down", unknown: "? unknown" };

function render(doc) {
  // when the page first drew the pool, for whoever measures the page (performance.now(), ms)
  if (window.ptcFirstRender === undefined) window.ptcFirstRender = performance.now();
  latest = doc;
  const nodes = doc.nodes;
  byId("sum-nodes").textContent = nodes.length;
  byId("sum-on").textContent = nodes.filter((n) => n.power === "on" || n.power === "powering up").length;
  byId("sum-reclaiming").textContent = doc.reclamations.length;
  byId("sum-wasted").textContent = doc.wasted_node_hours.toFixed(3);
  fill("partitions", doc.partitions, (p) => [
    [p.name], [String(p.nodes), true], [String(p.running_jobs), true],
    [`${p.pending_jobs} (${p.pending_nodes})`, true],
    [p.pv_age === null ? "never" : `${seconds(p.pv_age)} ago${p.pv_stale ? " (stale)" : ""}`],
    [p.policy || "–"], [p.protected ? "yes: resumes stopped" : "no"],
  ]);
  fill("sites", doc.sites, (s) => [
    [s.name], [String(s.nodes), true],
    [Object.entries(s.power).map(([k, v]) => `${v} ${k}`).join(", ")],
  ]);
  fill("nodes", nodes, (n) => [
    [n.name], [n.site], [n.holder], [POWER_MARK[n.power] || n.power],
    [n.scheduler_state || "not reported"], [n.jobs.join(", ") || "–"], [n.reclamation || "–"],
  ], { data: "node", field: "name" });
  for (const row of byId("nodes").tBodies[0].rows) {
    const node = nodes.find((n) => n.name === row.dataset.node);
    if (node) {
      row.dataset.power = node.power;
      row.dataset.state = node.scheduler_state || "";
    }
  }
  fill("reclamations", doc.reclamations, (r) => [
    [r.id], [r.partition], [r.beneficiary || "the pool"], [r.nodes.join(", ")],
    [r.jobs.join(", ") || "–"], [seconds(Math.max(0, r.deadline - now())), true],
  ], { data: "deadline", field: "deadline" });
  const events = byId("events");
  events.replaceChildren();
  for (const e of doc.events) {
    const li = document.createElement("li");
    const when = new Date(e.time * 1000).toISOString().slice(11, 19);
    li.textContent = `${when} UTC  #${e.seq} ${e.kind}${e.about ? ": " + e.about : ""}`;
    events.append(li);
  }
  drawOverhead(doc.overhead);
  drawHolders(nodes);
  byId("updated").textContent = new Date(doc.time * 1000).toISOString().slice(11, 19) + " UTC";
}

function bars(title, entries, unit) {
  const figure = document.createElement("figure");
  const caption = document.createElement("figcaption");
  caption.textContent = title;
  figure.append(caption);
  const ns = "http://www.w3.org/2000/svg";
  const height = 22 * entries.length + 4;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", "640");
  svg.setAttribute("height", String(height));
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", `${title}: ` + entries.map(([k, v]) => `${k} ${v.toFixed(1)} ${unit}`).join("; "));
  const top = Math.max(...entries.map(([, v]) => v), 1e-9);
  entries.forEach(([label, value], i) => {
    const y = 22 * i + 2;
    const rect = document.createElementNS(ns, "rect");
    rect.setAttribute("class", "bar");
    rect.setAttribute("x", "200");
    rect.setAttribute("y", String(y));
    rect.setAttribute("height", "16");
    rect.setAttribute("width", String(Math.max(1, (340 * value) / top)));
    const text = document.createElementNS(ns, "text");
    text.setAttribute("class", "bar-label");
    text.setAttribute("x", "0");
    text.setAttribute("y", String(y + 13));
    text.textContent = `${label}: ${value.toFixed(1)} ${unit}`;
    svg.append(rect, text);
  });
  figure.append(svg);
  return figure;
}

function drawOverhead(overhead) {
  const box = byId("overhead");
  box.replaceChildren();
  const parts = Object.entries(overhead);
  if (!parts.length) box.textContent = "No resume reported yet.";
  for (const [partition, steps] of parts) {
    const entries = Object.entries(steps).filter(([k]) => k !== "total");
    if ("total" in steps) entries.push(["total", steps.total]);
    box.append(bars(`Partition ${partition}`, entries, "s"));
  }
}

function drawHolders(nodes) {
  const count = {};
  for (const n of nodes) count[n.holder] = (count[n.holder] || 0) + 1;
  const box = byId("holders");
  box.replaceChildren(bars("Nodes by holder", Object.entries(count).sort(), "nodes"));
}

function announce(text) {
  byId("announce").textContent = text;
}

function tick() {
  if (!latest || paused) return;
  const body = byId("reclamations").tBodies[0];
  for (const row of body.rows) {
    if (row.dataset.deadline) {
      row.cells[row.cells.length - 1].textContent = seconds(Math.max(0, Number(row.dataset.deadline) - now()));
    }
  }
}

function connect() {
  const source = new EventSource("/v1/view/stream");
  source.addEventListener("manager", (e) => {
    const url = JSON.parse(e.data).url;
    if (manager && manager !== url) announce(`Reconnected: the active manager is now ${url}.`);
    manager = url;
    byId("manager").textContent = url;
  });
  source.addEventListener("view", (e) => {
    const doc = JSON.parse(e.data);
    offset = doc.time - Date.now() / 1000;
    byId("status").textContent = paused ? "Paused" : "Live";
    if (!paused) render(doc);
  });
  source.addEventListener("unavailable", (e) => {
    byId("status").textContent = `No manager answers: ${JSON.parse(e.data).message}; retrying…`;
  });
  source.onerror = () => {
    byId("status").textContent = "Disconnected; reconnecting…";
  };
}

document.addEventListener("DOMContentLoaded", () => {
  byId("pause").addEventListener("click", (e) => {
    paused = !paused;
    e.target.setAttribute("aria-pressed", String(paused));
    e.target.textContent = paused ? "Resume updates" : "Pause updates";
    byId("status").textContent = paused ? "Paused" : "Live";
  });
  setInterval(tick, 1000);
  connect();
});
