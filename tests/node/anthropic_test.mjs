// herd serve's Anthropic Messages API through the official @anthropic-ai/sdk client: messages
// whole and streamed, stop sequences, max_tokens, tools forced and fed back, JSON output,
// thinking, count_tokens, and errors as the client reports them. Run by
// tests/serve_node_test.sh (the server has --api-key test-key).
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';

const baseURL = process.env.HERD_URL;
const client = new Anthropic({ baseURL, apiKey: 'test-key', maxRetries: 0 });
const listed = await fetch(baseURL + '/v1/models', { headers: { 'x-api-key': 'test-key' } });
const model = (await listed.json()).data[0].id;
let checks = 0;
const check = async (name, fn) => {
  await fn();
  checks++;
  console.log('ok', name);
};
const textOf = (m) => m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');

const system = 'Be brief.';
const messages = [{ role: 'user', content: 'Hello!' }];
const base = { model, system, messages, max_tokens: 20, temperature: 0 };

let whole;
await check('a message', async () => {
  whole = await client.messages.create(base);
  assert.equal(whole.type, 'message');
  assert.equal(whole.role, 'assistant');
  assert.match(whole.id, /^msg_/);
  assert.equal(whole.model, model);
  assert.ok(['end_turn', 'max_tokens'].includes(whole.stop_reason), whole.stop_reason);
  assert.equal(whole.stop_sequence, null);
  assert.ok(whole.usage.input_tokens > 5);
  assert.ok(whole.usage.output_tokens > 0 && whole.usage.output_tokens <= 20);
  assert.ok(textOf(whole).length > 4, JSON.stringify(whole.content));
  // The system prompt reaches the template.
  const bare = await client.messages.create({ ...base, system: undefined });
  assert.ok(whole.usage.input_tokens > bare.usage.input_tokens);
});

await check('streamed events make the same message', async () => {
  const stream = await client.messages.create({ ...base, stream: true });
  const types = [];
  let text = '', stop = null, usage = null, start = null;
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'message_start') start = e.message;
    if (e.type === 'content_block_delta') {
      assert.equal(e.delta.type, 'text_delta');
      assert.equal(e.index, 0);
      text += e.delta.text;
    }
    if (e.type === 'message_delta') { stop = e.delta.stop_reason; usage = e.usage; }
  }
  assert.equal(types[0], 'message_start');
  assert.equal(types[1], 'content_block_start');
  assert.deepEqual(types.slice(-3), ['content_block_stop', 'message_delta', 'message_stop']);
  assert.equal(start.usage.input_tokens, whole.usage.input_tokens);
  assert.equal(text, textOf(whole));
  assert.equal(stop, whole.stop_reason);
  assert.equal(usage.output_tokens, whole.usage.output_tokens);
  // The client's stream helper puts the message together.
  const final = await client.messages.stream(base).finalMessage();
  assert.deepEqual(final.content, whole.content);
  assert.equal(final.stop_reason, whole.stop_reason);
});

await check('stop sequences and max_tokens', async () => {
  const stop = textOf(whole).slice(2, 4);
  const r = await client.messages.create({ ...base, stop_sequences: [stop] });
  assert.equal(r.stop_reason, 'stop_sequence');
  assert.equal(r.stop_sequence, stop);
  assert.ok(!textOf(r).includes(stop));
  assert.ok(textOf(whole).startsWith(textOf(r)));
  const s = await client.messages.stream({ ...base, stop_sequences: ['never here', stop] }).finalMessage();
  assert.equal(s.stop_reason, 'stop_sequence');
  assert.equal(s.stop_sequence, stop);
  assert.equal(textOf(s), textOf(r));
  const short = await client.messages.create({ ...base, max_tokens: 2 });
  assert.ok(short.usage.output_tokens <= 2);
  assert.equal(short.stop_reason, short.usage.output_tokens === 2 ? 'max_tokens' : 'end_turn');
});

await check('multi-turn, and a final assistant message continued', async () => {
  const turns = [...messages, { role: 'assistant', content: textOf(whole) }, { role: 'user', content: 'And then?' }];
  const r = await client.messages.create({ ...base, messages: turns, max_tokens: 4 });
  assert.ok(r.usage.input_tokens > whole.usage.input_tokens + 3);
  // Prefill: the reply goes on from the assistant's text, which it does not repeat.
  const head = textOf(whole).slice(0, 3);
  const prefilled = [...messages, { role: 'assistant', content: [{ type: 'text', text: head }] }];
  const p = await client.messages.create({ ...base, messages: prefilled });
  assert.equal(p.type, 'message');
  const counted = await client.messages.countTokens({ model, system, messages: prefilled });
  assert.equal(p.usage.input_tokens, counted.input_tokens);
  assert.ok(p.usage.input_tokens > whole.usage.input_tokens);
});

const tools = ['get_weather', 'get_time'].map((name) => ({
  name, description: `The ${name.slice(4)} of a city`,
  // An enum keeps a greedy call short (a random model's free string would run to max_tokens).
  input_schema: {
    type: 'object', additionalProperties: false, required: ['city'],
    properties: { city: { enum: ['Oslo', 'Paris'] } },
  },
}));

