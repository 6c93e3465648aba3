// The network's proof through the official openai client (run by tests/hub_proof_test.sh):
// 50 requests through the hub to three pods, one of them cheating, and five smarter
// cheaters (cheat_pod.mjs: inflater, dropper, sybil-a, sybil-b, fast). Every request is
// answered; the cheaters are caught or never trusted, none is paid, none of their answers
// reaches the client, the sybils are never asked to check; the honest pods are never
// flagged and lose nothing; the ledger sums to zero and the client paid exactly the tokens
// the answers said they used.
import assert from 'node:assert/strict';
// Node.js's own fetch (see openai_test.mjs).
import 'openai/shims/web';
import OpenAI from 'openai';

const hub = process.env.HERD_HUB_URL;
const client = new OpenAI({ baseURL: hub + '/v1', apiKey: process.env.HERD_API_KEY, maxRetries: 0 });
const prices = { prompt: 1, completion: 4 };  // herd hub's defaults
const grant = 1000000;

const models = await client.models.list();
assert.deepEqual(models.data.map((m) => m.id), ['herd-proof']);
const model = 'herd-proof';

// One request of each kind in turn: greedy and sampled, chat and plain, streamed and not.
const topics = ['the herd', 'a mac mini', 'the weather', 'trains', 'a river', 'old maps',
  'the sea', 'bread', 'a library', 'winter'];
async function request(i) {
  const topic = topics[i % topics.length];
  const temperature = i % 3 === 2 ? 0.8 : 0;
  // A greedy answer is checked token by token; a sampled one by how likely its draws are
  // together (a z-score), which needs a dozen tokens or more: the flat logits of a random
  // model let 8 sampled tokens of another model pass now and then (a cheater was once
  // served and paid so). A pass of fewer than 16 sampled tokens now proves nothing
  // (hub/checks.h): a new pod's such answer goes to another pod. Sampled requests here ask
  // 8, 12, 16, 20 or 24 tokens.
  const max_tokens = 8 + (i % 5) * 4;
  const kind = i % 4;
  if (kind === 3) {
    const r = await client.completions.create({
      model, prompt: `Once upon a time, ${topic}`, max_tokens, temperature });
    assert.equal(r.object, 'text_completion');
    assert.equal(typeof r.choices[0].text, 'string');
    return r.usage;
  }
  const messages = [{ role: 'user', content: `Tell me about ${topic} (${i}).` }];
  if (kind === 1) {
    const stream = await client.chat.completions.create({
      model, messages, max_tokens, temperature, stream: true,
      stream_options: { include_usage: true } });
    let usage = null, finish = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
      assert.equal(chunk.herd, undefined);  // the hub's part never reaches the client
    }
    assert.ok(finish, 'the stream finished');
    assert.ok(usage, 'the stream gave its usage');
    return usage;
  }
  if (kind === 2) {
    // Streamed without asking for usage: the hub asks the pod for it (to charge) and keeps
    // it from the client.
    const stream = await client.chat.completions.create({
      model, messages, max_tokens, temperature, stream: true });
    let text = '', chunks = 0;
    for await (const chunk of stream) {
      assert.equal(chunk.usage, undefined);
      text += chunk.choices[0]?.delta?.content ?? '';
      chunks++;
    }
    assert.ok(chunks > 1);
    return null;  // the client cannot know these tokens: the hub's counts are checked below
  }
  const r = await client.chat.completions.create({ model, messages, max_tokens, temperature });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.herd, undefined);
  return r.usage;
}

// Three at a time, as several users would.
const usages = [];
let next = 0;
async function worker() {
  while (next < 50) {
    const i = next++;
    usages[i] = await request(i);
  }
}
await Promise.all([worker(), worker(), worker()]);
console.log('ok 50 requests answered');

