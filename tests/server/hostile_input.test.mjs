// Hostile input: dozens of kinds of bad request — broken JSON, wrong types, absurd numbers,
// unknown roles, invalid UTF-8, huge bodies, bad keys, slow-loris partial headers and bodies —
// each must get the right 4xx (in OpenAI's error shape) or be cut off by the server's timeout,
// while a well-behaved client keeps being served throughout.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, fixture, rawExchange, statusOf, bodyOf, sleep } from './serve_helper.mjs';

const KEY = 'sk-hostile';
let server;
let good;  // the well-behaved client running beside every bad request

before(async () => {
  server = await startServer(['-m', fixture('stories260K'), '--chat-template', 'chatml', '--ctx', '128',
                              '--parallel', '2', '--api-key', KEY, '--timeout', '2', '--max-body', '65536']);
  good = goodClient(server.base);
});

after(async () => {
  const served = await good.stop();
  assert.ok(served.ok >= 5, `good client served ${served.ok} times`);
  assert.deepEqual(served.failures, []);
  assert.equal(await server.stop(), 0, server.log());
});

// Sends small valid requests in a loop; every one must succeed.
function goodClient(base) {
  let running = true;
  const stats = { ok: 0, failures: [] };
  const loop = (async () => {
    while (running) {
      try {
        const res = await fetch(`${base}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${KEY}` },
          body: JSON.stringify({ prompt: 'Once', max_tokens: 3, temperature: 0 }),
          signal: AbortSignal.timeout(20000),
        });
        const body = await res.json();
        if (res.status === 200 && body.choices?.[0]?.text !== undefined) stats.ok += 1;
        else stats.failures.push(`${res.status} ${JSON.stringify(body)}`);
      } catch (e) {
        stats.failures.push(String(e));
      }
      await sleep(20);
    }
  })();
  return { async stop() { running = false; await loop; return stats; } };
}

const chat = (extra) => ({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, ...extra });

async function post(path, body, { key = KEY, raw = false, contentType = 'application/json' } = {}) {
  const headers = { 'content-type': contentType };
  if (key !== null) headers.authorization = `Bearer ${key}`;
  const res = await fetch(`${server.base}${path}`, {
    method: 'POST', headers, body: raw ? body : JSON.stringify(body), signal: AbortSignal.timeout(20000),
  });
  const text = await res.text();
  return { status: res.status, text };
}

function assertOpenAiError(r, status, what) {
  assert.equal(r.status, status, `${what}: ${r.status} ${r.text}`);
  const body = JSON.parse(r.text);
  assert.equal(typeof body.error?.message, 'string', `${what}: ${r.text}`);
  assert.ok(body.error.message.length > 0);
  assert.equal(typeof body.error.type, 'string');
}

