// Tool calls and reasoning of DeepSeek V3.1, V3.2 and V4, Kimi K2, gpt-oss (harmony),
// Qwen3.5, GLM-4.7 and Gemma 4 through the official openai client, on a random-weights model that
// carries the family's real chat template (and, for DeepSeek and gpt-oss, its real vocabulary
// with the markers as special tokens). A random model writes no format by itself, so calls
// are forced with tool_choice: the opening is the prompt's, the rest held by the grammar
// where the arguments are JSON (and the model's own where they are text: DSML, Qwen's XML,
// GLM's pairs, Gemma 4's); what is checked is that the server reads the call back (whole and streamed,
// through the client's own assembly), that no marker leaks into content, that histories with
// calls and results render, and that each template's thinking switch decides whether the
// reply is reasoning_content. Run by tests/serve_formats_test.sh with HERD_FORMAT =
// deepseek | deepseek-v3.2 | deepseek-v4 | kimi | gpt-oss | qwen3.5 | glm-4.7 | gemma4.
import assert from 'node:assert/strict';
// Node.js's own fetch, not the client's default node-fetch 2, which on Node.js 18 (Debian 12's)
// fails a stream on a reused keep-alive connection with 'Premature close' (node-fetch#1767).
import 'openai/shims/web';
import OpenAI from 'openai';

const format = process.env.HERD_FORMAT;
const client = new OpenAI({ baseURL: process.env.HERD_URL + '/v1', apiKey: 'test-key', maxRetries: 0 });
const model = (await client.models.list()).data[0].id;
let checks = 0;
const check = async (name, fn) => {
  await fn();
  checks++;
  console.log('ok', format, name);
};

const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
const tools = ['get_weather', 'get_time'].map((name) => ({
  type: 'function',
  function: {
    name, description: `The ${name.slice(4)} of a city`,
    // An enum, so that a random model's arguments end well within max_tokens.
    parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Oslo'] } }, required: ['city'], additionalProperties: false },
  },
}));
// Text of the format's markers: none may reach content.
const markers = /tool▁call|tool_call|<\|channel\|>|<\|message\|>|<\|constrain\|>|to=functions|DSML|<function=|<parameter=|arg_key|arg_value/;
// Formats whose arguments are text: a forced call is its opening alone, so a random model's
// arguments are whatever it wrote, read as an object.
const textArguments = ['deepseek-v3.2', 'deepseek-v4', 'qwen3.5', 'glm-4.7', 'gemma4'].includes(format);
// A grammar ends a JSON call; a random model's text arguments run to max_tokens: kept short.
const callTokens = textArguments ? 48 : 200;

const callOf = (r) => {
  const choice = r.choices[0];
  assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(r));
  assert.ok(!markers.test(choice.message.content ?? ''), `markers in content: ${choice.message.content}`);
  assert.equal(choice.message.tool_calls.length, 1, JSON.stringify(choice.message));
  const call = choice.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(typeof call.function.arguments, 'string');
  if (format === 'gemma4') {
    // Gemma 4's bare keys and values are read as JSON only where they are well formed, which
    // a random model's seldom are; its calls' arguments are checked in text_call_formats_test.
  } else if (textArguments) {
    const args = JSON.parse(call.function.arguments);
    assert.ok(args !== null && typeof args === 'object' && !Array.isArray(args), call.function.arguments);
  } else {
    const args = JSON.parse(call.function.arguments);
    // The grammar held the arguments to the parameters.
    assert.deepEqual(Object.keys(args), ['city']);
    assert.ok(['Paris', 'Oslo'].includes(args.city), call.function.arguments);
  }
  if (format === 'kimi') assert.equal(call.id, `functions.${call.function.name}:0`);
  else assert.match(call.id, /^call_\d+_0$/);
  return call;
};

