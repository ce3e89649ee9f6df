// Fleet dashboard: polls /api/services every second and renders each
// service's instances, and each server's load with the history the
// dashboard keeps, and each service's traffic policy; the form posts to
// /api/call, policy edits to /api/policy.
// No framework, no CDN: this file and style.css are embedded in the binary.
"use strict";

const $ = id => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

// td is a table cell with its column name, which narrow screens show
// beside the value.
function td(label, attrs, ...children) {
  return el("td", Object.assign({ "data-label": label }, attrs || {}), ...children);
}

// spark draws samples ({t, v}) over the last spanMs up to nowMs.
function spark(canvas, samples, nowMs, spanMs, color) {
  const ratio = window.devicePixelRatio || 1;
  const w = 180, h = 28;
  canvas.width = w * ratio;
  canvas.height = h * ratio;
  const ctx = canvas.getContext("2d");
  ctx.scale(ratio, ratio);
  ctx.fillStyle = "#eef1f6";
  ctx.fillRect(0, 0, w, h);
  const max = Math.max(1, ...samples.map(s => s.v));
  const bw = Math.max(1, w / (spanMs / 1000));
  ctx.fillStyle = color;
  for (const s of samples) {
    const x = w - ((nowMs - s.t) / spanMs) * w;
    if (x < -bw) continue;
    const bh = Math.max(s.v > 0 ? 1 : 0, (s.v / max) * (h - 2));
    ctx.fillRect(x - bw, h - bh, bw, bh);
  }
}

// fmtMs shows milliseconds with three significant digits.
function fmtMs(ms) {
  return ms >= 100 ? ms.toFixed(0) : ms.toPrecision(3);
}

const stateWords = {
  active: n => n.active + " of " + n.instances.length + " active",
  all_draining: () => "all instances draining",
  none: () => "no instance registered",
};

let lastData = null;

function renderServices(data) {
  const root = $("services");
  root.replaceChildren();
  for (const s of data.services) {
    const box = el("div", { class: "service " + s.state, "data-service": s.name, "data-state": s.state },
      el("h2", {}, s.name, " ", el("span", { class: "badge service-state " + s.state }, stateWords[s.state](s))));
    if (s.error) box.append(el("div", { class: "error" }, s.error));
    if (s.state === "all_draining") {
      box.append(el("div", { class: "muted draining-note" },
        "Every instance is disabled: calls to " + s.name + " fail with unavailable until one is enabled."));
    }
    const table = el("table", {},
      el("thead", {}, el("tr", {}, ...["address", "weight", "group", "version", "tags", "state", "steer"].map(h => el("th", {}, h)))));
    const body = el("tbody");
    for (const i of s.instances) {
      body.append(el("tr", { class: "instance " + i.state, "data-addr": i.addr },
        td("address", { class: "addr" }, i.addr),
        td("weight", { class: "num weight" }, i.weight),
        td("group", {}, i.group || ""),
        td("version", {}, i.version || ""),
        td("tags", {}, (i.tags || []).join(", ")),
        td("state", { class: "state" }, i.state),
        td("steer", { class: "steer" },
          el("button", { class: "weight-down", title: "weight - 1", "data-weight": Math.max(1, i.weight - 1) }, "\u2212"),
          el("button", { class: "weight-up", title: "weight + 1", "data-weight": i.weight + 1 }, "+"),
          el("button", { class: "toggle", "data-state": i.state === "draining" ? "active" : "draining" },
            i.state === "draining" ? "enable" : "disable"))));
    }
    table.append(body);
    box.append(el("div", { class: "scroll" }, table));
    root.append(box);
  }
}

