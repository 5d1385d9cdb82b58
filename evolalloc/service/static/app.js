// The evolalloc service page: jobs with live progress, a job's charts, the profile registry.
// Plain JavaScript (no build step); charts by uPlot. Everything is read from the JSON API.
"use strict";

const POLL_MS = 2000;
const view = document.getElementById("view");
let timer = null;
let charts = [];

// A service started with --read-token-file answers reads only with a token. The page asks for it
// (the form in the header, shown on the first 401 or when /health says one is needed) and keeps it
// in sessionStorage: this tab only, gone when it closes, never in a URL or a cookie.
const TOKEN_KEY = "evolalloc-read-token";
const tokenForm = document.getElementById("token-form");

function authorized(headers = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { ...headers, Authorization: `Bearer ${token}` } : headers;
}

async function api(path) {
  const response = await fetch(path, { headers: authorized({ Accept: "application/json" }) });
  const body = await response.json();
  if (response.status === 401) tokenForm.hidden = false;
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

tokenForm.addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("token");
  if (input.value.trim()) sessionStorage.setItem(TOKEN_KEY, input.value.trim());
  else sessionStorage.removeItem(TOKEN_KEY);
  input.value = "";
  refresh();
});

fetch("/health").then((r) => r.json()).then((health) => { if (health.read_token_required) tokenForm.hidden = false; })
  .catch(() => {});

// A download link is a plain navigation, which cannot carry the token: with one stored, fetch the
// file with it and hand the browser the bytes under the name the service chose.
document.addEventListener("click", async (event) => {
  const link = event.target.closest("a[href*='download=true']");
  if (!link || !sessionStorage.getItem(TOKEN_KEY)) return;
  event.preventDefault();
  const response = await fetch(link.href, { headers: authorized() });
  if (!response.ok) { setStatus(`error: download ${response.status}`); return; }
  const name = /filename="?([^";]+)"?/.exec(response.headers.get("Content-Disposition") || "");
  const save = document.createElement("a");
  save.href = URL.createObjectURL(await response.blob());
  save.download = name ? name[1] : "profile.json";
  document.body.appendChild(save);
  save.click();
  save.remove();
  setTimeout(() => URL.revokeObjectURL(save.href), 10000);
});

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
const num = (v, digits = 4) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
const badge = (status) => `<span class="badge ${esc(status)}">${esc(status)}</span>`;
function progressBar(job) {
  const planned = job.evaluations_planned;
  const pct = planned ? Math.min(100, (100 * job.evaluations_done) / planned) : 0;
  return `<span class="bar" title="${pct.toFixed(0)}%"><span style="width:${pct}%"></span></span>
          ${job.evaluations_done}/${planned ?? "?"}`;
}
const seconds = (s) => (s === null || s === undefined ? "–" : s < 120 ? `${s.toFixed(0)} s` : `${(s / 60).toFixed(1)} min`);

// "prefilling 3/20 · 12 s": the phase a job is in, its progress within it, and how long it has been there
// (a person can tell a slow phase from a hung one).
function phaseText(job) {
  if (!job.phase) return "";
  const counted = job.phase_total ? ` ${job.phase_done ?? 0}/${job.phase_total}` : "";
  const since = job.phase_since && job.status === "running" ? ` · ${seconds((Date.now() - Date.parse(job.phase_since)) / 1000)}` : "";
  return `${job.phase}${counted}${since}`;
}
const estimate = (job) => (job.estimated_seconds === null || job.estimated_seconds === undefined ? "–" : `~${seconds(job.estimated_seconds)} (estimate)`);

// The operator's limits and the queue: why a submission may be refused (422 over a limit, 429 queue full).
function limitsCard(info) {
  const l = info.limits;
  const q = info.queue;
  const full = q.full ? `<p class="error">The queue is full (${q.queued} of ${q.max_queued} waiting): new jobs are refused
    with 429 and Retry-After until one starts or is cancelled.</p>` : "";
  return `<div class="card" id="limits"><h3>Limits</h3>${full}<dl class="facts">
    <dt>queue</dt><dd>${q.queued} of ${q.max_queued} waiting (${l.max_queued_per_token} per token) · ${info.max_jobs} run at once</dd>
    <dt>per job</dt><dd>${l.max_evaluations} evaluations · ${l.max_instances} instances per split · ${l.max_draws} draws ·
      ${l.max_budgets} budgets · ${l.max_workers} workers ·
      ${l.max_traces} training traces · ${l.max_train_steps} training steps · ${l.max_job_hours} h wall time per run</dd>
    <dt>estimates</dt><dd class="muted">answers decoded × ${l.seconds_per_answer} s per answer (the operator's rate): rough</dd>
  </dl></div>`;
}