// Every format read can be forced (a template without one is refused: serve_http_test).
for (const tool_choice of [{ type: 'function', function: { name: 'get_time' } }, 'required']) {
  const what = typeof tool_choice === 'string' ? tool_choice : 'named';
  await check(`forced call (${what}), whole and streamed`, async () => {
    const request = { model, messages, tools, tool_choice, max_tokens: callTokens, temperature: 0.7, seed: 11 };
    const call = callOf(await client.chat.completions.create(request));
    if (what === 'named') assert.equal(call.function.name, 'get_time');
    else assert.ok(['get_weather', 'get_time'].includes(call.function.name));
    // The client puts the streamed pieces back together: the same call.
    const stream = client.beta.chat.completions.stream({ ...request, stream: true });
    let pieces = 0;
    stream.on('chunk', (chunk) => { pieces += chunk.choices[0]?.delta?.tool_calls?.length ?? 0; });
    const streamed = callOf(await stream.finalChatCompletion());
    assert.ok(pieces >= 1);
    assert.deepEqual([streamed.id.replace(/^call_\d+_/, ''), streamed.function.name, streamed.function.arguments],
      [call.id.replace(/^call_\d+_/, ''), call.function.name, call.function.arguments]);
  });
}

await check('a history with a call and its result renders', async () => {
  const call = callOf(await client.chat.completions.create(
    { model, messages, tools, tool_choice: 'required', max_tokens: callTokens, seed: 3 }));
  const r = await client.chat.completions.create({
    model, tools, max_tokens: 8, seed: 4,
    messages: [...messages,
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: call.id, content: '{"temp": 21}' }],
  });
  assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
  // The call and its result reached the prompt (V3.1's template does not list the tools).
  const plain = await client.chat.completions.create({ model, messages, max_tokens: 1 });
  assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens + 10);
});

await check('auto: whatever the model writes is read without error', async () => {
  for (const stream of [false, true]) {
    const request = { model, messages, tools, max_tokens: 24, seed: 5 };
    if (stream) {
      const s = client.beta.chat.completions.stream({ ...request, stream: true });
      const r = await s.finalChatCompletion();
      assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
    } else {
      const r = await client.chat.completions.create(request);
      assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
    }
  }
});

// Each template's thinking switch: where the prompt ends inside <think>, what the model
// writes is reasoning_content until it closes the block, streamed or not; where the switch is
// off it is content.
const thinking = {
  deepseek: [{ thinking: true }, {}],
  'deepseek-v3.2': [{ thinking: true }, {}],
  'deepseek-v4': [{ thinking: true }, {}],
  'qwen3.5': [{}, { enable_thinking: false }],
  'glm-4.7': [{}, { enable_thinking: false }],
}[format];
if (thinking) {
  const [on, off] = thinking;
  await check('thinking mode: the reply is reasoning_content', async () => {
    const request = { model, messages, max_tokens: 16, temperature: 0, chat_template_kwargs: on };
    const whole = await client.chat.completions.create(request);
    const m = whole.choices[0].message;
    assert.ok(m.reasoning_content.length > 0, JSON.stringify(m));
    const stream = await client.chat.completions.create({ ...request, stream: true });
    let reasoning = '', content = '';
    for await (const chunk of stream) {
      reasoning += chunk.choices[0]?.delta?.reasoning_content ?? '';
      content += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(reasoning, m.reasoning_content);
    assert.equal(content, m.content ?? '');
    // A forced call skips the reasoning: </think> is written before the call's opening.
    callOf(await client.chat.completions.create({ ...request, tools, tool_choice: 'required', max_tokens: callTokens }));
  });
  await check('thinking off: the reply is content', async () => {
    const r = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0, chat_template_kwargs: off });
    const m = r.choices[0].message;
    assert.ok(!m.reasoning_content, JSON.stringify(m));
    assert.ok((m.content ?? '').length > 0, JSON.stringify(m));
  });
}

if (format === 'gpt-oss') {
  // A reply held to JSON is the final channel's message, which the prompt opens.
  await check('response_format: the final channel holds the JSON', async () => {
    const r = await client.chat.completions.create({
      model, messages, max_tokens: 80, seed: 2,
      response_format: { type: 'json_schema', json_schema: { name: 'w', schema: tools[0].function.parameters } },
    });
    assert.equal(r.choices[0].finish_reason, 'stop', JSON.stringify(r));
    assert.ok(['Paris', 'Oslo'].includes(JSON.parse(r.choices[0].message.content).city));
  });
}

console.log(`formats_test ${format}: ${checks} checks passed`);