// The checks run after the answers: wait until the hub has done them.
async function network() {
  const r = await fetch(hub + '/api/network');
  assert.equal(r.status, 200);
  return r.json();
}
let net = await network();
for (let i = 0; i < 600 && net.hub.verification.queued > 0; i++) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  net = await network();
}
await new Promise((resolve) => setTimeout(resolve, 500));  // the last one's verdict
net = await network();
const pod = (name) => net.pods.find((p) => p.name === name);
const cheater = pod('cheater');
// The router tries it when its claims make it look fast (herd serve measures itself: a
// noisy prefill figure can make it look slow, and then it is never sent a request).
if (cheater.checked > 0) {
  assert.ok(cheater.flagged, 'the cheater is flagged: ' + JSON.stringify(cheater));
  assert.ok(cheater.failed_verifications >= 1);
}
// A new pod's answers are checked before the client gets them: the cheater's failed, and
// those requests went to honest pods. Every answer the client got is an honest pod's.
assert.equal(cheater.requests, 0, `the cheater's answers reached the client ${cheater.requests} times`);
assert.equal(cheater.credits_pending, 0);
assert.equal(cheater.credits_earned, 0);
for (const name of ['honest-avx2', 'honest-best']) {
  const p = pod(name);
  assert.equal(p.failed_verifications, 0, `${name} was flagged: ${p.last_failure}`);
  assert.ok(!p.flagged);
}
assert.equal(pod('honest-avx2').may_check, true, 'the seed checks');
// The smarter cheaters: each tried (a new pod is believed fast enough for one trial), caught
// by its first answer, which was not sent; none trusted or paid.
const caught = [];
for (const name of ['inflater', 'dropper', 'sybil-a', 'sybil-b', 'fast']) {
  const p = pod(name);
  assert.ok(p, `${name} is registered`);
  const asked = await (await fetch(p.url + '/stats')).json();
  assert.equal(p.requests, 0, `${name}'s answers reached the client ${p.requests} times: ${JSON.stringify(p)}`);
  assert.equal(p.credits_pending, 0, `${name} has credits pending`);
  assert.equal(p.credits_earned, 0, `${name} was paid`);
  assert.equal(p.may_check, false, `${name} may check`);
  assert.equal(asked.verify, 0, `${name} was asked to check ${asked.verify} times`);
  assert.ok(asked.requests > 0, `${name} was never sent a request: ${JSON.stringify(p)}`);
  assert.ok(p.flagged, `${name} served ${asked.requests} requests unflagged: ${JSON.stringify(p)}`);
  caught.push(`${name} (${p.last_failure})`);
}
// A claim of 1e6 tok/s is believed no more than a trial's worth, or what the hub measured.
assert.ok(pod("fast").routed_decode_tokens_per_s < 1e6, JSON.stringify(pod("fast")));
console.log(`ok the smarter cheaters caught: ${caught.join('; ')}`);
assert.equal(net.hub.requests.total, 50);
assert.equal(net.hub.requests.failed, 0);
assert.ok(net.hub.verification.checked >= 3);
console.log(`ok the cheater failed ${cheater.failed_verifications} check(s) (of ${cheater.checked}), none of its answers sent;`,
  `${net.hub.verification.checked} checks, ${net.hub.verification.failed} failed, ${net.hub.verification.errors} errors,`,
  `${net.hub.verification.disagreements} disagreements`);

// The books: consistent, summing to zero, and the client paid what it used.
// The ledger is the operator's (issue 28).
const books = await (await fetch(hub + '/api/ledger',
  { headers: { Authorization: `Bearer ${process.env.HERD_OPERATOR_KEY}` } })).json();
assert.deepEqual(books.problems, []);
assert.equal(books.sum, 0);
const served = net.pods.reduce((n, p) => n + p.tokens_served, 0);
const told = usages.filter(Boolean);
const toldCompletion = told.reduce((n, u) => n + u.completion_tokens, 0);
assert.ok(served >= toldCompletion);
const clientAccount = Object.keys(books.balances).find((a) => a.startsWith('client:'));
const spent = grant - books.balances[clientAccount];
// Every request's price: the prompt and completion tokens the pods reported.
const earned = Object.entries(books.balances)
  .filter(([a]) => !a.startsWith('client:') && a !== 'issuer')
  .reduce((n, [, b]) => n + b, 0);
assert.equal(spent, earned, 'what the client paid went to pods, the fee and withheld');
const toldSpent = told.reduce((n, u) => n + u.prompt_tokens * prices.prompt +
  u.completion_tokens * prices.completion, 0);
assert.ok(spent >= toldSpent, `spent ${spent} < ${toldSpent}`);
// ... and exactly the tokens the hub counted from the pods' answers.
assert.equal(spent, net.hub.requests.prompt_tokens * prices.prompt +
  net.hub.requests.tokens * prices.completion);
assert.equal(served, net.hub.requests.tokens);
assert.equal(books.balances.withheld, 0, 'the cheater was never paid to begin with');
console.log(`ok the ledger sums to zero; the client spent ${spent}`);
