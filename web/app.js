// herd's page: a chat that streams from /v1/chat/completions, and a live view of the pod
// (nodes, plan, per-stage figures, events) from /api/cluster. No framework, no CDN.
'use strict';

const $ = (id) => document.getElementById(id);
const history = [];  // {role, content} of the conversation so far
let controller = null;  // AbortController of the reply being streamed

// ---- markdown: a small safe subset (code blocks, inline code, bold, italics, headings,
// lists, links); everything is escaped first, so model output can never inject HTML.
function escapeHtml(s) {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}
function inline(s) {
  return s
    .replace(/`([^`]+)`/g, '<code>$1</code>')
    .replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>')
    .replace(/(^|[^*])\*([^*\s][^*]*)\*/g, '$1<em>$2</em>')
    .replace(/\[([^\]]+)\]\((https?:\/\/[^\s)]+)\)/g, '<a href="$2" target="_blank" rel="noopener">$1</a>');
}
function markdown(text) {
  const out = [];
  const parts = text.split(/```/);
  parts.forEach((part, i) => {
    if (i % 2 === 1) {  // inside a code fence (possibly still open while streaming)
      const body = part.replace(/^[^\n]*\n/, '');
      out.push('<pre><code>' + escapeHtml(body) + '</code></pre>');
      return;
    }
    let list = null;
    for (const raw of escapeHtml(part).split('\n')) {
      const item = raw.match(/^\s*(?:[-*]|\d+\.)\s+(.*)$/);
      if (item) {
        if (!list) { out.push('<ul>'); list = true; }
        out.push('<li>' + inline(item[1]) + '</li>');
        continue;
      }
      if (list) { out.push('</ul>'); list = null; }
      const heading = raw.match(/^(#{1,4})\s+(.*)$/);
      if (heading) out.push(`<h${heading[1].length + 2}>${inline(heading[2])}</h${heading[1].length + 2}>`);
      else if (raw.trim() === '') out.push('<br>');
      else out.push('<p>' + inline(raw) + '</p>');
    }
    if (list) out.push('</ul>');
  });
  return out.join('');
}

// ---- chat
function headers() {
  const h = { 'Content-Type': 'application/json' };
  const key = $('api_key').value.trim();
  if (key) h['Authorization'] = 'Bearer ' + key;
  return h;
}

function addMessage(role, text) {
  const div = document.createElement('div');
  div.className = 'msg ' + role;
  div.innerHTML = `<div class="role">${role}</div><div class="body"></div>`;
  div.querySelector('.body').innerHTML = markdown(text);
  $('messages').appendChild(div);
  $('messages').scrollTop = $('messages').scrollHeight;
  return div;
}

function render(div, reply) {
  let html = '';
  if (reply.reasoning) html += `<details open><summary>Thinking</summary>${markdown(reply.reasoning)}</details>`;
  html += markdown(reply.content);
  for (const call of reply.toolCalls) {
    html += `<pre><code>${escapeHtml(call.name + '(' + call.arguments + ')')}</code></pre>`;
  }
  div.querySelector('.body').innerHTML = html;
  $('messages').scrollTop = $('messages').scrollHeight;
}

function setBusy(busy) {
  $('send').disabled = busy;
  $('stop').disabled = !busy;
}

// Reads an SSE body and calls onEvent with each parsed `data:` JSON.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data: ')) continue;  // comments (keep-alives)
        const data = line.slice(6);
        if (data === '[DONE]') return;
        onEvent(JSON.parse(data));
      }
    }
  }
}