function renderServers(data) {
  const now = new Date(data.time).getTime();
  // The charts span the samples kept (at least a minute, at most the
  // dashboard's window), so a young dashboard's history is not a sliver.
  const oldest = Math.min(now, ...data.servers.filter(s => s.history.length).map(s => s.history[0].t));
  const span = Math.min(data.history_seconds * 1000, Math.max(60000, now - oldest));
  $("history-span").textContent = span >= 120000 ? Math.round(span / 60000) + " minutes" : Math.round(span / 1000) + " s";
  const body = $("servers-body");
  body.replaceChildren();
  for (const s of data.servers) {
    const cps = el("canvas", { class: "spark cps-chart", "data-samples": s.history.length });
    spark(cps, s.history.map(p => ({ t: p.t, v: p.cps })), now, span, "#2f6fdf");
    const p99 = el("canvas", { class: "spark p99-chart", "data-samples": s.history.length });
    spark(p99, s.history.map(p => ({ t: p.t, v: p.p99 })), now, span, "#d9822b");
    body.append(el("tr", { class: "server", "data-addr": s.addr },
      td("server", { class: "addr" }, s.addr),
      td("services", { class: "services" }, s.services.join(", ")),
      td("in flight", { class: "num inflight" }, s.inflight),
      td("calls/s", { class: "num cps" }, s.calls_per_second.toFixed(1)),
      td("calls/s history", {}, cps),
      td("p99 ms", { class: "num p99", title: "99th percentile of the time the server took to handle the calls of its last load report" }, fmtMs(s.p99_ms || 0)),
      td("p99 history", {}, p99)));
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
  const st = $("steer-status");
  st.textContent = text;
  st.className = isError ? "error" : "muted";
}

// confirmDisable asks before the last active instance of a service is
// disabled; it resolves to true when the user confirms.
function confirmDisable(service, addr) {
  return confirmAction(addr + " is the last active instance of " + service +
    ". Disabling it leaves all instances draining: calls to " + service + " will fail until one is enabled. Disable it?", "Disable");
}

// confirmAction shows text in the confirmation dialog, whose OK button
// says ok; it resolves to true when the user confirms.
function confirmAction(text, ok) {
  const dlg = $("confirm");
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = ok;
  return new Promise(resolve => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
    dlg.returnValue = "";
    dlg.showModal();
  });
}

$("services").addEventListener("click", async ev => {
  const b = ev.target.closest("button");
  if (!b) return;
  const row = b.closest("tr.instance"), box = b.closest("[data-service]");
  if (!row || !box) return;
  const service = box.getAttribute("data-service"), addr = row.getAttribute("data-addr");
  if (b.classList.contains("toggle")) {
    const to = b.getAttribute("data-state");
    if (to === "draining") {
      const active = box.querySelectorAll("tr.instance:not(.draining)").length;
      if (active <= 1 && !(await confirmDisable(service, addr))) {
        showSteer(service + " " + addr + ": left active", false);
        return;
      }
    }
    steer(service, addr, { state: to });
  } else {
    steer(service, addr, { weight: parseInt(b.getAttribute("data-weight"), 10) });
  }
});

let polling = false; // a slow registry must not pile up requests
async function poll() {
  if (polling) return;
  polling = true;
  try {
    const r = await fetch("api/services", { cache: "no-store" });
    if (!r.ok) throw new Error(r.status + " " + (await r.text()));
    const data = await r.json();
    const before = lastData;
    lastData = data;
    $("registry").textContent = "registry " + data.registry;
    $("updated").textContent = "updated " + new Date(data.time).toLocaleTimeString();
    const pe = $("page-error");
    pe.hidden = !data.error;
    pe.textContent = data.error || "";
    renderServices(data);
    renderServers(data);
    renderPolicies(data);
    fillServices(data.services.map(s => s.name));
    recoverForm(before, data);
  } catch (e) {
    $("updated").textContent = "update failed: " + e.message;
  } finally {
    polling = false;
  }
}

function serviceState(data, name) {
  const s = data && data.services.find(s => s.name === name);
  return s ? s.state : "none";
}

// recoverForm reloads the form's methods when the chosen service can be
// called again (an instance came back, or was enabled) after it could
// not, or when its methods failed to load.
let methodsFailed = false;
function recoverForm(before, data) {
  const svc = $("call-service").value;
  if (!before || !svc) return;
  if (serviceState(data, svc) === "all_draining" && serviceState(before, svc) !== "all_draining") {
    showStatus(svc + ": all instances draining; calls fail until one is enabled", true);
  }
  if (serviceState(data, svc) !== "active") return;
  if (methodsFailed || serviceState(before, svc) !== "active") {
    loadMethods().then(ok => {
      if (ok && $("call-status").className === "error") showStatus(svc + " has an active instance again", false);
    });
  }
}

let knownServices = null;
function fillServices(names) {
  const key = names.join(",");
  if (key === knownServices) return;
  knownServices = key;
  const sel = $("call-service");
  const keep = sel.value;
  sel.replaceChildren(...names.map(n => el("option", { value: n }, n)));
  if (names.includes(keep)) {
    sel.value = keep;
    return;
  }
  loadMethods();
}

