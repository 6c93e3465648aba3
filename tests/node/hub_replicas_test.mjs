// Two hub replicas and a client in front of them as a load balancer would be (run by
// tests/hub_replicas_test.sh): 40 requests, some streamed, spread over both; a request whose
// connection to a replica fails before any byte of answer is sent to the other. The first
// replica (HERD_KILL_PID) is killed with SIGKILL in the middle of the run, while a streamed
// answer from it is under way: that answer is cut (too late to fail over, as for any load
// balancer) and sent again by the client, as a user would. Prints, for the shell to check
// against the database, per replica: its id, the answers it gave whole, those it cut.
// With HERD_AFTER_RESTART=1: both replicas' books are consistent and the restarted first
// replica serves.
import assert from 'node:assert/strict';
// Node.js's own fetch (see openai_test.mjs).
import 'openai/shims/web';
import OpenAI, { APIConnectionError } from 'openai';

const urls = process.env.HERD_HUB_URLS.split(' ');
const apiKey = process.env.HERD_API_KEY;
const clients = urls.map((url) => new OpenAI({ baseURL: url + '/v1', apiKey, maxRetries: 0 }));
const model = 'herd-replicas';
const kRequests = 40, kWorkers = 4, kKillAfter = 15;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
async function getJson(url, headers = {}) {
  const r = await fetch(url, { headers });
  assert.equal(r.status, 200, url);
  return r.json();
}
// GET /api/ledger until its sum is 0: the balances are read one by one while the replica
// may settle between two reads. Its problems (each one query) must be none on every read.
async function consistentBooks(url) {
  let books;
  for (let i = 0; i < 50; i++) {
    books = await getJson(url + '/api/ledger', { Authorization: `Bearer ${process.env.HERD_OPERATOR_KEY}` });
    assert.deepEqual(books.problems, [], `${url}: ledger problems`);
    if (books.sum === 0) return books;
    await sleep(200);
  }
  assert.fail(`${url}: the ledger sums to ${books.sum}: ${JSON.stringify(books.balances)}`);
}

// Whether a connection error's cause is a refused connection (the replica was not there:
// it never saw the request) rather than one reset under a request it had accepted.
function refused(error) {
  for (let e = error; e; e = e.cause) {
    if (e.code === 'ECONNREFUSED' || /ECONNREFUSED/.test(String(e.message))) return true;
  }
  return false;
}

class Cut extends Error {}

// One request on one replica: resolves when the answer came whole; throws
// APIConnectionError when no byte of answer came, Cut when the answer broke midway.
async function send(r, i, onChunk) {
  const client = clients[r];
  const kind = i % 4;
  const max_tokens = 24 + (i % 3) * 8;
  const messages = [{ role: 'user', content: `Tell me about replica ${i}.` }];
  const prompt = `Once upon a time, replica ${i}`;
  if (kind === 0 || kind === 2) {
    let answer;
    try {
      answer = kind === 0
        ? await client.chat.completions.create({ model, messages, max_tokens, temperature: 0 })
        : await client.completions.create({ model, prompt, max_tokens, temperature: 0 });
    } catch (e) {
      if (e instanceof APIConnectionError) throw e;
      if (e.status) throw e;  // an answer, not a cut: the test fails on it
      throw new Cut(String(e));
    }
    assert.ok(answer.usage.completion_tokens > 0);
    return;
  }
  const stream = kind === 1
    ? await client.chat.completions.create({ model, messages, max_tokens, temperature: 0.8,
      stream: true, stream_options: { include_usage: true } })
    : await client.completions.create({ model, prompt, max_tokens, temperature: 0.8,
      stream: true });
  let finished = false, chunks = 0;
  try {
    for await (const chunk of stream) {
      if (chunk.choices[0]?.finish_reason) finished = true;
      onChunk(++chunks);
    }
  } catch (e) {
    throw new Cut(String(e));
  }
  if (!finished) throw new Cut('the stream ended without a finish reason');
}