async function send(text) {
  history.push({ role: 'user', content: text });
  addMessage('user', text);
  const div = addMessage('assistant', '');
  div.classList.add('streaming');
  const reply = { content: '', reasoning: '', toolCalls: [] };
  const messages = [];
  const system = $('system').value.trim();
  if (system) messages.push({ role: 'system', content: system });
  messages.push(...history);
  const body = {
    model: $('model').value || undefined,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($('temperature').value),
    top_p: Number($('top_p').value),
    top_k: Number($('top_k').value),
    max_tokens: Number($('max_tokens').value),
    chat_template_kwargs: { enable_thinking: $('thinking').checked },
  };
  controller = new AbortController();
  setBusy(true);
  const started = performance.now();
  let usage = null, finish = null;
  try {
    const response = await fetch('/v1/chat/completions', {
      method: 'POST', headers: headers(), body: JSON.stringify(body), signal: controller.signal,
    });
    if (!response.ok) {
      const err = await response.json().catch(() => ({ error: { message: response.statusText } }));
      throw new Error(err.error.message);
    }
    await readEvents(response, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices && chunk.choices[0];
      if (!choice) return;
      const d = choice.delta || {};
      if (d.content) reply.content += d.content;
      if (d.reasoning_content) reply.reasoning += d.reasoning_content;
      for (const t of d.tool_calls || []) reply.toolCalls.push(t.function);
      if (choice.finish_reason) finish = choice.finish_reason;
      render(div, reply);
    });
  } catch (e) {
    if (e.name !== 'AbortError') {
      div.classList.add('error');
      reply.content += (reply.content ? '\n\n' : '') + 'Error: ' + e.message;
      render(div, reply);
    } else {
      finish = 'stopped';
    }
  } finally {
    controller = null;
    setBusy(false);
    div.classList.remove('streaming');
    div.classList.add('done');
  }
  history.push({ role: 'assistant', content: reply.content });
  const seconds = (performance.now() - started) / 1000;
  const meta = document.createElement('div');
  meta.className = 'meta';
  meta.textContent = [finish && `finish: ${finish}`,
    usage && `${usage.completion_tokens} tokens, ${(usage.completion_tokens / seconds).toFixed(1)} tok/s`,
    usage && `prompt ${usage.prompt_tokens} (${usage.prompt_tokens_details.cached_tokens} cached)`]
    .filter(Boolean).join(' · ');
  div.appendChild(meta);
}

$('composer').addEventListener('submit', (e) => {
  e.preventDefault();
  const text = $('input').value.trim();
  if (!text || controller) return;
  $('input').value = '';
  send(text);
});
$('input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    $('composer').requestSubmit();
  }
});
$('stop').addEventListener('click', () => controller && controller.abort());
$('clear').addEventListener('click', () => {
  if (controller) controller.abort();
  history.length = 0;
  $('messages').innerHTML = '';
});

// ---- models, status and the cluster view
async function loadModels() {
  try {
    const r = await fetch('/v1/models', { headers: headers() });
    if (!r.ok) return;
    const j = await r.json();
    $('model').innerHTML = j.data.map((m) => `<option>${escapeHtml(m.id)}</option>`).join('');
  } catch (e) { /* the status line says what is wrong */ }
}

function bytes(n) {
  if (n >= 1 << 30) return (n / (1 << 30)).toFixed(2) + ' GiB';
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + ' MiB';
  return (n / 1024).toFixed(0) + ' KiB';
}

// ---- the cluster view: the pod as GET /api/cluster reports it (docs/server.md), redrawn
// every second while the view is shown. Every text from the server is escaped.
const esc = (v) => escapeHtml(String(v));
// A half-open range [begin, end) as the page writes it: "4–7", "4", or "–" when empty.
const span = (r) => (!r || r[1] <= r[0] ? '–' : r[1] - r[0] === 1 ? `${r[0]}` : `${r[0]}–${r[1] - 1}`);
const width = (r) => (r ? r[1] - r[0] : 0);

// [0, 1, 2, 5, 7, 8] -> "0–2, 5, 7–8"
function idList(ids) {
  if (!ids || !ids.length) return '–';
  const parts = [];
  let begin = ids[0], prev = ids[0];
  for (const id of ids.slice(1).concat([null])) {
    if (id === prev + 1) { prev = id; continue; }
    parts.push(begin === prev ? `${begin}` : `${begin}–${prev}`);
    begin = prev = id;
  }
  return parts.join(', ');
}

// The layer ranges the plan gives node `index`, in pipeline order.
function nodeLayers(plan, index) {
  if (!plan) return [];
  return plan.stages.filter((s) => s.ranks.some((r) => r.node === index)).map((s) => s.layers);
}

function nodeCard(n, pod) {
  const stages = pod.plan ? pod.plan.stages : [];
  const total = stages.length ? stages[stages.length - 1].layers[1] : 0;
  const held = nodeLayers(pod.plan, n.index);
  const holds = (i) => held.some((r) => i >= r[0] && i < r[1]);
  const bar = Array.from({ length: Math.min(total, 128) }, (_, i) => `<span${holds(i) ? ' class="on"' : ''}></span>`).join('');
  const layers = held.length ? held.map(span).join(', ') + ` of ${total}` : 'none';
  const free = n.free_memory_bytes ? bytes(n.free_memory_bytes) + ' free' : 'free unknown';
  const cores = n.threads ? `${n.cores} (${n.threads} threads${n.isa ? ', ' + esc(n.isa) : ''})` : `${n.cores}`;
  return `
    <div class="node ${esc(n.state)}" id="node-${esc(n.name)}" data-name="${esc(n.name)}">
      <h3>${esc(n.name)} <span class="node-state">${esc(n.state)}</span></h3>
      <div class="layers" title="layers ${esc(layers)}">${bar}</div>
      <dl>
        <dt>address</dt><dd>${esc(n.address)}</dd>
        <dt>layers</dt><dd class="layer-range">${layers}</dd>
        <dt>cores</dt><dd>${cores}</dd>
        <dt>memory</dt><dd class="memory">${bytes(n.memory_used_bytes || 0)} in use / ${free}</dd>
        <dt>bandwidth</dt><dd>${n.bandwidth_gbs ? n.bandwidth_gbs.toFixed(1) + ' GB/s' : 'unknown'}</dd>
        ${n.stands_by ? `<dt>stands by for</dt><dd class="stands-by">${esc(n.stands_by.node)} (stage ${n.stands_by.stage}, rank ${n.stands_by.rank})</dd>` : ''}
      </dl>
    </div>`;
}

