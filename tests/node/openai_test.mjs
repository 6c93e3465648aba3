// herd serve through the official openai client: chat, streaming, tools, completions,
// and errors as the client reports them. Run by tests/serve_node_test.sh.
import assert from 'node:assert/strict';
// Node.js's own fetch, not the client's default node-fetch 2, which on Node.js 18 (Debian 12's)
// fails a stream on a reused keep-alive connection with 'Premature close' (node-fetch#1767).
import 'openai/shims/web';
import OpenAI from 'openai';

const baseURL = process.env.HERD_URL + '/v1';
const client = new OpenAI({ baseURL, apiKey: 'test-key', maxRetries: 0 });
const models = await client.models.list();
const model = models.data[0].id;
let checks = 0;
const check = async (name, fn) => {
  await fn();
  checks++;
  console.log('ok', name);
};

const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello!' }];

let whole;
await check('chat completion', async () => {
  whole = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0 });
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(typeof whole.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
  assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);
});

await check('streaming equals the whole reply', async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 20, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '', finish = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const c = chunk.choices[0];
    if (!c) continue;
    text += c.delta.content ?? '';
    finish = c.finish_reason ?? finish;
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

await check('response_format json_schema', async () => {
  const schema = {
    type: 'object', additionalProperties: false, required: ['city', 'days', 'metric'],
    properties: { city: { enum: ['Oslo', 'Paris'] }, days: { type: 'integer' }, metric: { type: 'boolean' } },
  };
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 200, seed: 3,
    response_format: { type: 'json_schema', json_schema: { name: 'forecast', strict: true, schema } },
  });
  assert.equal(r.choices[0].finish_reason, 'stop');
  const j = JSON.parse(r.choices[0].message.content);
  assert.deepEqual(Object.keys(j).sort(), ['city', 'days', 'metric']);
  assert.ok(['Oslo', 'Paris'].includes(j.city) && Number.isInteger(j.days) && typeof j.metric === 'boolean');
  await assert.rejects(client.chat.completions.create({
    model, messages, max_tokens: 5,
    response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', pattern: 'a+' } } },
  }), (e) => e.status === 400 && /pattern/.test(e.message));
});

await check('seeded sampling repeats; logprobs', async () => {
  const ask = () => client.chat.completions.create({
    model, messages, max_tokens: 12, temperature: 0.9, top_p: 0.95, top_k: 50, seed: 1234,
    presence_penalty: 0.3, frequency_penalty: 0.2, logprobs: true, top_logprobs: 3,
  });
  const a = await ask(), b = await ask();
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const lp = a.choices[0].logprobs.content;
  assert.equal(lp.length, a.usage.completion_tokens);
  for (const t of lp) {
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[2].logprob);
  }
});

await check('stop strings are never returned', async () => {
  const stop = whole.choices[0].message.content.slice(2, 4);
  assert.ok(stop.length > 0);
  const r = await client.chat.completions.create({ model, messages, max_tokens: 20, temperature: 0, stop: [stop] });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(!r.choices[0].message.content.includes(stop));
  assert.ok(whole.choices[0].message.content.startsWith(r.choices[0].message.content));
});

await check('tools reach the template', async () => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather', description: 'Weather of a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  }];
  const plain = await client.chat.completions.create({ model, messages, max_tokens: 4, temperature: 0 });
  const withTools = await client.chat.completions.create({ model, messages, tools, tool_choice: 'auto', max_tokens: 4, temperature: 0 });
  // The template writes the tool's schema into the prompt.
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens + 20);
  assert.ok(['stop', 'length', 'tool_calls'].includes(withTools.choices[0].finish_reason));
  // A conversation that already holds a tool call and its result renders too.
  const followUp = await client.chat.completions.create({
    model, tools, max_tokens: 4, temperature: 0,
    messages: [...messages,
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Oslo"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 3}' }],
  });
  assert.equal(followUp.object, 'chat.completion');
});

