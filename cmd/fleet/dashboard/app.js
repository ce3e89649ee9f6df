// Fleet dashboard: polls /api/services every second and renders each
// service's instances with a calls/s chart; the form posts to /api/call.
// No framework, no CDN: this file and style.css are embedded in the binary.
"use strict";

const history = new Map(); // "service|addr" -> calls/s samples, newest last
const p99s = new Map(); // "service|addr" -> p99 samples (ms), newest last
const HISTORY = 60;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function spark(canvas, samples, color) {
  const w = canvas.width = 160, h = canvas.height = 28;
  const ctx = canvas.getContext("2d");
  ctx.clearRect(0, 0, w, h);
  ctx.fillStyle = "#eef1f6";
  ctx.fillRect(0, 0, w, h);
  const max = Math.max(1, ...samples);
  const bw = w / HISTORY;
  ctx.fillStyle = color || "#2f6fdf";
  samples.forEach((v, i) => {
    const bh = Math.max(v > 0 ? 1 : 0, (v / max) * (h - 2));
    const x = w - (samples.length - i) * bw;
    ctx.fillRect(x, h - bh, Math.max(1, bw - 0.5), bh);
  });
}

// fmtMs shows milliseconds with three significant digits.
function fmtMs(ms) {
  return ms >= 100 ? ms.toFixed(0) : ms.toPrecision(3);
}

function renderServices(data) {
  document.getElementById("registry").textContent = "registry " + data.registry;
  document.getElementById("updated").textContent = "updated " + new Date(data.time).toLocaleTimeString();
  const root = document.getElementById("services");
  root.replaceChildren();
  for (const s of data.services) {
    const box = el("div", { class: "service", "data-service": s.name },
      el("h2", {}, s.name, " ", el("span", { class: "muted count" }, s.instances.length + " instance(s)")));
    if (s.error) box.append(el("div", { class: "error" }, s.error));
    const table = el("table", {},
      el("thead", {}, el("tr", {}, ...["address", "weight", "group", "version", "tags", "state", "in flight", "calls/s", "last 60 s", "p99 ms", "p99, last 60 s", "steer"].map(h => el("th", {}, h)))));
    const body = el("tbody");
    for (const i of s.instances) {
      const key = s.name + "|" + i.addr;
      const h = history.get(key) || [];
      h.push(i.calls_per_second);
      while (h.length > HISTORY) h.shift();
      history.set(key, h);
      const canvas = el("canvas", { class: "spark cps-chart" });
      spark(canvas, h);
      const p = p99s.get(key) || [];
      p.push(i.p99_ms || 0);
      while (p.length > HISTORY) p.shift();
      p99s.set(key, p);
      const pcanvas = el("canvas", { class: "spark p99-chart" });
      spark(pcanvas, p, "#d9822b");
      body.append(el("tr", { class: "instance " + i.state, "data-addr": i.addr },
        el("td", { class: "addr" }, i.addr),
        el("td", { class: "num weight" }, i.weight),
        el("td", {}, i.group || ""),
        el("td", {}, i.version || ""),
        el("td", {}, (i.tags || []).join(", ")),
        el("td", { class: "state" }, i.state),
        el("td", { class: "num inflight" }, i.inflight),
        el("td", { class: "num cps" }, i.calls_per_second.toFixed(1)),
        el("td", {}, canvas),
        el("td", { class: "num p99", title: "99th percentile of the time the server took to handle the calls of its last load report" }, fmtMs(i.p99_ms || 0)),
        el("td", {}, pcanvas),
        el("td", { class: "steer" },
          el("button", { class: "weight-down", title: "weight - 1", "data-weight": Math.max(1, i.weight - 1) }, "\u2212"),
          el("button", { class: "weight-up", title: "weight + 1", "data-weight": i.weight + 1 }, "+"),
          el("button", { class: "toggle", "data-state": i.state === "draining" ? "active" : "draining" },
            i.state === "draining" ? "enable" : "disable"))));
    }
    table.append(body);
    box.append(table);
    root.append(box);
  }
}

// steer asks the instance (through the dashboard and the server's
// fleet.Admin) to change its weight or state in the registry.
async function steer(service, addr, change) {
  try {
    const r = await fetch("api/steer", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(Object.assign({ service, addr }, change)),
    });
    const res = await r.json();
    if (!r.ok) throw new Error(res.message || r.status);
    showSteer(service + " " + addr + ": " + JSON.stringify(change) + " written to the registry", false);
    poll();
  } catch (e) {
    showSteer(service + " " + addr + ": " + e.message, true);
  }
}

function showSteer(text, isError) {
  const st = document.getElementById("steer-status");
  st.textContent = text;
  st.className = isError ? "error" : "muted";
}

document.getElementById("services").addEventListener("click", ev => {
  const b = ev.target.closest("button");
  if (!b) return;
  const row = b.closest("tr.instance"), box = b.closest("[data-service]");
  const service = box.getAttribute("data-service"), addr = row.getAttribute("data-addr");
  if (b.classList.contains("toggle")) steer(service, addr, { state: b.getAttribute("data-state") });
  else steer(service, addr, { weight: parseInt(b.getAttribute("data-weight"), 10) });
});

let polling = false; // a slow registry must not pile up requests
async function poll() {
  if (polling) return;
  polling = true;
  try {
    const r = await fetch("api/services", { cache: "no-store" });
    if (!r.ok) throw new Error(r.status + " " + (await r.text()));
    const data = await r.json();
    renderServices(data);
    fillServices(data.services.map(s => s.name));
  } catch (e) {
    document.getElementById("updated").textContent = "update failed: " + e.message;
  } finally {
    polling = false;
  }
}

let knownServices = "";
function fillServices(names) {
  const key = names.join(",");
  if (key === knownServices) return;
  knownServices = key;
  const sel = document.getElementById("call-service");
  sel.replaceChildren(...names.map(n => el("option", { value: n }, n)));
  loadMethods();
}

async function loadMethods() {
  const svc = document.getElementById("call-service").value;
  const sel = document.getElementById("call-method");
  try {
    const r = await fetch("api/methods?service=" + encodeURIComponent(svc));
    const data = await r.json();
    if (!r.ok) throw new Error(data.message || r.status);
    sel.replaceChildren(...data.methods.map(m => el("option", { value: m }, m)));
  } catch (e) {
    sel.replaceChildren();
    showStatus("methods of " + svc + ": " + e.message, true);
  }
}

function showStatus(text, isError) {
  const st = document.getElementById("call-status");
  st.textContent = text;
  st.className = isError ? "error" : "muted";
}

async function call(ev) {
  ev.preventDefault();
  const svc = document.getElementById("call-service").value;
  const method = document.getElementById("call-method").value;
  const out = document.getElementById("call-result");
  out.textContent = "";
  out.className = "";
  showStatus("calling " + svc + "." + method + "...", false);
  try {
    const r = await fetch("api/call", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        method: svc + "." + method,
        args: document.getElementById("call-args").value,
        codec: document.getElementById("call-codec").value,
      }),
    });
    const res = await r.json();
    if (res.ok) {
      showStatus("ok from " + res.server + " (codec " + res.codec + ", " + res.elapsed_ms + " ms)", false);
      out.textContent = JSON.stringify(res.reply, null, 2);
    } else {
      showStatus(res.code + " (exit status " + res.exit_status + ")", true);
      out.className = "error";
      out.textContent = res.message;
    }
  } catch (e) {
    showStatus("call failed: " + e.message, true);
  }
}

document.getElementById("call-service").addEventListener("change", loadMethods);
document.getElementById("call-form").addEventListener("submit", call);
poll();
setInterval(poll, 1000);
