// herd serve's Responses API (POST /v1/responses) through the official openai client: whole
// and streamed responses, instructions, max_output_tokens, stop strings, conversations (items
// and previous_response_id), stored responses (retrieved, their input items listed, deleted),
// forced tool calls and their results, JSON-schema output, and errors as the client reports
// them. Run by tests/serve_node_test.sh.
import assert from 'node:assert/strict';
// Node.js's own fetch (see openai_test.mjs).
import 'openai/shims/web';
import OpenAI from 'openai';

const baseURL = process.env.HERD_URL + '/v1';
const client = new OpenAI({ baseURL, apiKey: 'test-key', maxRetries: 0 });
const model = (await client.models.list()).data[0].id;
let checks = 0;
const check = async (name, fn) => {
  await fn();
  checks++;
  console.log('ok', name);
};

const input = 'Hello!';
const instructions = 'Be brief.';
// The text of a response's message items (what the client's output_text joins).
const messageText = (r) => r.output.filter((i) => i.type === 'message')
  .flatMap((i) => i.content.map((c) => c.text)).join('');
// Events of a streamed response, checked for their order and sequence numbers.
const collect = async (stream) => {
  const events = [];
  for await (const e of stream) {
    assert.equal(e.sequence_number, events.length);
    events.push(e);
  }
  assert.equal(events[0].type, 'response.created');
  assert.equal(events[1].type, 'response.in_progress');
  assert.equal(events[0].response.status, 'in_progress');
  return events;
};

const status = async (fn) => {
  try {
    await fn();
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIError, String(e));
    return e;
  }
  assert.fail('no error');
};

let whole;
await check('response', async () => {
  whole = await client.responses.create({ model, input, instructions, max_output_tokens: 20, temperature: 0 });
  assert.equal(whole.object, 'response');
  assert.match(whole.id, /^resp_/);
  assert.ok(['completed', 'incomplete'].includes(whole.status));
  assert.equal(whole.model, model);
  assert.equal(whole.instructions, instructions);
  assert.equal(whole.max_output_tokens, 20);
  assert.equal(whole.temperature, 0);
  const message = whole.output.find((i) => i.type === 'message');
  assert.equal(message.role, 'assistant');
  assert.equal(message.content[0].type, 'output_text');
  assert.equal(typeof whole.output_text, 'string');  // the client joins the output_text parts
  assert.equal(whole.output_text, messageText(whole));
  assert.equal(whole.usage.total_tokens, whole.usage.input_tokens + whole.usage.output_tokens);
  // The instructions are a system message the template renders.
  const plain = await client.responses.create({ model, input, max_output_tokens: 1, temperature: 0 });
  assert.ok(whole.usage.input_tokens > plain.usage.input_tokens);
});

await check('streaming equals the whole response', async () => {
  const events = await collect(await client.responses.create({
    model, input, instructions, max_output_tokens: 20, temperature: 0, stream: true,
  }));
  const last = events.at(-1);
  assert.equal(last.type, whole.status === 'completed' ? 'response.completed' : 'response.incomplete');
  const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
  assert.equal(text, whole.output_text);
  assert.equal(messageText(last.response), whole.output_text);
  assert.deepEqual(last.response.output.map((i) => i.type), whole.output.map((i) => i.type));
  assert.equal(last.response.usage.output_tokens, whole.usage.output_tokens);
  const done = events.filter((e) => e.type === 'response.output_item.done').map((e) => e.item);
  assert.deepEqual(done, last.response.output);
});

await check('max_output_tokens makes an incomplete response', async () => {
  const r = await client.responses.create({ model, input, max_output_tokens: 3, temperature: 0, ignore_eos: true });
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.usage.output_tokens, 3);
});

await check('stop strings (herd extension) are never returned', async () => {
  const stop = whole.output_text.slice(2, 4);
  assert.ok(stop.length > 0);
  const r = await client.responses.create({ model, input, instructions, max_output_tokens: 20, temperature: 0, stop: [stop] });
  assert.equal(r.status, 'completed');
  assert.ok(!r.output_text.includes(stop));
  assert.ok(whole.output_text.startsWith(r.output_text));
  // The client's streaming helper (which takes a completed response only) assembles the same.
  const helper = client.responses.stream({ model, input, instructions, max_output_tokens: 20, temperature: 0, stop: [stop] });
  let deltas = '';
  helper.on('response.output_text.delta', (e) => { deltas += e.delta; });
  const final = await helper.finalResponse();
  assert.equal(deltas, r.output_text);
  assert.equal(messageText(final), r.output_text);
});

