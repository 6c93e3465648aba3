// herd serve through the official ollama client: /api/chat and /api/generate streamed and
// not, tools, JSON schemas, the model listing, and errors as the client reports them. Run by
// tests/serve_node_test.sh (the server has --api-key test-key).
import assert from 'node:assert/strict';
import { Ollama } from 'ollama';

const host = process.env.HERD_URL;
const ollama = new Ollama({ host, headers: { Authorization: 'Bearer test-key' } });
let checks = 0;
const check = async (name, fn) => {
  await fn();
  checks++;
  console.log('ok', name);
};

let model;
await check('list, ps, show, version', async () => {
  const list = await ollama.list();
  assert.equal(list.models.length, 1);
  const m = list.models[0];
  model = m.name;
  assert.ok(model.endsWith(':latest'), model);
  assert.equal(m.model, model);
  assert.equal(m.details.format, 'gguf');
  assert.equal(m.details.family, 'qwen3');
  assert.equal(m.details.quantization_level, 'Q4_0');
  assert.match(m.details.parameter_size, /^[\d.]+[KMB]$/);
  assert.ok(m.size > 0);
  assert.match(m.digest, /^[0-9a-f]{64}$/);
  assert.ok(!Number.isNaN(Date.parse(m.modified_at)));
  const ps = await ollama.ps();
  assert.equal(ps.models[0].name, model);
  assert.ok(ps.models[0].context_length > 0);
  const show = await ollama.show({ model });
  assert.ok(show.capabilities.includes('completion'));
  assert.ok(show.capabilities.includes('tools'));
  assert.equal(show.model_info['general.architecture'], 'qwen3');
  assert.ok(show.model_info['general.parameter_count'] > 0);
  assert.ok(show.template.length > 0);
  assert.equal(typeof (await ollama.version()).version, 'string');
});

const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello!' }];
const options = { num_predict: 20, temperature: 0 };

let whole;
await check('chat', async () => {
  whole = await ollama.chat({ model, messages, options, keep_alive: '5m' });
  assert.equal(whole.done, true);
  assert.equal(whole.message.role, 'assistant');
  assert.equal(typeof whole.message.content, 'string');
  assert.ok(['stop', 'length'].includes(whole.done_reason));
  assert.ok(whole.eval_count > 0 && whole.eval_count <= 20);
  assert.ok(whole.prompt_eval_count > 5);
  assert.ok(whole.total_duration >= whole.eval_duration && whole.eval_duration > 0);
  assert.ok(whole.prompt_eval_duration > 0);
  assert.equal(whole.load_duration, 0);
  // The name without its tag is the same model.
  const bare = await ollama.chat({ model: model.replace(/:latest$/, ''), messages, options });
  assert.equal(bare.message.content, whole.message.content);
});

await check('streamed chat equals the whole reply', async () => {
  const stream = await ollama.chat({ model, messages, options, stream: true });
  let text = '', last = null, parts = 0;
  for await (const part of stream) {
    assert.equal(last?.done ?? false, false);
    text += part.message.content;
    parts++;
    last = part;
  }
  assert.ok(parts >= 2);  // the text, then the final object
  assert.equal(text, whole.message.content);
  assert.equal(last.done, true);
  assert.equal(last.done_reason, whole.done_reason);
  assert.equal(last.eval_count, whole.eval_count);
});

await check('generate, streamed and not, raw, and the load idiom', async () => {
  const g = await ollama.generate({ model, prompt: 'Hello!', system: 'Be brief.', options });
  assert.equal(g.done, true);
  // Rendered through the chat template as the chat's messages are.
  assert.equal(g.response, whole.message.content);
  assert.equal(g.prompt_eval_count, whole.prompt_eval_count);
  let text = '';
  for await (const part of await ollama.generate({ model, prompt: 'Hello!', system: 'Be brief.', options, stream: true })) {
    text += part.response;
  }
  assert.equal(text, g.response);
  // Raw: the prompt as is, without the template's turns around it.
  const raw = await ollama.generate({ model, prompt: 'Hello!', raw: true, options: { num_predict: 8, temperature: 0 } });
  const templated = await ollama.generate({ model, prompt: 'Hello!', options: { num_predict: 8, temperature: 0 } });
  assert.ok(raw.prompt_eval_count + 4 < templated.prompt_eval_count);
  assert.ok(raw.eval_count <= 8);
  const load = await ollama.generate({ model, prompt: '' });
  assert.equal(load.done, true);
  assert.equal(load.done_reason, 'load');
  assert.equal((await ollama.chat({ model, messages: [] })).done_reason, 'load');
});

await check('stop strings and num_predict', async () => {
  const stop = whole.message.content.slice(2, 4);
  assert.ok(stop.length > 0);
  const r = await ollama.chat({ model, messages, options: { ...options, stop: [stop] } });
  assert.equal(r.done_reason, 'stop');
  assert.ok(!r.message.content.includes(stop));
  assert.ok(whole.message.content.startsWith(r.message.content));
  const short = await ollama.chat({ model, messages, options: { num_predict: 3, temperature: 0 } });
  assert.ok(whole.eval_count > 3);
  assert.equal(short.eval_count, 3);
  assert.equal(short.done_reason, 'length');
  assert.ok(whole.message.content.startsWith(short.message.content));
});

await check('multi-turn', async () => {
  const turn2 = [...messages, whole.message, { role: 'user', content: 'And then?' }];
  const r = await ollama.chat({ model, messages: turn2, options: { num_predict: 4, temperature: 0 } });
  assert.ok(r.prompt_eval_count > whole.prompt_eval_count + 4);
  assert.ok(r.eval_count > 0);
});

