// The official clients of the other APIs cohort speaks, against a real `cohort serve` (demo
// model stories260K with a ChatML template): `@anthropic-ai/sdk` (messages.create plain and
// streamed, stop sequences, count_tokens, x-api-key, Anthropic's errors), `ollama` (chat,
// streamed chat, generate, list, show, ps, version) and `openai`'s Responses API
// (responses.create plain and streamed). Every API runs on the same generation path, so at
// temperature 0 each must give exactly the text and the counts of OpenAI's chat completion.
// Forced tool calls (tool_choice tool / required) in each API's shape: Anthropic tool_use
// blocks (input validated with ajv), Responses function_call items, Ollama message.tool_calls,
// plain and streamed, and the tool result sent back.
// Also: GET /v1/models/ID, and CORS for a browser origin given with --cors-origin.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import { Ollama } from 'ollama';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer, fixture } from './serve_helper.mjs';

const KEY = 'sk-test-apis';
const MODEL = 'stories260K';
let server;
let openai;
let anthropic;
let ollama;

before(async () => {
  server = await startServer(['-m', fixture(MODEL), '--chat-template', 'chatml', '--parallel', '2',
                              '--ctx', '256', '--api-key', KEY, '--cors-origin', 'http://app.example']);
  openai = new OpenAI({ apiKey: KEY, baseURL: `${server.base}/v1`, maxRetries: 0, timeout: 60000 });
  anthropic = new Anthropic({ apiKey: KEY, baseURL: server.base, maxRetries: 0, timeout: 60000 });
  ollama = new Ollama({ host: server.base, headers: { Authorization: `Bearer ${KEY}` } });
});

after(async () => {
  const code = await server?.stop();
  assert.equal(code, 0, `server exit: ${code}\n${server?.log()}`);
});

const user = (content) => [{ role: 'user', content }];

// The reference: OpenAI's chat completion of the same conversation, greedy.
async function reference(messages, maxTokens, extra = {}) {
  const r = await openai.chat.completions.create({ model: MODEL, messages, max_tokens: maxTokens, temperature: 0, ...extra });
  return { text: r.choices[0].message.content, usage: r.usage, finish: r.choices[0].finish_reason };
}

test('anthropic: messages.create gives the chat text, usage and stop_reason', async () => {
  const ref = await reference(user('Once upon a time'), 16);
  const msg = await anthropic.messages.create({ model: MODEL, max_tokens: 16, temperature: 0,
                                               messages: user('Once upon a time') });
  assert.equal(msg.type, 'message');
  assert.equal(msg.role, 'assistant');
  assert.match(msg.id, /^msg_/);
  assert.equal(msg.content.map((b) => b.text).join(''), ref.text);
  assert.ok(ref.text.length > 0);
  assert.equal(msg.stop_reason, ref.finish === 'length' ? 'max_tokens' : 'end_turn');
  assert.equal(msg.usage.input_tokens + msg.usage.cache_read_input_tokens, ref.usage.prompt_tokens);
  assert.equal(msg.usage.output_tokens, ref.usage.completion_tokens);
});

test('anthropic: system prompt and content blocks reach the template', async () => {
  const ref = await reference([{ role: 'system', content: 'Be brief.' }, ...user('Tell a story')], 8);
  const msg = await anthropic.messages.create({
    model: MODEL, max_tokens: 8, temperature: 0, system: [{ type: 'text', text: 'Be brief.' }],
    messages: [{ role: 'user', content: [{ type: 'text', text: 'Tell ' }, { type: 'text', text: 'a story' }] }],
  });
  assert.equal(msg.content.map((b) => b.text).join(''), ref.text);
  const count = await anthropic.messages.countTokens({ model: MODEL, system: 'Be brief.', messages: user('Tell a story') });
  assert.equal(count.input_tokens, ref.usage.prompt_tokens);
});