await check('conversations: items, or previous_response_id', async () => {
  const r1 = await client.responses.create({ model, input: 'Tell me about herds.', max_output_tokens: 16, temperature: 0 });
  const r2 = await client.responses.create({
    model, previous_response_id: r1.id, input: [{ role: 'user', content: 'And then?' }], max_output_tokens: 8, temperature: 0,
  });
  assert.equal(r2.previous_response_id, r1.id);
  // The first turn is in the prompt, and comes from the prefix cache.
  assert.ok(r2.usage.input_tokens > r1.usage.input_tokens + r1.usage.output_tokens - 2);
  assert.ok(r2.usage.input_tokens_details.cached_tokens >= r1.usage.input_tokens);
  // The same conversation sent as items reads the same.
  const r3 = await client.responses.create({
    model, max_output_tokens: 8, temperature: 0,
    input: [{ role: 'user', content: 'Tell me about herds.' }, ...r1.output, { role: 'user', content: 'And then?' }],
  });
  assert.equal(r3.usage.input_tokens, r2.usage.input_tokens);
  assert.equal(r3.output_text, r2.output_text);
  // A chain of three goes on from the second.
  const r4 = await client.responses.create({ model, previous_response_id: r2.id, input: 'More?', max_output_tokens: 2 });
  assert.ok(r4.usage.input_tokens > r2.usage.input_tokens);
});

await check('stored responses: retrieve, input items, delete', async () => {
  const withoutOutputText = ({ output_text, ...rest }) => rest;  // the client adds it on create
  const r1 = await client.responses.create({ model, input: 'Tell me about herds.', instructions, max_output_tokens: 6, temperature: 0 });
  assert.deepEqual(await client.responses.retrieve(r1.id), withoutOutputText(r1));
  // A streamed one is kept as its last event held it.
  const events = await collect(await client.responses.create({ model, input, max_output_tokens: 4, temperature: 0, stream: true }));
  const streamed = events.at(-1).response;
  assert.deepEqual(await client.responses.retrieve(streamed.id), streamed);
  // The input items: the conversation it went on from, then its own, newest first.
  const r2 = await client.responses.create({
    model, previous_response_id: r1.id, input: [{ role: 'user', content: 'And then?' }], max_output_tokens: 2,
  });
  const page = await client.responses.inputItems.list(r2.id);
  assert.equal(page.has_more, false);
  const newestFirst = page.data;
  assert.equal(newestFirst.length, 2 + r1.output.length);
  assert.equal(newestFirst[0].type, 'message');
  assert.equal(newestFirst[0].content, 'And then?');
  assert.equal(newestFirst.at(-1).content, 'Tell me about herds.');
  assert.deepEqual(newestFirst.slice(1, -1), [...r1.output].reverse());
  for (const item of newestFirst) assert.equal(typeof item.id, 'string');
  // Oldest first, a page of one item at a time: the client follows `after` to the end.
  const ids = [];
  for await (const item of client.responses.inputItems.list(r2.id, { order: 'asc', limit: 1 })) ids.push(item.id);
  assert.deepEqual(ids, newestFirst.map((i) => i.id).reverse());
  let e = await status(() => client.responses.inputItems.list(r2.id, { limit: 101 }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'limit');
  e = await status(() => client.responses.inputItems.list(r2.id, { order: 'sideways' }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'order');
  // Deleted, it is gone, and cannot be continued.
  await client.responses.del(r2.id);
  for (const fn of [() => client.responses.retrieve(r2.id), () => client.responses.del(r2.id),
    () => client.responses.inputItems.list(r2.id)]) {
    e = await status(fn);
    assert.equal(e.status, 404);
    assert.ok(e instanceof OpenAI.NotFoundError);
  }
  e = await status(() => client.responses.create({ model, input, previous_response_id: r2.id }));
  assert.equal(e.status, 404);
  assert.equal((await client.responses.retrieve(r1.id)).id, r1.id);  // the one before stays
  // store: false is not kept; the key is asked for as on the other routes.
  const unstored = await client.responses.create({ model, input, max_output_tokens: 2, store: false });
  e = await status(() => client.responses.retrieve(unstored.id));
  assert.equal(e.status, 404);
  const noKey = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  for (const fn of [() => noKey.responses.retrieve(r1.id), () => noKey.responses.del(r1.id),
    () => noKey.responses.inputItems.list(r1.id)]) {
    e = await status(fn);
    assert.equal(e.status, 401);
  }
  assert.equal((await client.responses.retrieve(r1.id)).id, r1.id);
});

const tools = ['get_weather', 'get_time'].map((name) => ({
  type: 'function', name, description: `${name} of a city`,
  parameters: { type: 'object', properties: { city: { type: 'string' } } }, strict: true,
}));

await check('forced tool calls, streamed and whole, and their results fed back', async () => {
  for (const tool_choice of ['required', { type: 'function', name: 'get_time' }]) {
    const request = { model, input: 'Weather in Oslo?', tools, tool_choice, max_output_tokens: 60, temperature: 0.8, seed: 7 };
    const r = await client.responses.create(request);
    const calls = r.output.filter((i) => i.type === 'function_call');
    assert.ok(calls.length >= 1, JSON.stringify(r.output));
    assert.ok(['get_weather', 'get_time'].includes(calls[0].name));
    if (tool_choice !== 'required') assert.equal(calls[0].name, 'get_time');
    // The grammar holds the arguments to the parameters (a random model's string may run
    // to max_output_tokens).
    if (r.status === 'completed') assert.equal(typeof JSON.parse(calls[0].arguments), 'object');
    assert.match(calls[0].call_id, /^call_/);
    const events = await collect(await client.responses.create({ ...request, stream: true }));
    const args = events.filter((e) => e.type === 'response.function_call_arguments.delta').map((e) => e.delta).join('');
    const streamed = events.at(-1).response.output.filter((i) => i.type === 'function_call');
    assert.deepEqual(streamed.map((c) => [c.name, c.arguments]), calls.map((c) => [c.name, c.arguments]));
    assert.equal(args, streamed.map((c) => c.arguments).join(''));
    // The call's result, fed back as items ...
    const outputs = calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: '{"temp": 3}' }));
    const followUp = await client.responses.create({
      model, tools, max_output_tokens: 4, temperature: 0, input: [{ role: 'user', content: 'Weather in Oslo?' }, ...r.output, ...outputs],
    });
    assert.equal(followUp.object, 'response');
    // ... or after the stored response.
    const chained = await client.responses.create({
      model, tools, max_output_tokens: 4, temperature: 0, previous_response_id: r.id, input: outputs,
    });
    assert.equal(chained.usage.input_tokens, followUp.usage.input_tokens);
  }
});

