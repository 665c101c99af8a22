// BASE is the path the pages are served under: "/" at the driver, a
// proxy's prefix (YARN's /proxy/APP_ID/) behind one.
const BASE = new URL("..", document.currentScript.src).pathname;

// Spindle's job pages: a job list (history), a job page with its ranks
// table and charts, and a rank's log. Everything comes from /api/...; the
// pages poll while a job runs.
"use strict";

const app = document.getElementById("app");
const where = document.getElementById("where");
let timer = null;

// show replaces the page's content, skipping absent (null) parts.
function show(...parts) { app.replaceChildren(...parts.filter(p => p !== null && p !== undefined)); }

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
  }
  for (const k of kids) if (k !== null && k !== undefined) e.append(k instanceof Node ? k : String(k));
  return e;
}

async function getJSON(url) {
  const r = await fetch(url, {cache: "no-store"});
  if (!r.ok) throw new Error(url + ": " + r.status + " " + (await r.text()).trim());
  return r.json();
}

const fmt = {
  n(v) { return v >= 1e9 ? (v / 1e9).toFixed(2) + "G" : v >= 1e6 ? (v / 1e6).toFixed(2) + "M" : v >= 1e4 ? (v / 1e3).toFixed(1) + "k" : Math.abs(v) < 100 && !Number.isInteger(v) ? Number(v.toPrecision(3)).toString() : Math.round(v).toString(); },
  bytes(v) { return v >= 1 << 30 ? (v / (1 << 30)).toFixed(2) + " GiB" : v >= 1 << 20 ? (v / (1 << 20)).toFixed(1) + " MiB" : v >= 1024 ? (v / 1024).toFixed(0) + " KiB" : v + " B"; },
  dur(s) { s = Math.round(s); const h = Math.floor(s / 3600), m = Math.floor(s % 3600 / 60); return h ? h + "h" + String(m).padStart(2, "0") + "m" : m ? m + "m" + String(s % 60).padStart(2, "0") + "s" : s + "s"; },
  time(t) { return t && !t.startsWith("0001") ? new Date(t).toLocaleString() : ""; },
  ago(t) { if (!t || t.startsWith("0001")) return ""; const s = (Date.now() - new Date(t)) / 1000; return s < 1 ? "now" : fmt.dur(s) + " ago"; },
};

// chart draws points as lines: one per rank for values the ranks reported
// (points with a rank), one for the rest. Its caption quotes the lowest
// rank's last value.
function chart(title, points, unit) {
  const W = 360, H = 120, P = 4;
  const box = el("div", {class: "chart"}, el("div", {class: "muted"}, title));
  if (!points || points.length < 2) { box.append(el("div", {class: "muted"}, "no data yet")); return box; }
  const xs = points.map(p => p.t), ys = points.map(p => p.v);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(0, ...ys), y1 = Math.max(...ys) || 1;
  const sx = t => P + (W - 2 * P) * (t - x0) / ((x1 - x0) || 1), sy = v => H - P - (H - 2 * P) * (v - y0) / ((y1 - y0) || 1);
  const lines = new Map();
  for (const p of points) {
    const r = p.rank ?? -1;
    if (!lines.has(r)) lines.set(r, []);
    lines.get(r).push(p);
  }
  const ranks = [...lines.keys()].sort((a, b) => a - b);
  const colors = ["#1f5fbf", "#d9822b", "#2b9d5c", "#b03a8c", "#6b6b6b", "#c23b22", "#3aa3b0", "#8a6d1f"];
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", W); svg.setAttribute("height", H);
  ranks.forEach((r, i) => {
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("points", lines.get(r).map(p => sx(p.t).toFixed(1) + "," + sy(p.v).toFixed(1)).join(" "));
    line.setAttribute("fill", "none"); line.setAttribute("stroke", colors[i % colors.length]); line.setAttribute("stroke-width", "1.5");
    if (r >= 0) line.setAttribute("data-rank", r);
    svg.append(line);
  });
  const first = lines.get(ranks[0]), last = first[first.length - 1].v;
  const who = ranks[0] >= 0 ? (ranks.length > 1 ? " (rank " + ranks[0] + ", " + ranks.length + " ranks)" : " (rank " + ranks[0] + ")") : "";
  box.append(svg, el("div", {class: "muted"}, "last " + fmt.n(last) + (unit || "") + ", max " + fmt.n(y1) + (unit || "") + who));
  return box;
}