// [name, path, body (object, or string sent as-is), expected status, expected param]
const jsonCases = [
  ['broken JSON', '/v1/chat/completions', '{"messages": [', 400, 'body'],
  ['empty body', '/v1/chat/completions', '', 400, 'body'],
  ['body is an array', '/v1/chat/completions', [1, 2], 400, 'body'],
  ['body is null', '/v1/chat/completions', 'null', 400, 'body'],
  ['NaN literal', '/v1/chat/completions', '{"messages":[{"role":"user","content":"x"}],"temperature":NaN}', 400, 'body'],
  ['trailing garbage', '/v1/chat/completions', '{"messages":[]} xyz', 400, 'body'],
  ['lone surrogate escape', '/v1/chat/completions', '{"messages":[{"role":"user","content":"\\ud800"}]}', 400, 'body'],
  ['missing messages', '/v1/chat/completions', { max_tokens: 2 }, 400, 'messages'],
  ['empty messages', '/v1/chat/completions', { messages: [] }, 400, 'messages'],
  ['messages not an array', '/v1/chat/completions', { messages: { role: 'user' } }, 400, 'messages'],
  ['message not an object', '/v1/chat/completions', { messages: ['hi'] }, 400, 'messages[0]'],
  ['unknown role', '/v1/chat/completions', { messages: [{ role: 'root', content: 'x' }] }, 400, 'messages[0].role'],
  ['missing role', '/v1/chat/completions', { messages: [{ content: 'x' }] }, 400, 'messages[0].role'],
  ['role not a string', '/v1/chat/completions', { messages: [{ role: 5, content: 'x' }] }, 400, 'messages[0].role'],
  ['content a number', '/v1/chat/completions', { messages: [{ role: 'user', content: 42 }] }, 400, 'messages[0].content'],
  ['content missing', '/v1/chat/completions', { messages: [{ role: 'user' }] }, 400, 'messages[0].content'],
  ['image part', '/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }] }, 400, 'messages[0].content'],
  ['temperature a string', '/v1/chat/completions', chat({ temperature: 'hot' }), 400, 'temperature'],
  ['temperature too high', '/v1/chat/completions', chat({ temperature: 1e9 }), 400, 'temperature'],
  ['temperature negative', '/v1/chat/completions', chat({ temperature: -0.5 }), 400, 'temperature'],
  ['top_p above 1', '/v1/chat/completions', chat({ top_p: 1.5 }), 400, 'top_p'],
  ['max_tokens negative', '/v1/chat/completions', chat({ max_tokens: -5 }), 400, 'max_tokens'],
  ['max_tokens zero', '/v1/chat/completions', chat({ max_tokens: 0 }), 400, 'max_tokens'],
  ['max_tokens absurd', '/v1/chat/completions', chat({ max_tokens: 1e15 }), 400, 'max_tokens'],
  ['max_tokens fractional', '/v1/chat/completions', chat({ max_tokens: 3.5 }), 400, 'max_tokens'],
  ['max_completion_tokens a string', '/v1/chat/completions', chat({ max_completion_tokens: '10' }), 400, 'max_completion_tokens'],
  ['n above 16', '/v1/chat/completions', chat({ n: 17 }), 400, 'n'],
  ['n above 16 streamed', '/v1/chat/completions', chat({ n: 17, stream: true }), 400, 'n'],
  ['too many stops', '/v1/chat/completions', chat({ stop: Array.from({ length: 17 }, (_, i) => `s${i}`) }), 400, 'stop'],
  ['stop not a string', '/v1/chat/completions', chat({ stop: [7] }), 400, 'stop'],
  ['empty stop', '/v1/chat/completions', chat({ stop: '' }), 400, 'stop'],
  ['huge stop', '/v1/chat/completions', chat({ stop: 'x'.repeat(5000) }), 400, 'stop'],
  ['presence_penalty absurd', '/v1/chat/completions', chat({ presence_penalty: -100 }), 400, 'presence_penalty'],
  ['frequency_penalty a bool', '/v1/chat/completions', chat({ frequency_penalty: true }), 400, 'frequency_penalty'],
  ['top_logprobs without logprobs', '/v1/chat/completions', chat({ top_logprobs: 2 }), 400, 'top_logprobs'],
  ['top_logprobs too many', '/v1/chat/completions', chat({ logprobs: true, top_logprobs: 1000 }), 400, 'top_logprobs'],
  ['seed a string', '/v1/chat/completions', chat({ seed: 'abc' }), 400, 'seed'],
  ['logit_bias bad key', '/v1/chat/completions', chat({ logit_bias: { foo: 1 } }), 400, 'logit_bias'],
  ['logit_bias out of vocab', '/v1/chat/completions', chat({ logit_bias: { 99999999: 1 } }), 400, 'logit_bias'],
  ['logit_bias huge value', '/v1/chat/completions', chat({ logit_bias: { 5: 1e6 } }), 400, 'logit_bias'],
  ['stream not a bool', '/v1/chat/completions', chat({ stream: 'yes' }), 400, 'stream'],
  ['stream with bad params', '/v1/chat/completions', chat({ stream: true, temperature: 9 }), 400, 'temperature'],
  ['response_format json_schema', '/v1/chat/completions', chat({ response_format: { type: 'json_schema' } }), 400, 'response_format.json_schema'],
  ['json_schema recursive without progress', '/v1/chat/completions',
   chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: '#' } } } }), 400, 'response_format.json_schema.schema'],
  ['json_schema mutual recursion', '/v1/chat/completions',
   chat({ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $defs: { a: { $ref: '#/$defs/b' }, b: { $ref: '#/$defs/a' } }, $ref: '#/$defs/a' } } } }),
   400, 'response_format.json_schema.schema'],
  ['json_schema dangling $ref', '/v1/chat/completions',
   chat({ response_format: { type: 'json_schema', json_schema: { schema: { $ref: '#/$defs/none' } } } }), 400, 'response_format.json_schema.schema.$ref'],
  ['json_schema wrong type name', '/v1/chat/completions',
   chat({ response_format: { type: 'json_schema', json_schema: { schema: { type: 'strnig' } } } }), 400, 'response_format.json_schema.schema.type'],
  ['json_schema not an object', '/v1/chat/completions',
   chat({ response_format: { type: 'json_schema', json_schema: { schema: 'object' } } }), 400, 'response_format.json_schema.schema'],
  ['json_schema absurd maxItems', '/v1/chat/completions',
   chat({ response_format: { type: 'json_schema', json_schema: { schema: { type: 'array', maxItems: 1e9 } } } }), 400, 'response_format.json_schema.schema.maxItems'],
  ['json_schema nested too deep', '/v1/chat/completions',
   chat({ response_format: { type: 'json_schema', json_schema: { schema: JSON.parse('{"type":"array","items":'.repeat(100) + '{}' + '}'.repeat(100)) } } }),
   400, 'response_format.json_schema.schema'],
  ['grammar left-recursive', '/v1/chat/completions', chat({ grammar: 'root ::= root "a" | "b"' }), 400, 'grammar'],
  ['grammar undefined rule', '/v1/chat/completions', chat({ grammar: 'root ::= nothing' }), 400, 'grammar'],
  ['grammar huge repetition', '/v1/chat/completions', chat({ grammar: 'root ::= "a"{5000}' }), 400, 'grammar'],
  ['grammar a number', '/v1/chat/completions', chat({ grammar: 42 }), 400, 'grammar'],
  ['tools not an array', '/v1/chat/completions', chat({ tools: { type: 'function' } }), 400, 'tools'],
  ['huge tool list', '/v1/chat/completions',
   chat({ tools: Array.from({ length: 200 }, (_, i) => ({ type: 'function', function: { name: `f${i}` } })) }), 400, 'tools'],
  ['tool without function', '/v1/chat/completions', chat({ tools: [{ type: 'function' }] }), 400, 'tools[0].function'],
  ['tool name with spaces', '/v1/chat/completions', chat({ tools: [{ type: 'function', function: { name: 'rm -rf' } }] }), 400, 'tools[0].function.name'],
  ['tool parameters a string', '/v1/chat/completions', chat({ tools: [{ type: 'function', function: { name: 'f', parameters: 'obj' } }] }), 400, 'tools[0].function.parameters'],
  ['tool parameters recursive', '/v1/chat/completions', chat({ tools: [{ type: 'function', function: { name: 'f', parameters: { $ref: '#' } } }] }), 400, 'tools[0].function.parameters'],
  ['tool_choice unknown function', '/v1/chat/completions',
   chat({ tools: [{ type: 'function', function: { name: 'f' } }], tool_choice: { type: 'function', function: { name: 'g' } } }), 400, 'tool_choice'],
  ['tool_choice a number', '/v1/chat/completions', chat({ tool_choice: 3 }), 400, 'tool_choice'],
  ['tool_choice required without tools', '/v1/chat/completions', chat({ tool_choice: 'required' }), 400, 'tool_choice'],
  ['tool message without id', '/v1/chat/completions', { messages: [{ role: 'tool', content: 'x' }] }, 400, 'messages[0].tool_call_id'],
  ['tool_calls not an array', '/v1/chat/completions', { messages: [{ role: 'assistant', tool_calls: 'x' }] }, 400, 'messages[0].tool_calls'],
  ['tool_call arguments a number', '/v1/chat/completions',
   { messages: [{ role: 'assistant', tool_calls: [{ id: 'a', type: 'function', function: { name: 'f', arguments: 7 } }] }] }, 400, 'messages[0].tool_calls[0].function.arguments'],
  ['response_format not an object', '/v1/chat/completions', chat({ response_format: 'json' }), 400, 'response_format'],
  ['model a number', '/v1/chat/completions', chat({ model: 12 }), 400, 'model'],
  ['prompt missing', '/v1/completions', { max_tokens: 2 }, 400, 'prompt'],
  ['prompt token negative', '/v1/completions', { prompt: [1, -7] }, 400, 'prompt'],
  ['prompt token out of vocab', '/v1/completions', { prompt: [1, 10 ** 9] }, 400, 'prompt'],
  ['prompt an object', '/v1/completions', { prompt: { text: 'x' } }, 400, 'prompt'],
  ['several prompts', '/v1/completions', { prompt: ['a', 'b'] }, 400, 'prompt'],
  ['completions logprobs too many', '/v1/completions', { prompt: 'x', logprobs: 50 }, 400, 'logprobs'],
];