await check('text.format json_schema', async () => {
  const schema = {
    type: 'object', additionalProperties: false, required: ['city', 'days'],
    properties: { city: { enum: ['Oslo', 'Paris'] }, days: { type: 'integer' } },
  };
  const r = await client.responses.create({
    model, input, max_output_tokens: 200, seed: 3,
    text: { format: { type: 'json_schema', name: 'forecast', strict: true, schema } },
  });
  assert.equal(r.status, 'completed');
  const j = JSON.parse(r.output_text);
  assert.deepEqual(Object.keys(j).sort(), ['city', 'days']);
  assert.ok(['Oslo', 'Paris'].includes(j.city) && Number.isInteger(j.days));
  assert.equal(r.text.format.name, 'forecast');
});

await check('errors', async () => {
  let e = await status(() => client.responses.create({ model: 'no-such-model', input }));
  assert.equal(e.status, 404);
  assert.equal(e.param, 'model');
  e = await status(() => client.responses.create({ model, input, temperature: 'hot' }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'temperature');
  e = await status(() => client.responses.create({ model }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'input');
  e = await status(() => client.responses.create({ model, input, tools: [{ type: 'web_search_preview' }] }));
  assert.equal(e.status, 400);
  assert.equal(e.param, 'tools[0].type');
  e = await status(() => client.responses.create({
    model, input, text: { format: { type: 'json_schema', name: 'x', schema: { type: 'string', pattern: 'a+' } } },
  }));
  assert.equal(e.status, 400);
  assert.match(e.message, /pattern/);
  e = await status(() => client.responses.create({ model, input: 'word '.repeat(5000) }));
  assert.equal(e.status, 400);
  assert.equal(e.code, 'context_length_exceeded');
  assert.equal(e.param, 'input');
  // A response made with store: false cannot be continued.
  const unstored = await client.responses.create({ model, input, max_output_tokens: 2, store: false });
  e = await status(() => client.responses.create({ model, input, previous_response_id: unstored.id }));
  assert.equal(e.status, 404);
  assert.equal(e.param, 'previous_response_id');
  const noKey = new OpenAI({ baseURL, apiKey: 'wrong', maxRetries: 0 });
  e = await status(() => noKey.responses.create({ model, input }));
  assert.equal(e.status, 401);
  assert.ok(e instanceof OpenAI.AuthenticationError);
});

console.log(`responses_test: ${checks} checks passed`);