// loadMethods fills the method list of the chosen service, then the
// argument's template; it resolves to whether the methods loaded.
async function loadMethods() {
  const svc = $("call-service").value;
  const sel = $("call-method");
  if (!svc) {
    sel.replaceChildren();
    return false;
  }
  try {
    const r = await fetch("api/methods?service=" + encodeURIComponent(svc));
    const data = await r.json();
    if (!r.ok) throw new Error(data.text || data.message || r.status);
    if (svc !== $("call-service").value) return false; // changed meanwhile
    const keep = sel.value;
    const same = Array.from(sel.options).map(o => o.value).join(",") === data.methods.join(",");
    if (!same) sel.replaceChildren(...data.methods.map(m => el("option", { value: m }, m)));
    methodsFailed = false;
    if (!same || keep !== sel.value || $("call-types").textContent === "") loadTemplate();
    return true;
  } catch (e) {
    sel.replaceChildren();
    methodsFailed = true;
    showStatus("methods of " + svc + ": " + e.message, true);
    return false;
  }
}

// loadTemplate puts the chosen method's zero-value argument (as fleet
// describe prints it) in the argument box.
async function loadTemplate() {
  const full = $("call-service").value + "." + $("call-method").value;
  if (!$("call-method").value) return;
  try {
    const r = await fetch("api/describe?method=" + encodeURIComponent(full));
    const data = await r.json();
    if (!r.ok) throw new Error(data.text || data.message || r.status);
    if (full !== $("call-service").value + "." + $("call-method").value) return;
    $("call-args").value = JSON.stringify(data.template, null, 2);
    $("call-types").textContent = data.args + " \u2192 " + data.reply;
    $("call-types").setAttribute("data-method", full);
  } catch (e) {
    $("call-types").textContent = "";
    showStatus("template of " + full + ": " + e.message, true);
  }
}

function showStatus(text, isError) {
  const st = $("call-status");
  st.textContent = text;
  st.className = isError ? "error" : "muted";
}

async function call(ev) {
  ev.preventDefault();
  const svc = $("call-service").value;
  const method = $("call-method").value;
  const out = $("call-result");
  out.textContent = "";
  out.className = "";
  showStatus("calling " + svc + "." + method + "...", false);
  try {
    const r = await fetch("api/call", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({
        method: svc + "." + method,
        args: $("call-args").value,
        codec: $("call-codec").value,
        loose: $("call-loose").checked,
      }),
    });
    const res = await r.json();
    if (res.ok) {
      showStatus("ok from " + res.server + " (codec " + res.codec + ", " + res.elapsed_ms + " ms)", false);
      out.textContent = JSON.stringify(res.reply, null, 2);
    } else {
      // As fleet call reports it: its stderr line and exit status.
      const what = res.code ? res.code : "bad input, not sent";
      showStatus("exit status " + res.exit_status + " (" + what + ")", true);
      out.className = "error";
      out.textContent = res.text || res.message;
    }
  } catch (e) {
    showStatus("call failed: " + e.message, true);
  }
}

// Traffic policies: one box per service, rebuilt only when the document
// in force changes, so that weights and text being edited survive the
// polls; the watcher's status and the last edit's outcome are refreshed
// in place.
const policyNodes = new Map(); // service -> {key, node}
const policyMsgs = new Map();  // service -> {text, error}

function describeMatch(m) {
  const parts = [m && m.method ? "method " + m.method : "any method"];
  for (const h of (m && m.headers) || []) {
    let cond = h.present ? "present" : h.exact !== undefined ? "= " + JSON.stringify(h.exact)
      : h.prefix !== undefined ? "starts with " + JSON.stringify(h.prefix) : "matches /" + h.regex + "/";
    parts.push("header " + h.name + " " + (h.invert ? "not " : "") + cond);
  }
  if (m && m.percent !== undefined) parts.push(m.percent + "% of the calls");
  return parts.join("; ");
}

function describeSettings(r) {
  const parts = [];
  if (r.timeout) parts.push("timeout " + r.timeout);
  if (r.retry) {
    const rt = r.retry, b = rt.backoff || {}, bud = rt.budget;
    parts.push("retry " + rt.attempts + " attempts" + (rt.retryOn ? " on " + rt.retryOn.join(", ") : "") +
      (b.base || b.max ? ", backoff " + (b.base || "default") + "\u2013" + (b.max || "default") : "") +
      (bud ? ", budget " + bud.percent + "%" : ""));
  }
  if (r.hedge) parts.push("hedge " + r.hedge.attempts + " attempts every " + r.hedge.delay);
  if (r.fault && r.fault.delay) parts.push("fault: delay " + r.fault.delay.duration + " on " + r.fault.delay.percent + "%");
  if (r.fault && r.fault.abort) parts.push("fault: abort " + r.fault.abort.code + " on " + r.fault.abort.percent + "%");
  return parts.join("; ");
}

