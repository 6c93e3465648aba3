// The hub's page: polls GET /api/network every 2 s and draws the network's figures, its pods
// and the requests flowing (src/hub/hub_page.h, docs/network.md).
//
// Contract with the JSON: every field may be missing or of another type (the hub's JSON is
// growing); such a value is drawn as "—" and nothing throws. Every string from the JSON is
// set as text (textContent, title), never as markup: pod names are chosen by strangers.
'use strict';

const kPollMs = 2000;
// Below it a pod is flagged: reputation is in (0, 1], lowered by failed verifications, and
// the router stops choosing a pod at 0.05 (src/hub/router.h).
const kLowReputation = 0.5;
const kMaxRecent = 50;  // rows of "requests flowing"
const kDash = '—';

const $ = (id) => document.getElementById(id);

// ---------------------------------------------------------------------------------------
// Reading values that may be anything

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);
const asObject = (v) => (v !== null && typeof v === 'object' && !Array.isArray(v) ? v : {});
const asArray = (v) => (Array.isArray(v) ? v : []);
// A string or a number as text; anything else as ''.
const asText = (v) => (typeof v === 'string' ? v : isNum(v) ? String(v) : '');
// Sum of a field over items when every item has it as a number, else undefined.
function sumOf(items, field) {
  if (items.length === 0 || !items.every((x) => isNum(x[field]))) return undefined;
  return items.reduce((a, x) => a + x[field], 0);
}

// ---------------------------------------------------------------------------------------
// Formatting: each takes any value and gives text, kDash when it is not what it should be

const fmtInt = (v) => (isNum(v) ? Math.round(v).toLocaleString('en-US') : kDash);
const fmtRate = (v) => isNum(v) && v >= 0 ? (v >= 100 ? fmtInt(v) : v.toFixed(1)) : kDash;
const fmtFixed = (v, digits) => (isNum(v) ? v.toFixed(digits) : kDash);
const fmtCredits = (v) => isNum(v) ? v.toLocaleString('en-US', {maximumFractionDigits: 2}) : kDash;
const fmtMs = (v) => (isNum(v) && v >= 0 ? `${v < 10 ? v.toFixed(1) : v.toFixed(0)} ms` : kDash);