async function showList() {
  where.textContent = "jobs";
  const q = new URLSearchParams(location.search);
  const search = el("input", {id: "search", placeholder: "name or id", value: q.get("q") || ""});
  const state = el("select", {id: "state"}, ...["", "RUNNING", "SUCCEEDED", "FAILED", "KILLED", "UNKNOWN"].map(s => {
    const o = el("option", {value: s}, s || "any state"); if (s === (q.get("state") || "")) o.selected = true; return o;
  }));
  const body = el("tbody", {id: "jobs"});
  const reload = async () => {
    const p = new URLSearchParams(); if (search.value) p.set("q", search.value); if (state.value) p.set("state", state.value);
    history.replaceState(null, "", BASE + (p.toString() ? "?" + p : ""));
    const jobs = await getJSON(BASE + "api/jobs?" + p);
    body.replaceChildren(...jobs.map(j => el("tr", {"data-job": j.id},
      el("td", {}, el("a", {href: BASE + "jobs/" + encodeURIComponent(j.id)}, j.id)), el("td", {}, j.name), el("td", {}, j.user),
      el("td", {class: "state " + j.state}, j.state), el("td", {}, fmt.time(j.start)), el("td", {class: "num"}, fmt.dur(j.duration_seconds)), el("td", {}, j.mode))));
    if (!jobs.length) body.append(el("tr", {}, el("td", {colspan: 7, class: "muted"}, "no jobs")));
  };
  search.addEventListener("input", reload); state.addEventListener("change", reload);
  show(el("h1", {}, "Jobs"), el("div", {class: "controls"}, "Search", search, state),
    el("table", {}, el("thead", {}, el("tr", {}, ...["Job", "Name", "User", "State", "Started", "Duration", "Mode"].map(h => el("th", {}, h)))), body));
  await reload();
  timer = setInterval(reload, 5000);
}

// RANKS_PAGE is how many rows of the ranks table a job page shows at once
// (the server's jobview.RanksPageSize): a job of thousands of ranks is read
// a page at a time, its ranks counted by state above the table.
const RANKS_PAGE = 100;

// rankPager says which ranks the table shows, how many there are in each
// state, and moves between pages of a large job.
function rankPager(j, move) {
  const total = j.rank_count || 0, from = j.rank_offset || 0, shown = (j.ranks || []).length;
  const states = Object.entries(j.rank_states || {}).sort().map(([s, n]) => n + " " + s).join(", ");
  const box = el("div", {class: "controls", id: "rank-pager"},
    el("span", {id: "rank-states"}, total + " ranks" + (states ? ": " + states : "")));
  if (total > shown) {
    box.append(el("span", {id: "rank-page"}, "; showing " + (from + 1) + "–" + (from + shown)),
      el("button", {id: "ranks-prev", onclick: () => move(-RANKS_PAGE)}, "previous"),
      el("button", {id: "ranks-next", onclick: () => move(RANKS_PAGE)}, "next"));
    box.querySelector("#ranks-prev").disabled = from === 0;
    box.querySelector("#ranks-next").disabled = from + shown >= total;
  }
  return box;
}