const tools = ['get_weather', 'get_time'].map((name) => ({
  type: 'function',
  function: {
    name, description: 'Of a city',
    parameters: {
      type: 'object', additionalProperties: false, required: ['city'],
      properties: { city: { type: 'string', enum: ['Oslo', 'Paris'] } },
    },
  },
}));

await check('tools: a forced call, streamed and not, and its result fed back', async () => {
  // tool_choice is herd's extension (Ollama's API has none): the random model surely calls.
  const request = { model, messages, tools, tool_choice: 'required', options: { num_predict: 60, temperature: 0.8, seed: 7 } };
  const r = await ollama.chat(request);
  const calls = r.message.tool_calls;
  assert.ok(calls.length >= 1, JSON.stringify(r.message));
  assert.ok(['get_weather', 'get_time'].includes(calls[0].function.name));
  assert.ok(['Oslo', 'Paris'].includes(calls[0].function.arguments.city), JSON.stringify(calls));
  let streamed = [];
  for await (const part of await ollama.chat({ ...request, stream: true })) {
    streamed = streamed.concat(part.message.tool_calls ?? []);
  }
  // The same calls (ids are numbered by request).
  const functions = (list) => list.map((c) => c.function);
  assert.deepEqual(functions(streamed), functions(calls));
  const named = await ollama.chat({ ...request, tool_choice: { type: 'function', function: { name: 'get_time' } } });
  assert.equal(named.message.tool_calls[0].function.name, 'get_time');
  const followUp = await ollama.chat({
    model, tools, options: { num_predict: 4, temperature: 0 },
    messages: [...messages, r.message, { role: 'tool', tool_name: calls[0].function.name, content: '{"temp": 3}' }],
  });
  assert.ok(followUp.prompt_eval_count > r.prompt_eval_count);
  // Tools reach the template: the prompt holds their schemas.
  const plain = await ollama.chat({ model, messages, options: { num_predict: 1 } });
  const withTools = await ollama.chat({ model, messages, tools, options: { num_predict: 1 } });
  assert.ok(withTools.prompt_eval_count > plain.prompt_eval_count + 20);
});

await check('format: a JSON schema and "json"', async () => {
  const format = {
    type: 'object', additionalProperties: false, required: ['city', 'days'],
    properties: { city: { enum: ['Oslo', 'Paris'] }, days: { type: 'integer' } },
  };
  const r = await ollama.chat({ model, messages, format, options: { num_predict: 200, seed: 3 } });
  assert.equal(r.done_reason, 'stop');
  const j = JSON.parse(r.message.content);
  assert.deepEqual(Object.keys(j).sort(), ['city', 'days']);
  assert.ok(['Oslo', 'Paris'].includes(j.city) && Number.isInteger(j.days));
  const g = await ollama.generate({ model, prompt: 'A JSON object:', format: 'json', options: { num_predict: 100, seed: 5 } });
  if (g.done_reason === 'stop') assert.equal(typeof JSON.parse(g.response), 'object');
});

await check('think, and the thinking of a turn sent back', async () => {
  assert.ok((await ollama.show({ model })).capabilities.includes('thinking'));
  const r = await ollama.chat({ model, messages, think: true, options: { num_predict: 8 } });
  assert.equal(r.done, true);
  // Qwen3's template writes the reasoning of the turns after the last user message.
  const turn = (thinking) => [...messages,
    { role: 'assistant', content: '', thinking, tool_calls: [{ function: { name: 'get_time', arguments: { city: 'Oslo' } } }] },
    { role: 'tool', tool_name: 'get_time', content: '12:00' }];
  const without = await ollama.chat({ model, tools, messages: turn(''), options: { num_predict: 1 } });
  const withThinking = await ollama.chat({ model, tools, messages: turn('The user wants the time in Oslo.'), options: { num_predict: 1 } });
  assert.ok(withThinking.prompt_eval_count > without.prompt_eval_count + 5);
});

const fails = async (fn, status, pattern) => {
  try {
    await fn();
  } catch (e) {
    assert.equal(e.name, 'ResponseError', String(e));
    assert.equal(e.status_code, status, e.error);
    assert.match(e.error, pattern);
    return;
  }
  assert.fail('no error');
};

await check('errors', async () => {
  await fails(() => ollama.chat({ model: 'no-such-model', messages }), 404, /no-such-model.*not found/);
  await fails(() => ollama.chat({ model: '', messages }), 400, /'model' is required/);
  await fails(() => ollama.chat({ model, messages, options: { temperature: 'hot' } }), 400, /options.temperature/);
  await fails(() => ollama.chat({ model, messages: [{ role: 'user', content: 'What is this?', images: ['aGk='] }] }), 400, /vision/);
  await fails(() => ollama.generate({ model, prompt: 'x', template: '{{ .Prompt }}' }), 400, /template/);
  await fails(() => ollama.generate({ model, prompt: 'word '.repeat(5000) }), 400, /prompt|context/);
  await fails(() => ollama.embed({ model, input: 'x' }), 501, /no embeddings/);
  await fails(() => ollama.pull({ model: 'llama3' }), 501, /herd pull/);
  const noKey = new Ollama({ host, headers: { Authorization: 'Bearer wrong' } });
  await fails(() => noKey.chat({ model, messages }), 401, /API key/);
  await fails(() => noKey.list(), 401, /API key/);
});

await check('a stream aborted by the client frees its slot', async () => {
  const stream = await ollama.chat({ model, messages, stream: true, options: { num_predict: 3000 } });
  let n = 0;
  try {
    for await (const part of stream) {
      if (++n === 3) stream.abort();
    }
  } catch (e) { /* the abort */ }
  let health;
  for (let i = 0; i < 100; i++) {
    health = await (await fetch(host + '/health')).json();
    if (health.running === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(health.running, 0);
});

console.log(`ollama_test: ${checks} checks passed`);