test('malformed JSON and out-of-range fields get 400 with the parameter named', async () => {
  assert.ok(jsonCases.length >= 30);
  for (const [name, path, body, status, param] of jsonCases) {
    const r = await post(path, body, { raw: typeof body === 'string' });
    assertOpenAiError(r, status, name);
    assert.equal(JSON.parse(r.text).error.param, param, `${name}: ${r.text}`);
  }
});

// The other APIs' routes: [name, path, body, field the message must name]. Each answer is a
// 400 in that API's error shape, naming the field.
const msg = (extra) => ({ model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }], ...extra });
const anthropicCases = [
  ['broken JSON', '/v1/messages', '{"messages": [', 'body'],
  ['body an array', '/v1/messages', [1], 'body'],
  ['no max_tokens', '/v1/messages', { model: 'm', messages: [{ role: 'user', content: 'hi' }] }, 'max_tokens'],
  ['max_tokens a string', '/v1/messages', msg({ max_tokens: '5' }), 'max_tokens'],
  ['no model', '/v1/messages', { max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }, 'model'],
  ['messages an object', '/v1/messages', msg({ messages: { role: 'user' } }), 'messages'],
  ['system role in messages', '/v1/messages', msg({ messages: [{ role: 'system', content: 'x' }] }), 'messages[0].role'],
  ['content a number', '/v1/messages', msg({ messages: [{ role: 'user', content: 7 }] }), 'messages[0].content'],
  ['block not an object', '/v1/messages', msg({ messages: [{ role: 'user', content: ['hi'] }] }), 'messages[0].content[0]'],
  ['block without type', '/v1/messages', msg({ messages: [{ role: 'user', content: [{ text: 'hi' }] }] }), 'messages[0].content[0].type'],
  ['unknown block', '/v1/messages', msg({ messages: [{ role: 'user', content: [{ type: 'video' }] }] }), 'messages[0].content[0].type'],
  ['text block text a number', '/v1/messages', msg({ messages: [{ role: 'user', content: [{ type: 'text', text: 1 }] }] }), 'messages[0].content[0].text'],
  ['tool_use from the user', '/v1/messages', msg({ messages: [{ role: 'user', content: [{ type: 'tool_use', id: 'a', name: 'f', input: {} }] }] }), 'messages[0].content[0]'],
  ['tool_use input a string', '/v1/messages', msg({ messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 'a', name: 'f', input: 'x' }] }] }), 'messages[0].content[0].input'],
  ['tool_result without id', '/v1/messages', msg({ messages: [{ role: 'user', content: [{ type: 'tool_result', content: 'x' }] }] }), 'messages[0].content[0].tool_use_id'],
  ['tool_result content a number', '/v1/messages', msg({ messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: 3 }] }] }), 'messages[0].content[0].content'],
  ['system a number', '/v1/messages', msg({ system: 5 }), 'system'],
  ['temperature above 1', '/v1/messages', msg({ temperature: 1.5 }), 'temperature'],
  ['top_k negative', '/v1/messages', msg({ top_k: -1 }), 'top_k'],
  ['stop_sequences a string', '/v1/messages', msg({ stop_sequences: 'x' }), 'stop_sequences'],
  ['too many stop_sequences', '/v1/messages', msg({ stop_sequences: Array.from({ length: 17 }, (_, i) => `s${i}`) }), 'stop_sequences'],
  ['tools an object', '/v1/messages', msg({ tools: { name: 'f' } }), 'tools'],
  ['tool without input_schema', '/v1/messages', msg({ tools: [{ name: 'f' }] }), 'tools[0].input_schema'],
  ['huge tool list', '/v1/messages', msg({ tools: Array.from({ length: 600 }, (_, i) => ({ name: `f${i}`, input_schema: {} })) }), 'tools'],
  ['tool_choice unknown', '/v1/messages', msg({ tool_choice: { type: 'maybe' } }), 'tool_choice.type'],
  ['count_tokens without messages', '/v1/messages/count_tokens', { model: 'm' }, 'messages'],
  // The tool shapes: tool_choice forcing, tool_use and tool_result blocks of the wrong types.
  ['tool_choice a string', '/v1/messages', msg({ tools: [{ name: 'f', input_schema: { type: 'object' } }], tool_choice: 'auto' }), 'tool_choice'],
  ['tool_choice tool without name', '/v1/messages', msg({ tools: [{ name: 'f', input_schema: { type: 'object' } }], tool_choice: { type: 'tool' } }), 'tool_choice.name'],
  ['tool_choice name a number', '/v1/messages', msg({ tools: [{ name: 'f', input_schema: { type: 'object' } }], tool_choice: { type: 'tool', name: 3 } }), 'tool_choice.name'],
  ['tool_choice an unknown tool', '/v1/messages', msg({ tools: [{ name: 'f', input_schema: { type: 'object' } }], tool_choice: { type: 'tool', name: 'nope' } }), 'tool_choice'],
  ['tool_choice any without tools', '/v1/messages', msg({ tool_choice: { type: 'any' } }), 'tool_choice'],
  ['disable_parallel_tool_use a string', '/v1/messages', msg({ tools: [{ name: 'f', input_schema: { type: 'object' } }], tool_choice: { type: 'auto', disable_parallel_tool_use: 'yes' } }), 'tool_choice.disable_parallel_tool_use'],
  ['tool_use id a number', '/v1/messages', msg({ messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 1, name: 'f', input: {} }] }] }), 'messages[0].content[0].id'],
  ['tool_use without name', '/v1/messages', msg({ messages: [{ role: 'assistant', content: [{ type: 'tool_use', id: 'a', input: {} }] }] }), 'messages[0].content[0]'],
  ['tool_result from the assistant', '/v1/messages', msg({ messages: [{ role: 'assistant', content: [{ type: 'tool_result', tool_use_id: 'a' }] }] }), 'messages[0].content[0]'],
  ['tool_result is_error a string', '/v1/messages', msg({ messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', is_error: 'no' }] }] }), 'messages[0].content[0].is_error'],
  ['tool_result content an image block', '/v1/messages', msg({ messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'a', content: [{ type: 'image' }] }] }] }), 'messages[0].content[0].content[0]'],
];
const ollamaCases = [
  ['chat broken JSON', '/api/chat', '{', 'body'],
  ['chat no model', '/api/chat', { messages: [{ role: 'user', content: 'x' }] }, 'model'],
  ['chat messages missing', '/api/chat', { model: 'm' }, 'messages'],
  ['chat content an array', '/api/chat', { model: 'm', messages: [{ role: 'user', content: ['x'] }] }, 'messages[0].content'],
  ['chat unknown role', '/api/chat', { model: 'm', messages: [{ role: 'root', content: 'x' }] }, 'messages[0].role'],
  ['chat images', '/api/chat', { model: 'm', messages: [{ role: 'user', content: 'x', images: ['aGk='] }] }, 'messages[0].images'],
  ['chat stream a string', '/api/chat', { model: 'm', messages: [{ role: 'user', content: 'x' }], stream: 'no' }, 'stream'],
  ['generate options an array', '/api/generate', { model: 'm', prompt: 'x', options: [] }, 'options'],
  ['generate temperature a string', '/api/generate', { model: 'm', prompt: 'x', options: { temperature: 'hot' } }, 'options.temperature'],
  ['generate num_ctx zero', '/api/generate', { model: 'm', prompt: 'x', options: { num_ctx: 0 } }, 'options.num_ctx'],
  ['generate num_predict past the context', '/api/generate', { model: 'm', prompt: 'x', options: { num_predict: 100000 } }, 'options.num_predict'],
  ['generate temperature too high', '/api/generate', { model: 'm', prompt: 'x', options: { temperature: 9 } }, 'options.temperature'],
  ['generate stop too many', '/api/generate', { model: 'm', prompt: 'x', options: { stop: Array.from({ length: 17 }, (_, i) => `s${i}`) } }, 'options.stop'],
  ['generate prompt a number', '/api/generate', { model: 'm', prompt: 5 }, 'prompt'],
  ['generate format a number', '/api/generate', { model: 'm', prompt: 'x', format: 3 }, 'format'],
  ['chat huge tool list', '/api/chat', { model: 'm', messages: [{ role: 'user', content: 'x' }],
                                         tools: Array.from({ length: 600 }, () => ({ type: 'function', function: { name: 'f' } })) }, 'tools'],
  ['chat tool not an object', '/api/chat', { model: 'm', messages: [{ role: 'user', content: 'x' }], tools: ['f'] }, 'tools[0]'],
  ['chat tool_calls without a name', '/api/chat', { model: 'm', messages: [{ role: 'assistant', content: '', tool_calls: [{ function: {} }] }] },
   'messages[0].tool_calls[0].function'],
  ['chat tool_calls arguments a string', '/api/chat', { model: 'm', messages: [{ role: 'assistant', content: '', tool_calls: [{ function: { name: 'f', arguments: '{}' } }] }] },
   'messages[0].tool_calls[0].function.arguments'],
  ['chat tool_name a number', '/api/chat', { model: 'm', messages: [{ role: 'tool', content: 'x', tool_name: 3 }] }, 'messages[0].tool_name'],
  ['embed no model', '/api/embed', { input: 'x' }, 'model'],
  ['embed no input', '/api/embed', { model: 'm' }, 'input'],
  ['embed input a number', '/api/embed', { model: 'm', input: 3 }, 'input'],
  ['embed input an empty array', '/api/embed', { model: 'm', input: [] }, 'input'],
  ['embed an input a number', '/api/embed', { model: 'm', input: ['x', 3] }, 'input[1]'],
  ['embed truncate a string', '/api/embed', { model: 'm', input: 'x', truncate: 'yes' }, 'truncate'],
  ['embed dimensions negative', '/api/embed', { model: 'm', input: 'x', dimensions: -1 }, 'dimensions'],
  ['embed long input not truncated', '/api/embed', { model: 'm', input: 'word '.repeat(400), truncate: false }, 'input'],
  ['embeddings no prompt', '/api/embeddings', { model: 'm' }, 'prompt'],
  ['embeddings prompt an array', '/api/embeddings', { model: 'm', prompt: ['x'] }, 'prompt'],
  ['chat tool_call_id a number', '/api/chat', { model: 'm', messages: [{ role: 'tool', content: 'x', tool_call_id: 3 }] }, 'messages[0].tool_call_id'],
  ['chat tool_choice a number', '/api/chat', { model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }], tool_choice: 3 }, 'tool_choice'],
  ['chat tool_choice an unknown tool', '/api/chat', { model: 'm', messages: [{ role: 'user', content: 'x' }], tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
                                                    tool_choice: { type: 'function', function: { name: 'nope' } } }, 'tool_choice'],
];
const embeddingCases = [
  ['no input', '/v1/embeddings', { model: 'm' }, 'input'],
  ['input a number', '/v1/embeddings', { input: 3 }, 'input'],
  ['input an object', '/v1/embeddings', { input: { text: 'x' } }, 'input'],
  ['input an empty array', '/v1/embeddings', { input: [] }, 'input'],
  ['too many inputs', '/v1/embeddings', { input: Array.from({ length: 2049 }, () => 'x') }, 'input'],
  ['a token id past the vocabulary', '/v1/embeddings', { input: [[1, 99999]] }, 'input[0][1]'],
  ['a negative token id', '/v1/embeddings', { input: [1, -1] }, 'input[1]'],
  ['a token id a float', '/v1/embeddings', { input: [1, 2.5] }, 'input[1]'],
  ['inputs of mixed kinds', '/v1/embeddings', { input: ['x', 5] }, 'input[1]'],
  ['nested too deep', '/v1/embeddings', { input: [[[1]]] }, 'input[0][0]'],
  ['an empty token list', '/v1/embeddings', { input: ['x', []] }, 'input[1]'],
  ['encoding_format unknown', '/v1/embeddings', { input: 'x', encoding_format: 'hex' }, 'encoding_format'],
  ['dimensions zero', '/v1/embeddings', { input: 'x', dimensions: 0 }, 'dimensions'],
  ['dimensions past the model', '/v1/embeddings', { input: 'x', dimensions: 100000 }, 'dimensions'],
  ['dimensions a string', '/v1/embeddings', { input: 'x', dimensions: '8' }, 'dimensions'],
  ['model a number', '/v1/embeddings', { model: 3, input: 'x' }, 'model'],
];
const responsesCases = [
  ['no input', '/v1/responses', { model: 'm' }, 'input'],
  ['input a number', '/v1/responses', { model: 'm', input: 3 }, 'input'],
  ['item unknown type', '/v1/responses', { model: 'm', input: [{ type: 'computer_call' }] }, 'input[0].type'],
  ['message content a number', '/v1/responses', { model: 'm', input: [{ role: 'user', content: 1 }] }, 'input[0].content'],
  ['image part', '/v1/responses', { model: 'm', input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input[0].content[0].type'],
  ['function_call_output without call_id', '/v1/responses', { model: 'm', input: [{ type: 'function_call_output', output: 'x' }] }, 'input[0].call_id'],
  ['previous_response_id', '/v1/responses', { model: 'm', input: 'x', previous_response_id: 'resp_1' }, 'previous_response_id'],
  ['web search tool', '/v1/responses', { model: 'm', input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
  ['max_output_tokens a string', '/v1/responses', { model: 'm', input: 'x', max_output_tokens: '5' }, 'max_output_tokens'],
  ['max_output_tokens past the context', '/v1/responses', { model: 'm', input: 'x', max_output_tokens: 100000 }, 'max_output_tokens'],
  ['huge tool list', '/v1/responses', { model: 'm', input: 'x', tools: Array.from({ length: 600 }, () => ({ type: 'function', name: 'f' })) }, 'tools'],
  ['tool without a name', '/v1/responses', { model: 'm', input: 'x', tools: [{ type: 'function' }] }, 'tools[0].name'],
  ['tool_choice a number', '/v1/responses', { model: 'm', input: 'x', tool_choice: 3 }, 'tool_choice'],
  ['text.format unknown', '/v1/responses', { model: 'm', input: 'x', text: { format: { type: 'xml' } } }, 'text.format.type'],
  ['function_call_output output a number', '/v1/responses', { model: 'm', input: [{ type: 'function_call_output', call_id: 'c', output: 5 }] }, 'input[0].output'],
  ['function_call without a name', '/v1/responses', { model: 'm', input: [{ type: 'function_call', call_id: 'c', arguments: '{}' }] }, 'input[0]'],
  ['function_call call_id a number', '/v1/responses', { model: 'm', input: [{ type: 'function_call', call_id: 1, name: 'f' }] }, 'input[0].call_id'],
  ['tool_choice required without tools', '/v1/responses', { model: 'm', input: 'x', tool_choice: 'required' }, 'tool_choice'],
  ['tool_choice an unknown function', '/v1/responses', { model: 'm', input: 'x', tools: [{ type: 'function', name: 'f', parameters: { type: 'object' } }], tool_choice: { type: 'function', name: 'nope' } }, 'tool_choice'],
  ['function_call arguments an object', '/v1/responses', { model: 'm', input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: {} }] }, 'input[0].arguments'],
];

test('the Anthropic, Ollama, Responses and embedding routes refuse bad fields with a 400 naming them', async () => {
  for (const [name, path, body, field] of anthropicCases) {
    const r = await post(path, body, { raw: typeof body === 'string' });
    assert.equal(r.status, 400, `${name}: ${r.status} ${r.text}`);
    const j = JSON.parse(r.text);
    assert.equal(j.type, 'error', `${name}: ${r.text}`);
    assert.equal(j.error.type, 'invalid_request_error', name);
    assert.ok(j.error.message.startsWith(`${field}: `), `${name}: ${r.text}`);
  }
  for (const [name, path, body, field] of ollamaCases) {
    const r = await post(path, body, { raw: typeof body === 'string' });
    assert.equal(r.status, 400, `${name}: ${r.status} ${r.text}`);
    const j = JSON.parse(r.text);
    assert.equal(typeof j.error, 'string', `${name}: ${r.text}`);
    assert.ok(j.error.startsWith(`${field}: `), `${name}: ${r.text}`);
  }
  for (const [name, path, body, field] of [...responsesCases, ...embeddingCases]) {
    const r = await post(path, body);
    assertOpenAiError(r, 400, name);
    assert.equal(JSON.parse(r.text).error.param, field, `${name}: ${r.text}`);
  }
  // A key in x-api-key works like a Bearer key; a wrong one gets Anthropic's 401.
  const res = await fetch(`${server.base}/v1/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': 'sk-nope' }, body: JSON.stringify(msg({})),
  });
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error.type, 'authentication_error');
  const ok = await fetch(`${server.base}/v1/messages`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': KEY }, body: JSON.stringify(msg({})),
  });
  assert.equal(ok.status, 200, await ok.text());
});

test('prompt longer than the context is 400 context_length_exceeded', async () => {
  const r = await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'word '.repeat(500) }] });
  assertOpenAiError(r, 400, 'long prompt');
  assert.equal(JSON.parse(r.text).error.code, 'context_length_exceeded');
});

test('invalid UTF-8 in the body is 400', async () => {
  const bytes = Buffer.concat([Buffer.from('{"messages":[{"role":"user","content":"'),
                               Buffer.from([0xff, 0xfe, 0xc3, 0x28]), Buffer.from('"}]}')]);
  const r = await post('/v1/chat/completions', bytes, { raw: true });
  assertOpenAiError(r, 400, 'invalid UTF-8');
  const overlong = Buffer.concat([Buffer.from('{"prompt":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]);
  assertOpenAiError(await post('/v1/completions', overlong, { raw: true }), 400, 'overlong UTF-8');
});

test('deeply nested JSON is refused, not a crash', async () => {
  const r = await post('/v1/chat/completions', '['.repeat(60000), { raw: true });
  assertOpenAiError(r, 400, 'nested');
  const r2 = await post('/v1/chat/completions', '{"messages":' + '['.repeat(30000) + ']'.repeat(30000) + '}', { raw: true });
  assertOpenAiError(r2, 400, 'nested messages');
});

test('authentication: missing, wrong, malformed keys are 401', async () => {
  assertOpenAiError(await post('/v1/chat/completions', chat({}), { key: null }), 401, 'no key');
  assertOpenAiError(await post('/v1/chat/completions', chat({}), { key: 'sk-wrong' }), 401, 'wrong key');
  assertOpenAiError(await post('/v1/chat/completions', chat({}), { key: KEY + 'x' }), 401, 'longer key');
  assertOpenAiError(await post('/v1/chat/completions', chat({}), { key: '' }), 401, 'empty key');
  const basic = await rawExchange(server.port, [
    `POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Basic ${KEY}\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}`]);
  assert.equal(statusOf(basic.text), 401);
});

test('unknown endpoints and methods are 404', async () => {
  const r = await fetch(`${server.base}/v1/engines`, { headers: { authorization: `Bearer ${KEY}` } });
  assert.equal(r.status, 404);
  assert.equal(typeof (await r.json()).error.message, 'string');
  const g = await fetch(`${server.base}/v1/chat/completions`, { headers: { authorization: `Bearer ${KEY}` } });
  assert.ok(g.status === 404 || g.status === 405, String(g.status));
});

test('huge bodies are 413', async () => {
  const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(200000) }] });
  assertOpenAiError(await post('/v1/chat/completions', big, { raw: true }), 413, 'big body');
  // A declared length far past the limit is refused before the body is read.
  const declared = await rawExchange(server.port, [
    `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Length: 10000000000\r\n\r\n{"messages":`]);
  assert.equal(statusOf(declared.text), 413, declared.text);
  // Chunked transfer encoding does not get around the limit.
  const chunk = 'a'.repeat(16000);
  const chunks = [`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nTransfer-Encoding: chunked\r\n\r\n`];
  for (let i = 0; i < 8; i++) chunks.push(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
  const chunked = await rawExchange(server.port, chunks);
  // cpp-httplib reads chunks until the limit, then refuses the request (400 or 413).
  assert.ok([400, 413].includes(statusOf(chunked.text)) || (statusOf(chunked.text) === 0 && chunked.closedByServer),
            chunked.text.slice(0, 200));
  if (statusOf(chunked.text) !== 0) assert.match(bodyOf(chunked.text), /"error"/);
});

test('garbage request lines and oversized headers are refused', async () => {
  const garbage = await rawExchange(server.port, ['HELLO THERE\r\n\r\n']);
  assert.ok(garbage.closedByServer);
  assert.ok([0, 400].includes(statusOf(garbage.text)), garbage.text);
  const longHeader = await rawExchange(server.port, [`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'y'.repeat(20000)}\r\n\r\n`]);
  assert.ok(longHeader.closedByServer);
  assert.notEqual(statusOf(longHeader.text), 200);
  const longUri = await rawExchange(server.port, [`GET /${'a'.repeat(20000)} HTTP/1.1\r\nHost: x\r\n\r\n`]);
  assert.ok(longUri.closedByServer);
  assert.ok([0, 400, 414].includes(statusOf(longUri.text)), longUri.text.slice(0, 100));
});

test('slow-loris partial headers and bodies are cut off by the timeout', async () => {
  // Headers that never finish, a body that never arrives, and a connection that says nothing:
  // all closed by the server within its 2 s timeout (plus slack), many at once.
  // Opened a little apart: cpp-httplib listens with a short accept backlog, and a burst of
  // connects would otherwise wait in SYN retries rather than in the server.
  const attacks = [];
  for (let i = 0; i < 8; i++) {
    await sleep(30);
    attacks.push(rawExchange(server.port, ['POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n'], { timeoutMs: 12000 }));
    attacks.push(rawExchange(server.port, [
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Length: 500\r\n\r\n{"messa`],
    { timeoutMs: 12000 }));
    attacks.push(rawExchange(server.port, [], { timeoutMs: 12000 }));
    await sleep(30);
  }
  // Meanwhile the server answers others at once.
  const t0 = Date.now();
  const health = await fetch(`${server.base}/health`);
  assert.equal(health.status, 200);
  assert.ok(Date.now() - t0 < 1500);
  const kinds = ['partial headers', 'partial body', 'silent connection'];
  for (const [i, r] of (await Promise.all(attacks)).entries()) {
    assert.ok(r.closedByServer, `${kinds[i % 3]}: connection left open`);
    assert.ok(r.ms < 10000, `closed after ${r.ms} ms`);
    assert.ok([0, 400, 408].includes(statusOf(r.text)), r.text);
  }
});

test('a client that disconnects before its answer does not disturb the server', async () => {
  for (let i = 0; i < 5; i++) {
    await rawExchange(server.port, [
      `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY}\r\nContent-Length: 80\r\n\r\n` +
      JSON.stringify({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 50 }).padEnd(80, ' ')],
    { timeoutMs: 5 });
  }
  const r = await post('/v1/chat/completions', chat({}));
  assert.equal(r.status, 200, r.text);
});