test('anthropic: the stream has Anthropic\'s events in order and the same text', async () => {
  const params = { model: MODEL, max_tokens: 24, temperature: 0, messages: user('Once upon a time') };
  const plain = await anthropic.messages.create(params);
  const stream = await anthropic.messages.create({ ...params, stream: true });
  const types = [];
  let text = '';
  let stop = null;
  let output = null;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'content_block_delta') text += event.delta.text;
    if (event.type === 'message_delta') { stop = event.delta.stop_reason; output = event.usage.output_tokens; }
  }
  // How many pieces the text comes in depends on timing (a tiny model outruns the reader).
  assert.ok(types.includes('content_block_delta'), types.join(' '));
  assert.deepEqual(types.filter((t) => t !== 'content_block_delta'),
                   ['message_start', 'content_block_start', 'content_block_stop', 'message_delta', 'message_stop']);
  assert.equal(text, plain.content.map((b) => b.text).join(''));
  assert.equal(stop, plain.stop_reason);
  assert.equal(output, plain.usage.output_tokens);
  // The SDK's own accumulator reads the same events into the same message.
  const final = await anthropic.messages.stream(params).finalMessage();
  assert.equal(final.content[0].text, text);
});

test('anthropic: stop_sequences end the text and are named in the answer', async () => {
  const full = (await anthropic.messages.create({ model: MODEL, max_tokens: 60, temperature: 0,
                                                  messages: user('Once upon a time') })).content[0].text;
  const words = full.split(' ').filter((w) => w.length >= 3);
  assert.ok(words.length > 3, full);
  const stop = ` ${words[2]}`;
  const msg = await anthropic.messages.create({ model: MODEL, max_tokens: 60, temperature: 0,
                                               stop_sequences: ['zzzz-never', stop], messages: user('Once upon a time') });
  assert.equal(msg.content[0].text, full.slice(0, full.indexOf(stop)));
  assert.equal(msg.stop_reason, 'stop_sequence');
  assert.equal(msg.stop_sequence, stop);
});

test('anthropic: a tool conversation is accepted; errors and keys in Anthropic\'s shape', async () => {
  const tools = [{ name: 'get_weather', description: 'Weather of a city',
                   input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];
  const msg = await anthropic.messages.create({
    model: MODEL, max_tokens: 4, temperature: 0, tools,
    messages: [user('Weather in Paris?')[0],
               { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
               { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] }],
  });
  assert.equal(msg.type, 'message');
  await assert.rejects(anthropic.messages.create({ model: MODEL, messages: user('x') }),
                       (e) => e instanceof Anthropic.BadRequestError && e.error?.type === 'error' &&
                              e.error.error.type === 'invalid_request_error' && /max_tokens/.test(e.error.error.message));
  await assert.rejects(anthropic.messages.create({ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'image' }] }] }),
                       (e) => e.status === 400 && /messages\[0\]\.content\[0\]\.type/.test(e.error.error.message));
  const wrong = new Anthropic({ apiKey: 'sk-wrong', baseURL: server.base, maxRetries: 0 });
  await assert.rejects(wrong.messages.create({ model: MODEL, max_tokens: 2, messages: user('x') }),
                       (e) => e instanceof Anthropic.AuthenticationError && e.error.error.type === 'authentication_error');
});

// A random-weight model cannot choose to call a tool, so these force it (tool_choice tool /
// required): the grammar makes the call well-formed, the dialect must return it in its shape.
const cityTool = { name: 'get_weather', description: 'Weather of a city',
                   input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } },
                                   required: ['city'], additionalProperties: false } };
const validateCity = new Ajv({ strict: false }).compile(cityTool.input_schema);

test('anthropic: a forced tool gives a tool_use block, plain and streamed, and a tool_result round-trips', async () => {
  const params = { model: MODEL, max_tokens: 120, temperature: 0, tools: [cityTool],
                   tool_choice: { type: 'tool', name: 'get_weather' }, messages: user('Weather in Paris?') };
  const msg = await anthropic.messages.create(params);
  assert.equal(msg.stop_reason, 'tool_use', JSON.stringify(msg));
  const uses = msg.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1, JSON.stringify(msg.content));
  assert.equal(uses[0].name, 'get_weather');
  assert.match(uses[0].id, /^toolu_/);
  assert.equal(typeof uses[0].input, 'object');
  assert.ok(validateCity(uses[0].input), JSON.stringify(validateCity.errors));

  const final = await anthropic.messages.stream(params).finalMessage();
  assert.equal(final.stop_reason, 'tool_use');
  const streamed = final.content.filter((b) => b.type === 'tool_use');
  assert.equal(streamed.length, 1);
  assert.equal(streamed[0].name, 'get_weather');
  assert.deepEqual(streamed[0].input, uses[0].input);  // greedy: the same call both ways

  const answer = await anthropic.messages.create({
    model: MODEL, max_tokens: 8, temperature: 0, tools: [cityTool],
    messages: [...user('Weather in Paris?'), { role: 'assistant', content: msg.content },
               { role: 'user', content: [{ type: 'tool_result', tool_use_id: uses[0].id, content: 'sunny' }] }] });
  assert.ok(['end_turn', 'max_tokens'].includes(answer.stop_reason), answer.stop_reason);
  assert.ok(answer.content.every((b) => b.type === 'text'));
  const count = await anthropic.messages.countTokens({ model: MODEL, messages: user('Weather in Paris?') });
  assert.ok(answer.usage.input_tokens + answer.usage.cache_read_input_tokens > count.input_tokens,
            'the call and its result are in the prompt');
});

