// A bounded load test of herd serve: 32 concurrent streaming clients send 200 chat requests
// (greedy), and every streamed reply must equal the same request's non-streamed reply
// alone: no error, no lost or duplicated token. Reports throughput and p50/p99 time to
// first token and inter-token latency. Run by tests/serve_node_test.sh.
import assert from 'node:assert/strict';

const url = process.env.HERD_URL;
const kClients = Number(process.env.HERD_LOAD_CLIENTS || 32);
const kRequests = Number(process.env.HERD_LOAD_REQUESTS || 200);
const kPrompts = 8;
const kMaxTokens = 32;

const body = (i, stream) => ({
  messages: [{ role: 'user', content: `Question number ${i}: what does the herd do?` }],
  max_tokens: kMaxTokens, temperature: 0, stream,
  ...(stream ? { stream_options: { include_usage: true } } : {}),
});
const post = (b) => fetch(url + '/v1/chat/completions', {
  method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(b),
});

// References: each prompt alone, not streamed.
const reference = [];
for (let i = 0; i < kPrompts; i++) {
  const r = await post(body(i, false));
  assert.equal(r.status, 200);
  const j = await r.json();
  reference.push({ text: j.choices[0].message.content, tokens: j.usage.completion_tokens });
}

const ttft = [], tpot = [];  // per request: time to first token, time per later token
let completionTokens = 0, done = 0;

async function streamOne(k) {
  const i = k % kPrompts;
  const start = performance.now();
  const r = await post(body(i, true));
  if (r.status !== 200) assert.fail(`request ${k}: status ${r.status}: ${await r.text()}`);
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '', text = '', usage = null, first = null, last = null, sawDone = false;
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      if (!event.startsWith('data: ')) continue;
      const data = event.slice(6);
      if (data === '[DONE]') { sawDone = true; continue; }
      const j = JSON.parse(data);
      assert.equal(j.error, undefined, `request ${k}: ${data}`);
      if (j.usage) { usage = j.usage; continue; }
      const piece = j.choices[0].delta.content;
      if (piece) {
        const now = performance.now();
        if (first === null) first = now;
        last = now;
        text += piece;
      }
    }
  }
  assert.ok(sawDone, `request ${k}: no [DONE]`);
  assert.equal(text, reference[i].text, `request ${k}: the streamed text differs from the reply alone`);
  assert.equal(usage.completion_tokens, reference[i].tokens, `request ${k}: token count`);
  completionTokens += usage.completion_tokens;
  ttft.push(first - start);
  if (usage.completion_tokens > 1) tpot.push((last - first) / (usage.completion_tokens - 1));
  done++;
}

const started = performance.now();
let next = 0;
await Promise.all(Array.from({ length: kClients }, async () => {
  while (next < kRequests) await streamOne(next++);
}));
const seconds = (performance.now() - started) / 1000;
assert.equal(done, kRequests);

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))];
};
const metrics = await (await fetch(url + '/metrics')).text();
assert.match(metrics, /herd_requests_total\{endpoint="chat_completions",status="200"\} (\d+)/);
console.log(`load_test: ${kRequests} requests, ${kClients} concurrent clients, ${completionTokens} tokens in ` +
  `${seconds.toFixed(2)} s: ${(completionTokens / seconds).toFixed(1)} tok/s; ` +
  `TTFT p50 ${pct(ttft, 50).toFixed(1)} ms p99 ${pct(ttft, 99).toFixed(1)} ms; ` +
  `inter-token (per request, after the first) p50 ${pct(tpot, 50).toFixed(1)} ms p99 ${pct(tpot, 99).toFixed(1)} ms`);
console.log('load_test: all checks passed');