// One row per rank; a stage's layers and its figures span its ranks' rows.
function planTable(pod) {
  if (!pod.plan) return '';
  const name = (i) => (pod.nodes[i] ? pod.nodes[i].name : `#${i}`);
  const rows = pod.plan.stages.map((s, i) => {
    const st = pod.stages[i] || {};
    const n = s.ranks.length;
    return s.ranks.map((r, k) => `
      <tr class="stage-${i}">${k === 0 ? `<td rowspan="${n}">${i}</td><td rowspan="${n}">${span(s.layers)}</td>` : ''}
        <td class="rank-node">${esc(name(r.node))}</td><td>${span(r.heads)}</td><td>${span(r.kv_heads)}</td>
        <td>${idList(r.experts)}</td><td>${width(r.vocab)}</td><td>${bytes(r.memory_bytes)}</td>
        ${k === 0 ? `<td rowspan="${n}" class="ms">${st.tokens ? st.ms_per_token.toFixed(2) : '–'}</td>
        <td rowspan="${n}" class="stage-tps">${st.tokens ? st.tokens_per_second.toFixed(1) : '–'}</td>
        <td rowspan="${n}">${st.tokens || 0}</td>` : ''}</tr>`).join('');
  }).join('');
  const notes = pod.plan.notes.map((t) => `<li>${esc(t)}</li>`).join('');
  return `<table class="stages"><tr><th>stage</th><th>layers</th><th>node</th><th>heads</th>
    <th>KV heads</th><th>experts</th><th>vocab rows</th><th>memory</th><th>ms/token</th>
    <th>tok/s</th><th>tokens</th></tr>${rows}</table>` + (notes ? `<ul class="notes">${notes}</ul>` : '');
}

function renderCluster(pod) {
  $('pod').className = 'pod ' + pod.state;
  $('pod-state').textContent = pod.state;
  $('pod-reason').textContent = pod.reason || '';
  const m = pod.metrics;
  $('pod-figures').textContent = pod.model ? [pod.model, pod.parallel,
    `${m.tokens_per_second.toFixed(1)} tok/s`, `${m.running} running, ${m.queued} queued`,
    `${m.completion_tokens} tokens generated`].join(' · ') : '';
  $('nodes').innerHTML = pod.nodes.length ? pod.nodes.map((n) => nodeCard(n, pod)).join('')
    : '<p>Loading the model…</p>';
  $('plan').innerHTML = planTable(pod);
  const events = pod.events.slice().sort((a, b) => b.time - a.time);  // newest first
  $('events').innerHTML = events.length ? events.map((e) => `
    <li class="event ${esc(e.kind)}"><time>${new Date(e.time * 1000).toLocaleTimeString()}</time>
    <b>${esc(e.kind)}</b> ${esc(e.text)}</li>`).join('') : '<li class="none">none yet</li>';
}

const clusterShown = () => !$('view-cluster').classList.contains('hidden');
let polling = false;

async function poll() {
  if (polling) return;  // a slow answer is not asked for twice
  polling = true;
  try {
    const health = await (await fetch('/health')).json();
    $('status').textContent = health.status + (health.reason ? ': ' + health.reason : '');
    if (!$('model').options.length && health.status === 'ready') loadModels();
    if (clusterShown()) renderCluster(await (await fetch('/api/cluster')).json());
  } catch (e) {
    $('status').textContent = 'server unreachable';
  } finally {
    polling = false;
  }
}

for (const tab of document.querySelectorAll('.tab')) {
  tab.addEventListener('click', () => {
    for (const t of document.querySelectorAll('.tab')) t.classList.toggle('active', t === tab);
    $('view-chat').classList.toggle('hidden', tab.dataset.view !== 'chat');
    $('view-cluster').classList.toggle('hidden', tab.dataset.view !== 'cluster');
    if (clusterShown()) poll();
  });
}
$('api_key').addEventListener('change', loadModels);

loadModels();
poll();
setInterval(poll, 1000);