test('responses: tool_choice required gives a function_call item, plain and streamed', async () => {
  const tools = [{ type: 'function', name: 'get_weather', description: cityTool.description,
                   parameters: cityTool.input_schema, strict: true }];
  const params = { model: MODEL, input: 'Weather in Paris?', tools, tool_choice: 'required',
                   max_output_tokens: 120, temperature: 0 };
  const r = await openai.responses.create(params);
  const calls = r.output.filter((i) => i.type === 'function_call');
  assert.equal(calls.length, 1, JSON.stringify(r.output));
  assert.equal(calls[0].name, 'get_weather');
  assert.ok(calls[0].call_id);
  assert.ok(validateCity(JSON.parse(calls[0].arguments)), calls[0].arguments);

  const types = [];
  let args = '';
  let done = null;
  let completed = null;
  for await (const event of await openai.responses.create({ ...params, stream: true })) {
    types.push(event.type);
    if (event.type === 'response.function_call_arguments.delta') args += event.delta;
    if (event.type === 'response.function_call_arguments.done') done = event.arguments;
    if (event.type === 'response.completed') completed = event.response;
  }
  for (const t of ['response.output_item.added', 'response.function_call_arguments.delta',
                   'response.function_call_arguments.done', 'response.output_item.done', 'response.completed']) {
    assert.ok(types.includes(t), `${t} in ${types.join(' ')}`);
  }
  assert.equal(args, calls[0].arguments);  // greedy: the same call both ways
  assert.equal(done, args);
  assert.equal(completed.output.find((i) => i.type === 'function_call').arguments, args);

  const answer = await openai.responses.create({
    model: MODEL, tools, max_output_tokens: 8, temperature: 0,
    input: [{ role: 'user', content: 'Weather in Paris?' }, calls[0],
            { type: 'function_call_output', call_id: calls[0].call_id, output: 'sunny' }] });
  assert.equal(answer.output[0].type, 'message');
});

test('ollama: chat, plain and streamed, gives the chat text and counts', async () => {
  const ref = await reference(user('Once upon a time'), 16);
  const r = await ollama.chat({ model: MODEL, messages: user('Once upon a time'), stream: false,
                                options: { temperature: 0, num_predict: 16 } });
  assert.equal(r.message.role, 'assistant');
  assert.equal(r.message.content, ref.text);
  assert.equal(r.done, true);
  assert.equal(r.done_reason, ref.finish);
  assert.equal(r.prompt_eval_count, ref.usage.prompt_tokens);
  assert.equal(r.eval_count, ref.usage.completion_tokens);
  assert.ok(r.total_duration > 0);
  const parts = [];
  for await (const part of await ollama.chat({ model: MODEL, messages: user('Once upon a time'), stream: true,
                                               options: { temperature: 0, num_predict: 16 } })) {
    parts.push(part);
  }
  assert.ok(parts.length >= 2, `${parts.length} parts`);  // text, then the final line
  assert.equal(parts.map((p) => p.message.content).join(''), ref.text);
  assert.deepEqual(parts.map((p) => p.done), [...Array(parts.length - 1).fill(false), true]);
  assert.equal(parts.at(-1).eval_count, ref.usage.completion_tokens);
});