await check('forced tool use, streamed and whole, and its result fed back', async () => {
  for (const tool_choice of [{ type: 'any' }, { type: 'tool', name: 'get_time' }]) {
    const request = { ...base, tools, tool_choice, max_tokens: 40 };
    const r = await client.messages.create(request);
    assert.equal(r.stop_reason, 'tool_use');
    const uses = r.content.filter((b) => b.type === 'tool_use');
    assert.ok(uses.length >= 1, JSON.stringify(r.content));
    assert.match(uses[0].id, /^toolu_/);
    assert.ok(['get_weather', 'get_time'].includes(uses[0].name));
    if (tool_choice.type === 'tool') assert.equal(uses[0].name, 'get_time');
    assert.equal(typeof uses[0].input, 'object');
    assert.ok(['Oslo', 'Paris'].includes(uses[0].input.city), JSON.stringify(uses[0]));
    // input_json_delta pieces add up to the same input.
    const streamed = await client.messages.stream(request).finalMessage();
    assert.equal(streamed.stop_reason, 'tool_use');
    assert.deepEqual(streamed.content.map((b) => ({ ...b, id: b.id?.replace(/^toolu_\d+_/, '') })),
      r.content.map((b) => ({ ...b, id: b.id?.replace(/^toolu_\d+_/, '') })));
    const followUp = await client.messages.create({
      ...base, tools, max_tokens: 4,
      messages: [...messages, { role: 'assistant', content: r.content },
        { role: 'user', content: uses.map((u) => ({ type: 'tool_result', tool_use_id: u.id, content: '3 C' })) }],
    });
    assert.equal(followUp.type, 'message');
    assert.ok(followUp.usage.input_tokens > r.usage.input_tokens);
  }
  // The tools reach the template.
  const auto = await client.messages.create({ ...base, tools, max_tokens: 4 });
  assert.ok(auto.usage.input_tokens > whole.usage.input_tokens + 20);
});

await check('output_config.format holds the reply to a JSON schema', async () => {
  const schema = {
    type: 'object', additionalProperties: false, required: ['city', 'days'],
    properties: { city: { enum: ['Oslo', 'Paris'] }, days: { type: 'integer' } },
  };
  const r = await client.messages.create({ ...base, max_tokens: 200, output_config: { format: { type: 'json_schema', schema } } });
  assert.equal(r.stop_reason, 'end_turn');
  const j = JSON.parse(textOf(r));
  assert.ok(['Oslo', 'Paris'].includes(j.city) && Number.isInteger(j.days), textOf(r));
});

await check('thinking and count_tokens', async () => {
  const count = await client.messages.countTokens({ model, system, messages });
  assert.equal(count.input_tokens, whole.usage.input_tokens);
  // thinking disabled closes an empty <think> block in the prompt (the template's enable_thinking).
  const off = await client.messages.countTokens({ model, system, messages, thinking: { type: 'disabled' } });
  const on = await client.messages.countTokens({ model, system, messages, thinking: { type: 'enabled', budget_tokens: 1024 } });
  assert.equal(on.input_tokens, count.input_tokens);
  assert.ok(off.input_tokens > on.input_tokens);
  const r = await client.messages.create({ ...base, max_tokens: 40, thinking: { type: 'enabled', budget_tokens: 1024 } });
  assert.ok(r.content.every((b) => ['thinking', 'text'].includes(b.type)));
});

const failure = async (fn) => {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof Anthropic.APIError, String(e));
    return e;
  }
  assert.fail('no error');
};

await check('errors', async () => {
  let e = await failure(() => client.messages.create({ ...base, model: 'no-such-model' }));
  assert.ok(e instanceof Anthropic.NotFoundError);
  assert.equal(e.error.type, 'error');
  assert.equal(e.error.error.type, 'not_found_error');
  e = await failure(() => client.messages.create({ ...base, temperature: 'hot' }));
  assert.ok(e instanceof Anthropic.BadRequestError);
  assert.equal(e.error.error.type, 'invalid_request_error');
  assert.match(e.error.error.message, /temperature/);
  e = await failure(() => client.messages.create({ ...base, max_tokens: undefined }));
  assert.equal(e.status, 400);
  assert.match(e.error.error.message, /max_tokens/);
  e = await failure(() => client.messages.create({
    ...base, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AA==' } }] }],
  }));
  assert.equal(e.status, 400);
  assert.match(e.error.error.message, /herd has no vision/);
  e = await failure(() => client.messages.create({ ...base, messages: [{ role: 'user', content: 'word '.repeat(5000) }] }));
  assert.equal(e.status, 400);
  e = await failure(() => new Anthropic({ baseURL, apiKey: 'wrong', maxRetries: 0 }).messages.create(base));
  assert.ok(e instanceof Anthropic.AuthenticationError);
  assert.equal(e.error.error.type, 'authentication_error');
  // The client sends its key as a Bearer token; x-api-key (Anthropic's header) works too.
  const bearer = new Anthropic({ baseURL, apiKey: null, authToken: 'test-key', maxRetries: 0 });
  assert.equal((await bearer.messages.create({ ...base, max_tokens: 2 })).type, 'message');
  const headers = { 'x-api-key': 'test-key', 'anthropic-version': '2023-06-01' };
  const body = JSON.stringify({ ...base, max_tokens: 2 });
  let raw = await fetch(baseURL + '/v1/messages', { method: 'POST', headers, body });
  assert.equal(raw.status, 200);
  assert.equal((await raw.json()).type, 'message');
  raw = await fetch(baseURL + '/v1/messages', { method: 'POST', headers: { 'x-api-key': 'nope' }, body });
  assert.equal(raw.status, 401);
  assert.deepEqual(Object.keys(await raw.json()).sort(), ['error', 'type']);
});

await check('a stream aborted by the client frees its slot', async () => {
  const stream = client.messages.stream({ ...base, max_tokens: 3000 });
  let n = 0;
  stream.on('text', () => { if (++n === 5) stream.abort(); });
  await stream.done().catch(() => {});
  let health;
  for (let i = 0; i < 100; i++) {
    health = await (await fetch(baseURL + '/health')).json();
    if (health.running === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(health.running, 0);
});

console.log(`anthropic_test: ${checks} checks passed`);
