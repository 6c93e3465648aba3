// A dishonest pod for the network's proof (tests/hub_proof_test.sh): it registers with the
// hub under an identity of its own (Ed25519, signed as src/hub/registration.h says) and
// passes the hub's requests to a real `herd serve` (the backend), cheating on the way:
//
//   inflate   counts 200000 completion tokens in every answer's usage
//   drop-ids  takes herd.completion_token_ids out of every answer (so it cannot be checked)
//   sybil     serves the backend's tokens as they come, and passes whatever it is asked to
//             check (POST /api/verify): two of them vouch for each other
//   fast      claims 1e6 tok/s decode (1e7 prefill) to take every request
//
// Usage: node cheat_pod.mjs MODE NAME HUB_URL BACKEND_URL MODEL N_CTX
// It prints "listening on URL" once registered, and keeps registering every heartbeat.
// GET /stats answers {"requests": n, "verify": n}: what the hub asked of it.
import crypto from 'node:crypto';
import http from 'node:http';

const [mode, name, hub, backend, model, nCtx] = process.argv.slice(2);
if (!['inflate', 'drop-ids', 'sybil', 'fast'].includes(mode)) {
  console.error('usage: node cheat_pod.mjs inflate|drop-ids|sybil|fast NAME HUB BACKEND MODEL N_CTX');
  process.exit(2);
}
const { publicKey, privateKey } = crypto.generateKeyPairSync('ed25519');
const id = publicKey.export({ format: 'jwk' }).x;  // the raw key, URL-safe base64: a node id
const stats = { requests: 0, verify: 0 };

// An answer object (a whole answer, or one event of a stream) as this cheater sends it.
function cheat(answer) {
  if (mode === 'inflate' && answer.usage && answer.usage.completion_tokens !== undefined) {
    answer.usage.completion_tokens = 200000;
    answer.usage.total_tokens = answer.usage.prompt_tokens + 200000;
  }
  if (mode === 'drop-ids') delete answer.herd;
  return answer;
}

async function relay(req, body, res) {
  stats.requests++;
  const r = await fetch(backend + req.url, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
  const text = await r.text();
  const type = r.headers.get('content-type') ?? 'application/json';
  let out = text;
  if (r.status === 200 && type.startsWith('text/event-stream')) {
    out = text.split('\n\n').map((event) => {
      if (!event.startsWith('data: {')) return event;
      return 'data: ' + JSON.stringify(cheat(JSON.parse(event.slice(6))));
    }).join('\n\n');
  } else if (r.status === 200) {
    out = JSON.stringify(cheat(JSON.parse(text)));
  }
  res.writeHead(r.status, { 'Content-Type': type });
  res.end(out);
}

// A sybil passes every token it is asked about; the others answer as no checker.
function verify(body, res) {
  stats.verify++;
  if (mode !== 'sybil') {
    res.writeHead(503, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ error: { message: 'not a checker' } }));
    return;
  }
  const ids = JSON.parse(body).completion_token_ids ?? [];
  res.writeHead(200, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ prompt_tokens: 1, temperature: 0,
    scores: ids.map((token) => ({ token, probability: 1, gap: 0, entropy: 0, variance: 0 })) }));
}

const server = http.createServer((req, res) => {
  let body = '';
  req.on('data', (chunk) => { body += chunk; });
  req.on('end', () => {
    const done = (e) => {
      if (!res.headersSent) res.writeHead(502);
      res.end(String(e));
    };
    if (req.method === 'GET' && req.url === '/stats') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify(stats));
    } else if (req.method === 'GET') {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end('{"status":"ok"}');
    } else if (req.url === '/api/verify') {
      verify(body, res);
    } else {
      relay(req, body, res).catch(done);
    }
  });
});
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const url = `http://127.0.0.1:${server.address().port}`;

async function register() {
  const fast = mode === 'fast';
  const body = JSON.stringify({
    id, name, url, models: [{ name: model, n_ctx: Number(nCtx) }], slots: 4,
    decode_tokens_per_s: fast ? 1e6 : 1e5, prefill_tokens_per_s: fast ? 1e7 : 1e6,
    memory_bytes: 1 << 30, time_ms: Date.now() });
  const signature = crypto.sign(null, Buffer.from('herd-registration-v1\n' + body), privateKey)
    .toString('base64url');
  const r = await fetch(hub + '/api/register', {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Herd-Signature': signature },
    body });
  if (r.status !== 200) throw new Error(`${name}: the hub answered ${r.status}: ${await r.text()}`);
  return (await r.json()).heartbeat_seconds;
}
const heartbeat = await register();
console.log(`listening on ${url} as ${id}`);
setInterval(() => register().catch((e) => console.error(String(e))), heartbeat * 1000);