function describeSubset(s) {
  const sel = [];
  if (s.tags && s.tags.length) sel.push("tags " + s.tags.join(", "));
  if (s.version) sel.push("version " + s.version);
  if (s.group) sel.push("group " + s.group);
  return s.name + " (" + (sel.join("; ") || "every instance") + ")";
}

// policyTemplate is the text offered when a service has no policy.
function policyTemplate(service) {
  return JSON.stringify({ version: "1", service, subsets: [{ name: "v1", version: "v1" }],
    routes: [{ name: "split", destinations: [{ subset: "v1", weight: 100 }] }] }, null, 2);
}

function buildPolicy(service, p) {
  const doc = p.document;
  const box = el("div", { class: "policy", "data-policy-service": service, "data-version": p.version || "" },
    el("h3", {}, service, " ", el("span", { class: "badge policy-version" + (p.version ? "" : " none") }, p.version ? "version " + p.version : "no policy")),
    el("div", { class: "policy-status muted" }),
    el("div", { class: "policy-refusing error" }));
  if (p.error) box.append(el("div", { class: "error" }, "policy store: " + p.error));
  if (!doc) {
    box.append(el("div", { class: "muted no-policy" }, "No policy in force: the clients' code defaults apply."));
  } else {
    box.append(el("div", { class: "subsets" }, "subsets: " + ((doc.subsets || []).map(describeSubset).join(", ") || "none")));
    const routes = el("tbody");
    (doc.routes || []).forEach((r, i) => {
      const split = el("div", { class: "split" });
      for (const d of r.destinations || []) {
        split.append(el("label", {}, d.subset + " ",
          el("input", { type: "number", min: "0", max: "100", step: "1", value: String(d.weight), class: "weight-input", "data-subset": d.subset }), "%"));
      }
      if ((r.destinations || []).length) {
        split.append(el("button", { class: "split-apply", "data-route": String(i) }, "apply split"));
      } else {
        split.append(el("span", { class: "muted" }, "any instance"));
      }
      routes.append(el("tr", { class: "route", "data-route": String(i), "data-name": r.name || "" },
        td("route", {}, r.name || "#" + i),
        td("match", { class: "match" }, describeMatch(r.match)),
        td("split", { class: "split-cell" }, split),
        td("settings", { class: "settings" }, describeSettings(r))));
    });
    box.append(el("div", { class: "scroll" }, el("table", { class: "routes" },
      el("thead", {}, el("tr", {}, ...["route", "match", "destinations (weight %)", "timeout, retry, hedge, fault"].map(h => el("th", {}, h)))),
      routes)));
    if ((doc.routes || []).length === 0) box.append(el("div", { class: "muted" }, "No routes: every call keeps the clients' code defaults."));
    if ((doc.limits || []).length) {
      const body = el("tbody");
      for (const l of doc.limits) {
        body.append(el("tr", { class: "limit" },
          td("method", {}, l.method),
          td("rate/s", { class: "num" }, l.rate || "none"),
          td("burst", { class: "num" }, l.burst || ""),
          td("max concurrent", { class: "num" }, l.maxConcurrent || "none")));
      }
      box.append(el("div", { class: "scroll" }, el("table", { class: "limits" },
        el("thead", {}, el("tr", {}, ...["server limits: method", "rate/s", "burst", "max concurrent"].map(h => el("th", {}, h)))), body)));
    }
  }
  box.append(el("details", { class: "policy-text" },
    el("summary", {}, doc ? "edit the whole document" : "write a policy"),
    el("textarea", { class: "policy-doc", rows: "14", spellcheck: "false" }),
    el("button", { class: "policy-save" }, "check and save")));
  box.querySelector("textarea.policy-doc").value = doc ? JSON.stringify(doc, null, 2) : policyTemplate(service);
  box.append(el("div", { class: "policy-msg muted" }));
  return box;
}

function updatePolicyStatus(service, node, p) {
  // Applied counts removals too (a watcher starts by applying "none").
  node.querySelector(".policy-status").textContent = "watcher: " + p.applied + " applied, " + p.refused + " refused";
  node.querySelector(".policy-refusing").textContent = p.refusing ?
    "The newest stored document was refused (clients keep " + (p.version ? "version " + p.version : "no policy") + "): " + p.refusing : "";
  const m = policyMsgs.get(service), msg = node.querySelector(".policy-msg");
  msg.textContent = m ? m.text : "";
  msg.className = "policy-msg " + (m && m.error ? "error" : "muted");
}