function setStatus(text) { document.getElementById("status").textContent = text; }

// -- the home page: jobs and profiles ----------------------------------------------------------

async function renderHome() {
  const [jobs, profiles, limits] = await Promise.all([api("/jobs"), api("/profiles"), api("/limits")]);
  const jobRows = jobs.jobs.map((j) => `
    <tr data-job="${j.id}">
      <td class="num">${j.id}</td>
      <td><a href="#/jobs/${j.id}">${esc(j.name)}</a></td>
      <td>${badge(j.status)} <span class="muted">${esc(phaseText(j))}</span></td>
      <td>${progressBar(j)}</td>
      <td class="num">${num(j.best_fitness)}</td>
      <td>${esc(j.task)}</td>
      <td class="num">${seconds(j.seconds)}</td>
      <td class="error">${esc(j.error)}</td>
    </tr>`).join("");
  const profileRows = profiles.profiles.map((p) => `
    <tr>
      <td class="num">${p.id}</td>
      <td class="num">${p.target}</td>
      <td>${esc(p.granularity)}</td>
      <td>${esc(p.scorer)}</td>
      <td>${esc(p.task)}</td>
      <td class="num">${num(p.fitness)}</td>
      <td>${p.job_id ? `<a href="#/jobs/${p.job_id}">job ${p.job_id}</a>` : esc(p.source)}</td>
      <td><a href="/profiles/${p.id}?download=true">json</a> · <a href="/profiles/${p.id}?format=kvpress&download=true">kvpress</a></td>
      <td class="muted" title="${esc(p.model)}">${esc(p.model.split("/").pop())}</td>
    </tr>`).join("");
  view.innerHTML = `
    ${limitsCard(limits)}
    <h2>Jobs</h2>
    <table id="jobs"><thead><tr><th class="num">id</th><th>name</th><th>status</th><th>evaluations</th>
      <th class="num">best fitness</th><th>task</th><th class="num">time</th><th>error</th></tr></thead>
      <tbody>${jobRows || `<tr><td colspan="8" class="muted">No jobs yet: <code>evolalloc submit RECIPE</code></td></tr>`}</tbody></table>
    <h2>Profiles</h2>
    <table id="profiles"><thead><tr><th class="num">id</th><th class="num">c</th><th>granularity</th><th>scorer</th>
      <th>task</th><th class="num">fitness</th><th>from</th><th>download</th><th>model</th></tr></thead>
      <tbody>${profileRows || `<tr><td colspan="9" class="muted">No profiles yet.</td></tr>`}</tbody></table>`;
}

// -- a job's page ------------------------------------------------------------------------------

function fitnessChart(el, evaluations) {
  const xs = evaluations.map((_, i) => i + 1);
  const each = evaluations.map((e) => e.fitness);
  const best = evaluations.map((e) => e.best_fitness);
  return new uPlot({
    width: el.clientWidth || 520, height: 260,
    scales: { x: { time: false } },
    legend: { live: false },
    axes: [{ label: "evaluation" }, { label: "fitness" }],
    series: [{ label: "evaluation" },
      { label: "candidate", stroke: "#94a3b8", width: 0, points: { show: true, size: 5, fill: "#94a3b8" } },
      { label: "best so far", stroke: "#2563eb", width: 2 }],
  }, [xs, each, best], el);
}

function budgetsChart(el, budgets) {
  const layers = budgets.map((_, i) => i);
  const mean = budgets.map((row) => row.reduce((a, b) => a + b, 0) / row.length);
  return new uPlot({
    width: el.clientWidth || 520, height: 260,
    scales: { x: { time: false, range: [-0.5, budgets.length - 0.5] }, y: { range: (u, min, max) => [0, max * 1.05] } },
    legend: { live: false },
    axes: [{ label: "layer" }, { label: "tokens kept" }],
    series: [{ label: "layer" },
      { label: "budget", stroke: "#0f766e", fill: "rgba(15,118,110,0.35)", paths: uPlot.paths.bars({ size: [0.7, 60] }), points: { show: false } }],
  }, [layers, mean], el);
}