function fmtDuration(seconds) {
  if (!isNum(seconds) || seconds < 0) return kDash;
  const s = Math.floor(seconds);
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

function fmtTime(ms) {
  if (!isNum(ms)) return kDash;
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? kDash : d.toLocaleTimeString('en-GB');
}

// A pod's id shortened for the table (the whole id in its title).
function shortId(id) {
  const text = asText(id);
  if (!text) return kDash;
  return text.length > 10 ? `${text.slice(0, 8)}…` : text;
}

function fmtBytes(v) {
  if (!isNum(v) || v < 0) return kDash;
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let x = v, i = 0;
  while (x >= 1024 && i < units.length - 1) {
    x /= 1024;
    i++;
  }
  return `${x.toFixed(i === 0 ? 0 : 1)} ${units[i]}`;
}

// ---------------------------------------------------------------------------------------
// Building the DOM (text only)

// A <td> holding `text`, with class `cls` and a title when given.
function cell(text, cls, title) {
  const td = document.createElement('td');
  td.textContent = text === '' ? kDash : text;
  if (cls) td.className = cls;
  if (title) td.title = title;
  return td;
}

// The one row of an empty table: `message` across its columns.
function emptyRow(table, message) {
  const tr = document.createElement('tr');
  const td = cell(message, 'none');
  td.colSpan = table.tHead.rows[0].cells.length;
  tr.append(td);
  return tr;
}

// ---------------------------------------------------------------------------------------
// Pods

// Why a pod is flagged ([] when it is not): the hub says so, its reputation is low, or it
// failed verification.
function flagReasons(pod) {
  const reasons = [];
  if (pod.flagged === true) reasons.push('flagged by the hub');
  if (isNum(pod.reputation) && pod.reputation < kLowReputation) {
    reasons.push(`reputation ${pod.reputation.toFixed(2)}`);
  }
  if (isNum(pod.failed_verifications) && pod.failed_verifications > 0) {
    reasons.push(
        `${fmtInt(pod.failed_verifications)} failed verification` +
        (pod.failed_verifications === 1 ? '' : 's'));
  }
  return reasons;
}

function modelNames(pod) {
  return asArray(pod.models).map((m) => asText(asObject(m).name)).filter((n) => n !== '');
}

function podRow(pod) {
  const tr = document.createElement('tr');
  const id = asText(pod.id);
  if (id) tr.dataset.pod = id;

  const name = cell(asText(pod.name), 'name');
  const about = [
    asText(pod.url), isNum(pod.memory_bytes) ? `memory ${fmtBytes(pod.memory_bytes)}` : '',
    isNum(pod.last_seen_seconds) ? `heard from ${fmtDuration(pod.last_seen_seconds)} ago` : ''
  ].filter((x) => x !== '');
  name.title = about.join('\n');
  const reasons = flagReasons(pod);
  if (reasons.length > 0) {
    tr.classList.add('flagged');
    const flag = document.createElement('span');
    flag.className = 'flag';
    flag.textContent = 'flagged';
    flag.title = reasons.join(', ');
    name.append(flag);
  }

  const modelsTitle =
      asArray(pod.models)
          .map(asObject)
          .filter((m) => asText(m.name) !== '')
          .map((m) => asText(m.name) + (isNum(m.n_ctx) ? ` (context ${fmtInt(m.n_ctx)})` : ''));

  const verified = isNum(pod.verified) ? `${fmtInt(pod.verified)} verified` : '';
  tr.append(
      name, cell(shortId(pod.id), 'id', id),
      cell(modelNames(pod).join(', '), 'models', modelsTitle.join('\n')),
      cell(fmtRate(pod.decode_tokens_per_s), 'num decode'),
      cell(fmtRate(pod.prefill_tokens_per_s), 'num prefill'),
      cell(`${fmtInt(pod.active)} / ${fmtInt(pod.slots)}`, 'num'),
      cell(fmtDuration(pod.uptime_seconds), 'num'), cell(fmtMs(pod.rtt_ms), 'num'),
      cell(fmtFixed(pod.reputation, 2), 'num', verified), cell(fmtInt(pod.requests), 'num'),
      cell(fmtInt(pod.tokens_served), 'num'), cell(fmtCredits(pod.credits_earned), 'num'),
      cell(fmtCredits(pod.credits_pending), 'num'));
  return tr;
}

function drawPods(pods) {
  const table = $('pods');
  const rows = pods.map(podRow);
  if (rows.length === 0)
    rows.push(emptyRow(table, 'No pod is registered. A pod joins with herd serve --hub URL.'));
  table.tBodies[0].replaceChildren(...rows);
}

// ---------------------------------------------------------------------------------------
// Requests flowing

function statusClass(status) {
  if (status === 'ok' || (isNum(status) && status >= 200 && status < 300)) return 'state-ok';
  return asText(status) === '' ? '' : 'state-bad';
}

function recentRow(r) {
  const tr = document.createElement('tr');
  const seconds = r.seconds;
  const rate = isNum(r.completion_tokens) && isNum(seconds) && seconds > 0 ?
      r.completion_tokens / seconds :
      undefined;
  const pod = asText(r.pod_name) || shortId(r.pod);
  tr.append(
      cell(fmtTime(r.at_ms), 'num'), cell(asText(r.model)), cell(pod, 'name', asText(r.pod)),
      cell(fmtInt(r.prompt_tokens), 'num'), cell(fmtInt(r.completion_tokens), 'num'),
      cell(fmtFixed(seconds, 2), 'num'), cell(fmtRate(rate), 'num'),
      cell(asText(r.status), statusClass(r.status)));
  return tr;
}

function drawRecent(recent) {
  const table = $('recent');
  if (recent === undefined) {
    table.tBodies[0].replaceChildren(emptyRow(table, 'This hub does not list its requests.'));
    return;
  }
  const items = asArray(recent).map(asObject);
  // Newest first; those without a time keep their order, after the others.
  const order = items.map((r, i) => [isNum(r.at_ms) ? r.at_ms : -Infinity, i]);
  order.sort((a, b) => (b[0] - a[0]) || (a[1] - b[1]));
  const rows = order.slice(0, kMaxRecent).map(([, i]) => recentRow(items[i]));
  if (rows.length === 0) rows.push(emptyRow(table, 'No request yet.'));
  table.tBodies[0].replaceChildren(...rows);
}

// ---------------------------------------------------------------------------------------
// Summary

function drawSummary(hub, pods) {
  const requests = asObject(hub.requests);
  const verification = asObject(hub.verification);
  const models = new Set(pods.flatMap(modelNames));

  $('sum-pods').textContent = fmtInt(pods.length);
  $('sum-models').textContent = fmtInt(models.size);
  $('sum-models').title = [...models].sort().join('\n');
  $('sum-requests').textContent = fmtInt(requests.total);
  // Requests in flight: the hub's count, else the pods' (present in every version).
  const active = isNum(requests.active) ? requests.active : sumOf(pods, 'active');
  const detail = [`${fmtInt(active)} active`];
  if (isNum(requests.failed)) detail.push(`${fmtInt(requests.failed)} failed`);
  $('sum-requests-detail').textContent = detail.join(' · ');
  $('sum-tokens').textContent =
      fmtInt(isNum(requests.tokens) ? requests.tokens : sumOf(pods, 'tokens_served'));
  $('sum-verified').textContent = fmtInt(verification.checked);
  const vdetail = [];
  if (isNum(verification.failed)) vdetail.push(`${fmtInt(verification.failed)} failed`);
  if (isNum(verification.sample_rate)) {
    vdetail.push(`${+ (verification.sample_rate * 100).toFixed(2)}% sampled`);
  }
  $('sum-verified-detail').textContent = vdetail.join(' · ');
  $('sum-uptime').textContent = fmtDuration(hub.uptime_seconds);
}

// ---------------------------------------------------------------------------------------
// Polling

function setStatus(text, error) {
  const status = $('status');
  status.textContent = text;
  status.classList.toggle('error', error);
}

function draw(network) {
  const data = asObject(network);
  const hub = asObject(data.hub);
  const pods = asArray(data.pods).map(asObject);
  drawSummary(hub, pods);
  drawPods(pods);
  drawRecent(data.recent);
}

async function poll() {
  let network, answered = false;
  try {
    const r = await fetch('/api/network', {cache: 'no-store'});
    if (!r.ok) throw new Error(`HTTP ${r.status}`);
    network = await r.json();
    answered = true;
  } catch (e) {
    setStatus(`the hub does not answer (${e.message}); the figures are old`, true);
  }
  try {
    if (answered) {
      draw(network);
      setStatus(`updated ${fmtTime(Date.now())}`, false);
    }
  } finally {
    setTimeout(poll, kPollMs);
  }
}

poll();
