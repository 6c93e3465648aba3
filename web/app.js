// herd's page: a chat that streams from /v1/chat/completions, and a view of the cluster
// (for now the local node) from /api/node. No framework, no CDN.
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

function renderNodes(info) {
  const n = info.node;
  const m = info.metrics;
  if (!n) { $('nodes').innerHTML = '<p>Loading the model…</p>'; return; }
  const layers = '<span></span>'.repeat(Math.min(n.layers.total, 128));
  $('nodes').innerHTML = `
    <div class="node" id="node-${escapeHtml(n.name)}">
      <h3>${escapeHtml(n.name)} <small>(this machine)</small></h3>
      <div class="tps"><span id="tps">${m.tokens_per_second.toFixed(1)}</span> tok/s</div>
      <div class="layers" title="layers ${n.layers.first}–${n.layers.end - 1}">${layers}</div>
      <dl>
        <dt>model</dt><dd>${escapeHtml(info.model)} (${escapeHtml(n.arch)})</dd>
        <dt>layers</dt><dd class="layer-range">${n.layers.first}–${n.layers.end - 1} of ${n.layers.total}</dd>
        <dt>weights</dt><dd>${bytes(n.weight_bytes + n.packed_weight_bytes)}</dd>
        <dt>KV cache</dt><dd>${bytes(n.kv_cache_bytes)} (${n.slots} slots × ${n.n_ctx})</dd>
        <dt>threads</dt><dd>${n.threads} (${escapeHtml(n.isa)})</dd>
        <dt>running</dt><dd>${m.running} (queued ${m.queued})</dd>
        <dt>tokens</dt><dd>${m.completion_tokens} generated, ${m.prompt_tokens} prefilled, ${m.cached_prompt_tokens} cached</dd>
        <dt>requests</dt><dd>${m.requests}</dd>
      </dl>
    </div>` + (n.stages ? renderStages(n) : '');
}

// Across nodes: one line per rank of every pipeline stage.
function renderStages(n) {
  const rows = n.stages.map((s, i) => s.ranks.map((r) => `
      <tr><td>${i}</td><td>${s.layers[0]}–${s.layers[1] - 1}</td><td>${escapeHtml(r.node)}</td>
      <td>${escapeHtml(r.address)}</td><td>${r.heads[0]}–${r.heads[1] - 1}</td>
      <td>${bytes(r.memory_bytes)}</td></tr>`).join('')).join('');
  return `<h3>${escapeHtml(n.parallel)}</h3>
    <table class="stages"><tr><th>stage</th><th>layers</th><th>node</th><th>address</th>
    <th>heads</th><th>memory</th></tr>${rows}</table>`;
}

async function poll() {
  try {
    const [health, node] = await Promise.all([fetch('/health'), fetch('/api/node')]);
    const h = await health.json();
    $('status').textContent = h.status + (h.reason ? ': ' + h.reason : '');
    renderNodes(await node.json());
    if (!$('model').options.length && h.status === 'ready') loadModels();
  } catch (e) {
    $('status').textContent = 'server unreachable';
  }
}

for (const tab of document.querySelectorAll('.tab')) {
  tab.addEventListener('click', () => {
    for (const t of document.querySelectorAll('.tab')) t.classList.toggle('active', t === tab);
    $('view-chat').classList.toggle('hidden', tab.dataset.view !== 'chat');
    $('view-cluster').classList.toggle('hidden', tab.dataset.view !== 'cluster');
  });
}
$('api_key').addEventListener('change', loadModels);

loadModels();
poll();
setInterval(poll, 1000);