async function showJob(id) {
  let offset = 0;
  const render = async () => {
    const j = await getJSON(BASE + "api/jobs/" + encodeURIComponent(id) + "?limit=" + RANKS_PAGE + "&offset=" + offset);
    where.textContent = j.name || j.id;
    const head = el("dl", {id: "summary"},
      el("dt", {}, "job"), el("dd", {}, j.id), el("dt", {}, "user"), el("dd", {}, j.user), el("dt", {}, "mode"), el("dd", {}, j.mode),
      el("dt", {}, "state"), el("dd", {class: "state " + j.state, id: "job-state"}, j.state + (j.generation ? " (generation " + j.generation + ")" : "")),
      el("dt", {}, "started"), el("dd", {}, fmt.time(j.start)), el("dt", {}, "duration"), el("dd", {}, fmt.dur(j.duration_seconds)),
      el("dt", {}, "command"), el("dd", {}, (j.command || []).join(" ")),
      ...(j.push ? [el("dt", {}, "pushed input"), el("dd", {id: "push"}, "producers DoPut to " + j.push.endpoint +
        (j.push.token_file ? ", token in " + j.push.token_file : "") + (j.push.ca_file ? ", CA certificate in " + j.push.ca_file : ""))] : []),
      el("dt", {}, "rows"), el("dd", {id: "rows-total"}, fmt.n(j.totals.rows) + " (" + fmt.n(j.totals.rows_per_second) + " rows/s)"));
    const rows = (j.ranks || []).map(r => el("tr", {class: "rank" + (j.slowest_rank === r.rank ? " slow" : ""), "data-rank": r.rank},
      el("td", {class: "num"}, el("a", {href: BASE + "jobs/" + encodeURIComponent(j.id) + "/ranks/" + r.rank}, r.rank),
        (r.former_ranks || []).length ? el("span", {class: "muted was"}, " (was " + r.former_ranks.join(", ") + ")") : null),
      el("td", {}, r.role + (r.role_rank || r.role !== "worker" ? " " + r.role_rank : "")), el("td", {}, r.host),
      el("td", {class: "state " + r.state}, r.state), el("td", {class: "num"}, r.restarts), el("td", {class: "num"}, r.epoch),
      el("td", {class: "num"}, fmt.n(r.rows)), el("td", {class: "num"}, fmt.n(r.rows_per_second)),
      el("td", {class: "num"}, fmt.bytes(Math.round(r.bytes_per_second)) + "/s"), el("td", {class: "num"}, r.steps_per_second ? r.steps_per_second.toFixed(1) : ""),
      el("td", {class: "num"}, r.cpu_percent ? r.cpu_percent.toFixed(0) + "%" : ""), el("td", {class: "num"}, r.memory_bytes ? fmt.bytes(r.memory_bytes) : ""),
      el("td", {class: "num gpu", title: r.gpus ? r.gpus + " GPU" + (r.gpus > 1 ? "s: mean use, memory in use" : ": use, memory in use") : ""},
        r.gpus ? Math.round(100 * (r.gpu_util_ratio || 0)) + "% · " + fmt.bytes(r.gpu_memory_bytes || 0) : ""),
      el("td", {}, fmt.ago(r.last_heartbeat)), el("td", {class: "muted"}, r.message || "")));
    const charts = el("div", {class: "charts"}, chart("throughput (rows/s)", j.throughput));
    for (const [name, pts] of Object.entries(j.scalars || {}).sort()) charts.append(chart(name, pts));
    const settings = Object.entries(j.settings || {}).sort();
    const models = (j.models || []).map(m => el("tr", {class: "model"},
      el("td", {}, el("code", {title: "spindle model show " + m.uri}, m.name + "/" + m.version)),
      el("td", {class: "num"}, m.rank), el("td", {}, fmt.time(m.time)), el("td", {}, el("code", {}, m.uri))));
    show(el("h1", {}, j.name || j.id), head,
      j.reason ? el("div", {class: "reason", id: "reason"}, j.reason) : null,
      (j.slow_links || []).length ? el("div", {id: "slow-links"}, el("h2", {}, "Slow links"),
        el("ul", {}, ...j.slow_links.map(l => el("li", {}, "rank " + l.rank + " \u2194 rank " + l.peer + ": " +
          Math.round(l.round_trip_ms) + " ms probe round trip, reported at " + fmt.dur(l.t))))) : null,
      el("h2", {}, "Ranks"),
      rankPager(j, async step => { offset = Math.max(0, offset + step); await render(); }),
      el("table", {id: "ranks"}, el("thead", {}, el("tr", {}, ...["Rank", "Role", "Host", "State", "Restarts", "Epoch", "Rows", "Rows/s", "Feed", "Steps/s", "CPU", "Memory", "GPU", "Heartbeat", ""].map(h => el("th", {}, h)))),
        el("tbody", {}, ...rows)),
      (j.left_ranks || []).length ? el("p", {id: "left-ranks", class: "muted"}, "Went on without: " + j.left_ranks.map(r =>
        "rank " + r.rank + " (" + [r.host, r.executor].filter(x => x).join(", ") + ", " + fmt.n(r.rows) + " rows)").join("; ")) : null,
      (j.changes || []).length ? el("div", {id: "timeline"}, el("h2", {}, "Timeline"),
        el("ul", {}, ...j.changes.map(c => el("li", {class: "change " + c.kind}, fmt.dur(c.t) + ": " + c.message)))) : null,
      el("h2", {}, "Charts"), charts,
      models.length ? el("h2", {}, "Models") : null,
      models.length ? el("table", {id: "models"}, el("thead", {}, el("tr", {}, ...["Model", "Rank", "Saved", "Where"].map(h => el("th", {}, h)))),
        el("tbody", {}, ...models)) : null,
      settings.length ? el("details", {}, el("summary", {}, "Settings (" + settings.length + ")"),
        el("table", {}, el("tbody", {}, ...settings.map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", {}, v)))))) : null);
    return ["SUCCEEDED", "FAILED", "KILLED"].includes(j.state);
  };
  const done = await render();
  if (!done) timer = setInterval(async () => { if (await render()) clearInterval(timer); }, 1000);
}

async function showLog(id, rank) {
  where.textContent = id + " rank " + rank;
  let stream = new URLSearchParams(location.search).get("stream") || "stderr", next = 0;
  const pre = el("pre", {class: "log", id: "log"});
  const follow = el("input", {type: "checkbox", id: "follow", checked: ""});
  const pick = el("select", {id: "stream"}, ...["stderr", "stdout"].map(s => { const o = el("option", {value: s}, s); if (s === stream) o.selected = true; return o; }));
  const download = el("a", {id: "download"}, "download");
  const load = async (reset) => {
    if (reset) { next = 0; pre.textContent = ""; }
    download.href = BASE + "api/jobs/" + encodeURIComponent(id) + "/ranks/" + rank + "/log/download?stream=" + stream;
    const c = await getJSON(BASE + "api/jobs/" + encodeURIComponent(id) + "/ranks/" + rank + "/log?stream=" + stream + "&from=" + next);
    if (c.truncated && !pre.textContent) pre.append("[earlier lines dropped]\n");
    if (c.lines.length) { pre.append(c.lines.join("\n") + "\n"); if (follow.checked) pre.scrollTop = pre.scrollHeight; }
    next = c.next;
  };
  pick.addEventListener("change", () => { stream = pick.value; load(true); });
  show(el("h1", {}, el("a", {href: BASE + "jobs/" + encodeURIComponent(id)}, id), " · rank " + rank),
    el("div", {class: "controls"}, pick, el("label", {}, follow, " follow"), download), pre);
  await load(true);
  timer = setInterval(() => { if (follow.checked) load(false); }, 1000);
}

async function route() {
  clearInterval(timer);
  const parts = location.pathname.slice(BASE.length).split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "jobs" && parts[2] === "ranks") return await showLog(parts[1], parts[3]);
    if (parts[0] === "jobs") return await showJob(parts[1]);
    const info = await getJSON(BASE + "api/info");
    if (info.live && info.job) { history.replaceState(null, "", BASE + "jobs/" + encodeURIComponent(info.job)); return await showJob(info.job); }
    return await showList();
  } catch (e) {
    show(el("p", {class: "reason", id: "error"}, String(e.message || e)));
  }
}

route();