function comparisonTable(comparison) {
  if (!comparison) return `<p class="muted">The held-out comparison appears when the search has finished.</p>`;
  const rows = comparison.rows.map((r) => `
    <tr><td class="num">${r.budget}</td><td>${esc(r.method)}</td><td class="num">${num(r.score.mean, 3)}</td>
      <td class="num">[${num(r.score.low, 3)}, ${num(r.score.high, 3)}]</td><td class="num">${r.score.n}</td>
      <td class="num">${r.versus ? num(r.versus.diff, 3) : "–"}</td><td class="num">${r.versus ? num(r.versus.p_value, 3) : "–"}</td></tr>`).join("");
  return `<table id="comparison"><thead><tr><th class="num">c</th><th>method</th><th class="num">mean score</th>
    <th class="num">95% CI</th><th class="num">n</th><th class="num">evolved − method</th><th class="num">p</th></tr></thead>
    <tbody>${rows}</tbody></table>`;
}

async function renderJob(id) {
  const [job, evals] = await Promise.all([api(`/jobs/${id}`), api(`/jobs/${id}/evaluations`)]);
  charts.forEach((c) => c.destroy());
  charts = [];
  view.innerHTML = `
    <p><a href="#/">← all jobs</a></p>
    <h2>Job ${job.id}: ${esc(job.name)} ${badge(job.status)}</h2>
    <div class="card"><dl class="facts">
      <dt>phase</dt><dd id="phase">${esc(phaseText(job)) || "–"}</dd>
      <dt>evaluations</dt><dd>${progressBar(job)}</dd>
      <dt>duration</dt><dd>${estimate(job)}</dd>
      <dt>best fitness</dt><dd>${num(job.best_fitness)}</dd>
      <dt>model / task</dt><dd>${esc(job.model)} / ${esc(job.task)} (engine ${esc(job.engine)})</dd>
      <dt>time</dt><dd>${seconds(job.seconds)}${job.attempts > 1 ? ` · resumed ${job.attempts - 1}×` : ""}</dd>
      ${job.error ? `<dt>error</dt><dd class="error">${esc(job.error)}</dd>` : ""}
      ${job.profiles.length ? `<dt>profiles</dt><dd>${job.profiles.map((p) => `<a href="/profiles/${p}?download=true">#${p}</a>`).join(" ")}</dd>` : ""}
    </dl></div>
    <div class="charts">
      <div class="card"><h3>Fitness over evaluations</h3><div id="fitness-chart"></div></div>
      <div class="card"><h3 id="budgets-title">Budgets per layer (best so far)</h3><div id="budgets-chart"></div></div>
    </div>
    <h2>Held-out comparison</h2>
    ${comparisonTable(evals.comparison)}`;
  if (evals.evaluations.length) charts.push(fitnessChart(document.getElementById("fitness-chart"), evals.evaluations));
  else document.getElementById("fitness-chart").innerHTML = `<p class="muted">No evaluation finished yet.</p>`;
  // A finished job shows its shipped profile at the target (completed to the exact total);
  // a running one the best candidate so far.
  let budgets = evals.best_budgets;
  const listed = job.profiles.length ? (await api("/profiles")).profiles : [];
  const shipped = listed.find((p) => p.job_id === job.id && p.target === job.recipe.budget.target);
  if (shipped) {
    const profile = await api(`/profiles/${shipped.id}`);
    budgets = profile.budgets;
    document.getElementById("budgets-title").textContent = `Budgets per layer (evolved profile, c = ${profile.target})`;
  }
  if (budgets) charts.push(budgetsChart(document.getElementById("budgets-chart"), budgets));
  else document.getElementById("budgets-chart").innerHTML = `<p class="muted">No budgets yet.</p>`;
  return job.status === "queued" || job.status === "running";
}

// -- routing and live refresh --------------------------------------------------------------------

async function refresh() {
  clearTimeout(timer);
  const match = location.hash.match(/^#\/jobs\/(\d+)/);
  let again = true;
  try {
    if (match) again = await renderJob(Number(match[1]));
    else await renderHome();
    setStatus(`updated ${new Date().toLocaleTimeString()}`);
  } catch (err) {
    setStatus(`error: ${err.message}`);
  }
  if (again) timer = setTimeout(refresh, POLL_MS);
}

window.addEventListener("hashchange", refresh);
refresh();