test('ollama: a forced tool gives message.tool_calls with object arguments, plain and streamed', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', description: cityTool.description,
                                                 parameters: cityTool.input_schema } }];
  // tool_choice is cohort's extension (Ollama has none); the client passes it through.
  const params = { model: MODEL, messages: user('Weather in Paris?'), tools, tool_choice: 'required',
                   options: { temperature: 0, num_predict: 120 } };
  const r = await ollama.chat({ ...params, stream: false });
  assert.equal(r.message.tool_calls?.length, 1, JSON.stringify(r.message));
  const call = r.message.tool_calls[0].function;
  assert.equal(call.name, 'get_weather');
  assert.ok(validateCity(call.arguments), JSON.stringify(call.arguments));
  const parts = [];
  for await (const part of await ollama.chat({ ...params, stream: true })) parts.push(part);
  const streamed = parts.flatMap((p) => p.message.tool_calls ?? []);
  assert.equal(streamed.length, 1);
  assert.deepEqual(streamed[0].function, call);
  assert.equal(parts.at(-1).done, true);
  const answer = await ollama.chat({ model: MODEL, stream: false, tools, options: { temperature: 0, num_predict: 8 },
    messages: [...user('Weather in Paris?'), { role: 'assistant', content: '', tool_calls: r.message.tool_calls },
               { role: 'tool', content: 'sunny' }] });
  assert.equal(answer.done, true);
  assert.equal(answer.message.tool_calls, undefined);
  assert.ok(answer.prompt_eval_count > r.prompt_eval_count, 'the call and its result are in the prompt');
});

test('ollama: generate, with options seed, stop and top_k', async () => {
  const ref = await reference(user('Lily and Tom'), 20);
  const r = await ollama.generate({ model: MODEL, prompt: 'Lily and Tom', stream: false, options: { temperature: 0, num_predict: 20 } });
  assert.equal(r.response, ref.text);
  const parts = [];
  for await (const part of await ollama.generate({ model: MODEL, prompt: 'Lily and Tom', stream: true,
                                                   options: { temperature: 0, num_predict: 20 } })) parts.push(part.response);
  assert.equal(parts.join(''), ref.text);
  const seeded = { model: MODEL, prompt: 'Lily and Tom', stream: false, options: { temperature: 0.9, top_k: 20, seed: 7, num_predict: 20 } };
  assert.equal((await ollama.generate(seeded)).response, (await ollama.generate(seeded)).response);
  const words = ref.text.split(' ').filter((w) => w.length >= 3);
  const stop = ` ${words[1]}`;
  const cut = await ollama.generate({ model: MODEL, prompt: 'Lily and Tom', stream: false,
                                      options: { temperature: 0, num_predict: 20, stop: [stop] } });
  assert.equal(cut.response, ref.text.slice(0, ref.text.indexOf(stop)));
  assert.equal(cut.done_reason, 'stop');
});

test('ollama: list, show, ps, version; errors as {"error": ...}', async () => {
  const list = await ollama.list();
  assert.deepEqual(list.models.map((m) => m.name), [MODEL]);
  assert.equal(list.models[0].details.format, 'gguf');
  assert.equal(list.models[0].details.family, 'llama');
  assert.ok(list.models[0].size > 0);
  assert.match(list.models[0].details.quantization_level, /^[A-Za-z0-9_]+$/);
  assert.ok(Date.parse(list.models[0].modified_at) < Date.now());
  const show = await ollama.show({ model: MODEL });
  assert.equal(show.model_info['general.architecture'], 'llama');
  assert.deepEqual((await ollama.ps()).models.map((m) => m.name), [MODEL]);
  assert.equal(typeof (await ollama.version()).version, 'string');
  await assert.rejects(ollama.chat({ model: MODEL, messages: [{ role: 'user', content: 5 }], stream: false }),
                       (e) => e.status_code === 400 && /messages\[0\]\.content/.test(e.error));
  await assert.rejects(ollama.generate({ model: MODEL, prompt: 'x', stream: false, options: { num_predict: 0 } }),
                       (e) => e.status_code === 400 && /options\.num_predict/.test(e.error));
});