const stats = urls.map(() => ({ whole: 0, cut: 0, reset: 0, refused: 0 }));
let answered = 0, failovers = 0, killed = false;
function kill() {
  if (killed || !process.env.HERD_KILL_PID) return;
  killed = true;
  process.kill(Number(process.env.HERD_KILL_PID), 'SIGKILL');
  console.log(`killed replica A after ${answered} answers`);
}

// A request as the load balancer and the user see it: to its replica, failed over to the
// other when no byte came back; sent again when an answer was cut.
async function request(i) {
  for (let round = 0; round < 3; round++) {
    const first = (i + Math.floor(i / 4) + round) % 2;
    for (const r of [first, 1 - first]) {
      try {
        await send(r, i, (chunks) => {
          if (r === 0 && chunks === 2 && answered >= kKillAfter) kill();
        });
        stats[r].whole++;
        answered++;
        if (answered >= kKillAfter + 10) kill();  // no stream from A came by: kill anyway
        return;
      } catch (e) {
        if (e instanceof Cut) {
          stats[r].cut++;
          break;  // too late for the load balancer: the user sends it again
        }
        if (!(e instanceof APIConnectionError)) throw e;
        stats[r][refused(e) ? 'refused' : 'reset']++;
        failovers++;
      }
    }
  }
  assert.fail(`request ${i} was never answered`);
}

async function network(url) {
  return getJson(url + '/api/network');
}

if (process.env.HERD_AFTER_RESTART) {
  let [a, b] = await Promise.all(urls.map(network));
  for (let i = 0; i < 150 && a.pods.length < 2; i++) {
    await sleep(100);
    a = await network(urls[0]);
  }
  assert.equal(a.pods.length, 2, 'both pods registered with the restarted replica');
  assert.equal(a.hub.requests.total, 0);
  assert.notEqual(a.hub.replica, b.hub.replica);
  for (const url of urls) await consistentBooks(url);
  await send(0, 0, () => {});
  await send(0, 1, () => {});
  const after = await network(urls[0]);
  assert.equal(after.hub.requests.total, 2);
  assert.equal(after.hub.requests.failed, 0);
  const books = await consistentBooks(urls[0]);
  console.log(`ok the restarted replica ${after.hub.replica}: books consistent (sum 0,`,
    `${Object.keys(books.balances).length} accounts), 2 requests answered`);
  process.exit(0);
}

const replicas = (await Promise.all(urls.map(network))).map((n) => n.hub.replica);
let next = 0;
async function worker() {
  while (next < kRequests) await request(next++);
}
await Promise.all(Array.from({ length: kWorkers }, worker));
assert.ok(killed, 'replica A was killed during the run');
const cut = stats.reduce((n, s) => n + s.cut, 0);
console.log(`answered ${answered} of ${kRequests} (${failovers} failed over to the other replica,`,
  `${cut} cut mid-stream by the kill and sent again)`);
assert.equal(answered, kRequests);
// Cut: only answers under way from A at the kill, at most one per worker.
assert.equal(stats[1].cut, 0);
assert.ok(cut <= kWorkers, `${cut} answers cut`);
assert.equal(stats[1].reset + stats[1].refused, 0, 'replica B never failed');
const books = await consistentBooks(urls[1]);
const net = await network(urls[1]);
assert.equal(net.hub.requests.failed, 0);
console.log(`ok replica B's books: no problems, sum 0; client ${Object.entries(books.balances)
  .filter(([k]) => k.startsWith('client:')).map(([, v]) => v)}`);
// For the shell: a request A had accepted when it died is "cut" (an answer under way) or
// "reset" (no byte of it yet: failed over).
console.log(`replica A ${replicas[0]} whole ${stats[0].whole} cut ${stats[0].cut + stats[0].reset}`);
console.log(`replica B ${replicas[1]} whole ${stats[1].whole} cut 0`);
console.log(`replica A: ${stats[0].refused} refused after the kill, ${stats[0].reset} reset by it`);