function renderPolicies(data) {
  const section = $("policies");
  section.hidden = !data.policy_store;
  if (!data.policy_store) return;
  $("policy-store").textContent = "Each service's policy document (docs/policy.md) in the " + data.policy_store +
    ", as clients watching it apply it. Edit a route's split, or the whole document: it is checked before anything is written, and written with the next version.";
  const nodes = [];
  for (const s of data.services) {
    const p = s.policy;
    if (!p) continue;
    const key = JSON.stringify([p.version, p.document, p.error || ""]);
    let c = policyNodes.get(s.name);
    if (!c || c.key !== key) {
      c = { key, node: buildPolicy(s.name, p) };
      policyNodes.set(s.name, c);
    }
    updatePolicyStatus(s.name, c.node, p);
    nodes.push(c.node);
  }
  const body = $("policies-body");
  const same = body.children.length === nodes.length && nodes.every((n, i) => body.children[i] === n);
  if (!same) body.replaceChildren(...nodes);
}

function setPolicyMsg(service, text, error) {
  policyMsgs.set(service, { text, error });
  const c = policyNodes.get(service);
  if (c) {
    const msg = c.node.querySelector(".policy-msg");
    msg.textContent = text;
    msg.className = "policy-msg " + (error ? "error" : "muted");
  }
}

// editPolicy posts an edit to api/policy and reports its outcome under
// the service's policy.
async function editPolicy(service, edit) {
  try {
    const r = await fetch("api/policy", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(Object.assign({ service }, edit)),
    });
    const res = await r.json();
    if (!r.ok) {
      const problems = (res.problems || []).map(p => "\n  \u2022 " + p).join("");
      setPolicyMsg(service, "Not saved: " + (problems ? "invalid policy:" + problems : res.message || r.status), true);
      return;
    }
    setPolicyMsg(service, "Saved version " + res.version + (res.previous ? " (was " + res.previous + ")" : "") +
      " to the registry: clients watching it apply it now.", false);
    poll();
  } catch (e) {
    setPolicyMsg(service, "Not saved: " + e.message, true);
  }
}

$("policies-body").addEventListener("click", async ev => {
  const b = ev.target.closest("button");
  const box = b && b.closest("[data-policy-service]");
  if (!box) return;
  const service = box.getAttribute("data-policy-service"), base = box.getAttribute("data-version");
  if (b.classList.contains("split-apply")) {
    const row = b.closest("tr.route"), i = parseInt(row.getAttribute("data-route"), 10);
    const inputs = Array.from(row.querySelectorAll("input.weight-input"));
    const bad = inputs.find(x => !/^[0-9]+$/.test(x.value.trim()));
    if (bad) {
      setPolicyMsg(service, "Not saved: the weight of " + bad.getAttribute("data-subset") + " must be a whole number, got " + JSON.stringify(bad.value), true);
      return;
    }
    const destinations = inputs.map(x => ({ subset: x.getAttribute("data-subset"), weight: parseInt(x.value, 10) }));
    const was = inputs.map(x => x.getAttribute("value"));
    const change = destinations.map((d, k) => d.subset + " " + was[k] + "% \u2192 " + d.weight + "%").join(", ");
    const name = row.getAttribute("data-name") || "#" + i;
    if (!(await confirmAction("Change the split of route " + name + " of " + service + " (version " + base + "): " + change +
      "? Clients watching the registry apply it at once.", "Apply"))) {
      setPolicyMsg(service, "Split of route " + name + " left as it was.", false);
      return;
    }
    editPolicy(service, { base_version: base, route: i, destinations });
  } else if (b.classList.contains("policy-save")) {
    const text = box.querySelector("textarea.policy-doc").value;
    if (!(await confirmAction("Replace the policy of " + service + (base ? " (version " + base + ")" : "") +
      " with the document typed? It is checked first; clients watching the registry apply it at once.", "Save"))) {
      setPolicyMsg(service, "Document left as it was.", false);
      return;
    }
    editPolicy(service, { base_version: base, document: text });
  }
});

$("call-service").addEventListener("change", () => {
  $("call-types").textContent = "";
  loadMethods();
});
$("call-method").addEventListener("change", loadTemplate);
$("call-form").addEventListener("submit", call);
poll();
setInterval(poll, 1000);