test('responses: responses.create gives the chat text; instructions and function items map', async () => {
  const ref = await reference([{ role: 'system', content: 'You tell stories.' }, ...user('Once upon a time')], 16);
  const r = await openai.responses.create({ model: MODEL, instructions: 'You tell stories.', input: 'Once upon a time',
                                            max_output_tokens: 16, temperature: 0, store: false });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_/);
  assert.equal(r.output_text, ref.text);
  assert.equal(r.status, ref.finish === 'length' ? 'incomplete' : 'completed');
  assert.equal(r.usage.input_tokens, ref.usage.prompt_tokens);
  assert.equal(r.usage.output_tokens, ref.usage.completion_tokens);
  const items = await openai.responses.create({
    model: MODEL, max_output_tokens: 4, temperature: 0,
    tools: [{ type: 'function', name: 'lookup', parameters: { type: 'object', properties: {} } }],
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'Look it up' }] },
            { type: 'function_call', call_id: 'c1', name: 'lookup', arguments: '{}' },
            { type: 'function_call_output', call_id: 'c1', output: 'found' }],
  });
  assert.equal(items.object, 'response');
  await assert.rejects(openai.responses.create({ model: MODEL, input: 'x', previous_response_id: 'resp_1' }),
                       (e) => e.status === 400 && e.param === 'previous_response_id');
});

test('responses: the stream has the named events in order and the same text', async () => {
  const params = { model: MODEL, input: 'Once upon a time', max_output_tokens: 24, temperature: 0 };
  const plain = await openai.responses.create(params);
  const types = [];
  let text = '';
  let final = null;
  let seq = -1;
  for await (const event of await openai.responses.create({ ...params, stream: true })) {
    types.push(event.type);
    assert.equal(event.sequence_number, seq + 1);
    seq = event.sequence_number;
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
  }
  assert.ok(types.includes('response.output_text.delta'), types.join(' '));
  assert.deepEqual(types.filter((t) => t !== 'response.output_text.delta'),
                   ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
                    'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
                    plain.status === 'completed' ? 'response.completed' : 'response.incomplete']);
  assert.equal(text, plain.output_text);
  assert.equal(final.output[0].content[0].text, text);
  assert.equal(final.usage.output_tokens, plain.usage.output_tokens);
});

test('models.retrieve; CORS preflight and headers for the allowed origin only', async () => {
  const m = await openai.models.retrieve(MODEL);
  assert.equal(m.id, MODEL);
  assert.equal(typeof m.created, 'number');
  await assert.rejects(openai.models.retrieve('other'), (e) => e.status === 404);
  // A preflight carries no key: it is answered before the key check.
  const pre = await fetch(`${server.base}/v1/messages`, {
    method: 'OPTIONS',
    headers: { origin: 'http://app.example', 'access-control-request-method': 'POST',
               'access-control-request-headers': 'x-api-key, content-type' },
  });
  assert.equal(pre.status, 204);
  assert.equal(pre.headers.get('access-control-allow-origin'), 'http://app.example');
  assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
  assert.equal(pre.headers.get('access-control-allow-headers'), 'x-api-key, content-type');
  const post = await fetch(`${server.base}/v1/chat/completions`, {
    method: 'POST', headers: { ...{ authorization: `Bearer ${KEY}` }, origin: 'http://app.example', 'content-type': 'application/json' },
    body: JSON.stringify({ messages: user('hi'), max_tokens: 2 }),
  });
  assert.equal(post.status, 200);
  assert.equal(post.headers.get('access-control-allow-origin'), 'http://app.example');
  // An error answer carries it too, so the browser can read why.
  const denied = await fetch(`${server.base}/v1/models`, { headers: { origin: 'http://app.example' } });
  assert.equal(denied.status, 401);
  assert.equal(denied.headers.get('access-control-allow-origin'), 'http://app.example');
  const other = await fetch(`${server.base}/v1/models`, { headers: { ...{ authorization: `Bearer ${KEY}` }, origin: 'http://evil.example' } });
  assert.equal(other.status, 200);
  assert.equal(other.headers.get('access-control-allow-origin'), null);
  const otherPre = await fetch(`${server.base}/v1/messages`, {
    method: 'OPTIONS', headers: { origin: 'http://evil.example', 'access-control-request-method': 'POST' },
  });
  assert.notEqual(otherPre.status, 204);
  assert.equal(otherPre.headers.get('access-control-allow-origin'), null);
});