await check('forced tool calls: streamed pieces add up to the whole reply', async () => {
  const tools = ['get_weather', 'get_time'].map((name) => ({
    type: 'function',
    function: { name, parameters: { type: 'object', properties: { city: { type: 'string' } } } },
  }));
  for (const tool_choice of ['required', { type: 'function', function: { name: 'get_time' } }]) {
    const request = { model, messages, tools, tool_choice, max_tokens: 40, temperature: 0.8, seed: 7 };
    const whole = await client.chat.completions.create(request);
    const calls = whole.choices[0].message.tool_calls;
    assert.equal(whole.choices[0].finish_reason, 'tool_calls');
    assert.ok(calls.length >= 1);
    assert.ok(['get_weather', 'get_time'].includes(calls[0].function.name));
    if (tool_choice !== 'required') assert.equal(calls[0].function.name, 'get_time');
    // The client's streaming helper puts the call back together from its pieces.
    const stream = client.beta.chat.completions.stream({ ...request, stream: true });
    let pieces = 0;
    stream.on('chunk', (chunk) => { pieces += chunk.choices[0]?.delta?.tool_calls?.length ?? 0; });
    const assembled = await stream.finalChatCompletion();
    const streamed = assembled.choices[0].message.tool_calls;
    assert.equal(assembled.choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(streamed.map((c) => [c.id.replace(/^call_\d+_/, ''), c.type, c.function.name, c.function.arguments]),
      calls.map((c) => [c.id.replace(/^call_\d+_/, ''), c.type, c.function.name, c.function.arguments]));
    assert.equal(assembled.choices[0].message.content ?? null, whole.choices[0].message.content);
    assert.ok(pieces >= 1);
  }
});

await check('multi-turn reuses the cached prefix', async () => {
  const turn1 = [{ role: 'user', content: 'Tell me about herds.' }];
  const r1 = await client.chat.completions.create({ model, messages: turn1, max_tokens: 16, temperature: 0 });
  const turn2 = [...turn1, { role: 'assistant', content: r1.choices[0].message.content }, { role: 'user', content: 'And then?' }];
  const r2 = await client.chat.completions.create({ model, messages: turn2, max_tokens: 4, temperature: 0 });
  // The history is not prefilled again: at least the first turn's prompt comes from the cache.
  assert.ok(r2.usage.prompt_tokens_details.cached_tokens >= r1.usage.prompt_tokens,
    `cached ${r2.usage.prompt_tokens_details.cached_tokens} of ${r2.usage.prompt_tokens}`);
});

await check('completions', async () => {
  const r = await client.completions.create({ model, prompt: 'The herd runs', max_tokens: 8, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens <= 8, true);
  const s = await client.completions.create({ model, prompt: 'The herd runs', max_tokens: 8, temperature: 0, stream: true });
  let text = '';
  for await (const chunk of s) text += chunk.choices[0]?.text ?? '';
  assert.equal(text, r.choices[0].text);
});

const status = async (fn) => {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, String(e));
    return e;
  }
  assert.fail('no error');
};

await check('errors', async () => {
  let e = await status(() => client.chat.completions.create({ model: 'no-such-model', messages }));
  assert.equal(e.status, 404);
  assert.equal(e.param, 'model');
  e = await status(() => client.chat.completions.create({ model, messages, temperature: 'hot' }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'temperature');
  e = await status(() => client.chat.completions.create({ model, messages: [] }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'messages');
  const noKey = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  e = await status(() => noKey.chat.completions.create({ model, messages }));
  assert.equal(e.status, 401);
  assert.ok(e instanceof OpenAI.AuthenticationError);
  e = await status(() => client.completions.create({ model, prompt: 'word '.repeat(5000) }));
  assert.equal(e.status, 400);
  assert.equal(e.code, 'context_length_exceeded');
});

await check('a stream aborted by the client frees its slot', async () => {
  const controller = new AbortController();
  const stream = await client.chat.completions.create(
    { model, messages, max_tokens: 3000, ignore_eos: true, stream: true }, { signal: controller.signal });
  let n = 0;
  try {
    for await (const chunk of stream) {
      if (++n === 5) controller.abort();
    }
  } catch (e) { /* the abort */ }
  let health;
  for (let i = 0; i < 100; i++) {
    health = await (await fetch(process.env.HERD_URL + '/health')).json();
    if (health.running === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(health.running, 0);
});

console.log(`openai_test: ${checks} checks passed`);
