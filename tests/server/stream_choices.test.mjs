// Streamed `n` > 1 through the official `openai` client against a real `cohort serve`: every
// chunk names its choice's index, each choice ends with its own finish_reason and nothing of it
// follows, the usage chunk counts every choice, then [DONE]; each choice reassembles to the
// non-streamed answer of the same request (seeds seed, seed + 1, ... both ways); logprobs and
// forced tool calls per choice; n past the limit is a 400 naming `n`; a client that aborts
// frees all n slots.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import { startServer, fixture, metrics, metricsUntil } from './serve_helper.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const templates = process.env.COHORT_TEMPLATES ?? path.join(here, '..', '..', 'build', 'external', 'templates');
const EOS = 2;  // stories260K's </s>
const messages = [{ role: 'user', content: 'Once upon a time' }];

// Reads a stream of `n` choices chunk by chunk, checking its order as it goes: one id, every
// choice index in [0, n), nothing for a choice after its finish_reason, the usage chunk (no
// choices) last. Returns per choice its text, finish_reason, role deltas, logprob tokens and
// reassembled tool calls, the usage, and the order of (index, finished) events.
async function collect(stream, n) {
  const choices = Array.from({ length: n }, () => ({ text: '', finish: null, roles: 0, logprobTokens: [], calls: [] }));
  const ids = new Set();
  const order = [];
  let usage = null;
  for await (const chunk of stream) {
    ids.add(chunk.id);
    assert.equal(usage, null, 'a chunk after the usage chunk');
    if (chunk.usage) {
      usage = chunk.usage;
      assert.deepEqual(chunk.choices, []);
      assert.ok(choices.every((c) => c.finish !== null), 'the usage chunk before every choice ended');
    }
    for (const c of chunk.choices) {
      assert.ok(Number.isInteger(c.index) && c.index >= 0 && c.index < n, `choice index ${c.index}`);
      const choice = choices[c.index];
      assert.equal(choice.finish, null, `a chunk for choice ${c.index} after its finish_reason`);
      if (c.delta?.role) choice.roles += 1;
      choice.text += c.delta?.content ?? c.text ?? '';
      for (const lp of c.logprobs?.content ?? []) choice.logprobTokens.push(lp.token);
      for (const lp of c.logprobs?.tokens ?? []) choice.logprobTokens.push(lp);
      for (const d of c.delta?.tool_calls ?? []) {
        choice.calls[d.index] ??= { id: '', name: '', arguments: '' };
        if (d.id) choice.calls[d.index].id = d.id;
        if (d.function?.name) choice.calls[d.index].name += d.function.name;
        if (d.function?.arguments) choice.calls[d.index].arguments += d.function.arguments;
      }
      if (c.finish_reason) choice.finish = c.finish_reason;
      order.push({ index: c.index, finished: choice.finish !== null });
    }
  }
  assert.equal(ids.size, 1, `chunk ids: ${[...ids]}`);
  for (const [i, c] of choices.entries()) assert.ok(c.finish, `choice ${i} never got a finish_reason`);
  return { choices, usage, order };
}

// Usage of the same request, streamed or not. The prompt cache may serve the second run's
// prompt, so cached_tokens is only held to the prompt's size.
function assertSameUsage(streamed, plain) {
  const { prompt_tokens_details: sd, ...s } = streamed;
  const { prompt_tokens_details: pd, ...p } = plain;
  assert.deepEqual(s, p);
  assert.ok(sd.cached_tokens >= 0 && sd.cached_tokens <= s.prompt_tokens, `cached_tokens ${sd.cached_tokens}`);
}

describe('stories260K', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer(['-m', fixture('stories260K'), '--chat-template', 'chatml', '--parallel', '4',
                                '--ctx', '512']);
    client = new OpenAI({ apiKey: 'none', baseURL: `${server.base}/v1`, maxRetries: 0, timeout: 60000 });
  });
  after(async () => {
    const code = await server?.stop();
    assert.equal(code, 0, `server exit: ${code}\n${server?.log()}`);
  });

  test('chat n=3 at temperature 0: each choice streams the plain answer, usage sums all three', async () => {
    const params = { model: 'm', messages, max_tokens: 30, temperature: 0, n: 3, logit_bias: { [EOS]: -100 } };
    const plain = await client.chat.completions.create(params);
    assert.deepEqual(plain.choices.map((c) => c.index), [0, 1, 2]);
    const s = await collect(await client.chat.completions.create({ ...params, stream: true,
                                                                   stream_options: { include_usage: true } }), 3);
    for (const [i, c] of s.choices.entries()) {
      assert.equal(c.text, plain.choices[i].message.content, `choice ${i}`);
      assert.ok(c.text.length > 0, `choice ${i} is empty`);
      assert.equal(c.finish, 'length');
      assert.equal(c.finish, plain.choices[i].finish_reason);
      assert.equal(c.roles, 1, `choice ${i}: ${c.roles} role deltas`);
    }
    assert.equal(s.usage.completion_tokens, 90);
    assertSameUsage(s.usage, plain.usage);
    // The choices generate side by side: the last one has streamed text before the first ends.
    const firstEnd = s.order.findIndex((e) => e.index === 0 && e.finished);
    const lastStart = s.order.findIndex((e) => e.index === 2);
    assert.ok(lastStart < firstEnd, `choice 2 began at event ${lastStart}, after choice 0 ended at ${firstEnd}`);
  });

  test('chat n=3 with a seed at temperature 1: choice i is seed + i, streamed or not', async () => {
    const params = { model: 'm', messages, max_tokens: 24, temperature: 1, seed: 11, logit_bias: { [EOS]: -100 } };
    const plain = await client.chat.completions.create({ ...params, n: 3 });
    const s = await collect(await client.chat.completions.create({ ...params, n: 3, stream: true }), 3);
    assert.equal(s.usage, null, 'a usage chunk without include_usage');
    for (const [i, c] of s.choices.entries()) {
      assert.equal(c.text, plain.choices[i].message.content, `choice ${i}`);
      assert.equal(c.finish, plain.choices[i].finish_reason);
      // The server derives choice i's seed as seed + i, for plain and streamed alike.
      const alone = await client.chat.completions.create({ ...params, seed: 11 + i });
      assert.equal(c.text, alone.choices[0].message.content, `choice ${i} is not the request with seed ${11 + i}`);
    }
    assert.ok(new Set(s.choices.map((c) => c.text)).size > 1, 'three samples at temperature 1 all equal');
  });

  test('completions n=3 streamed: per-choice text and finish, usage, then [DONE] on the wire', async () => {
    const params = { model: 'm', prompt: 'Lily and Tom', max_tokens: 20, temperature: 0.8, seed: 5, n: 3,
                     logit_bias: { [EOS]: -100 } };
    const plain = await client.completions.create(params);
    const s = await collect(await client.completions.create({ ...params, stream: true,
                                                              stream_options: { include_usage: true } }), 3);
    for (const [i, c] of s.choices.entries()) {
      assert.equal(c.text, plain.choices[i].text, `choice ${i}`);
      assert.equal(c.finish, plain.choices[i].finish_reason);
    }
    assert.equal(s.usage.completion_tokens, 60);
    assertSameUsage(s.usage, plain.usage);
    // The raw events: every data line is JSON until the one [DONE], which comes last, right
    // after the usage chunk.
    const res = await fetch(`${server.base}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ ...params, stream: true, stream_options: { include_usage: true } }) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type'), /^text\/event-stream/);
    const events = (await res.text()).split('\n\n').filter((e) => e.length > 0);
    assert.equal(events.at(-1), 'data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.replace(/^data: /, '')));
    assert.ok(chunks.at(-1).usage, 'the last chunk before [DONE] is not the usage');
    assert.equal(chunks.at(-1).usage.completion_tokens, 60);
    const finishes = chunks.flatMap((c) => c.choices.filter((x) => x.finish_reason).map((x) => x.index));
    assert.deepEqual(finishes.sort(), [0, 1, 2]);
    const text = [0, 1, 2].map((i) => chunks.flatMap((c) => c.choices.filter((x) => x.index === i).map((x) => x.text)).join(''));
    assert.deepEqual(text, plain.choices.map((c) => c.text));
  });

  test('logprobs stream per choice', async () => {
    const params = { model: 'm', messages, max_tokens: 8, temperature: 1, seed: 3, n: 2, logprobs: true, top_logprobs: 2,
                     logit_bias: { [EOS]: -100 } };
    const plain = await client.chat.completions.create(params);
    const s = await collect(await client.chat.completions.create({ ...params, stream: true }), 2);
    for (const [i, c] of s.choices.entries()) {
      assert.deepEqual(c.logprobTokens, plain.choices[i].logprobs.content.map((e) => e.token), `choice ${i}`);
      assert.equal(c.logprobTokens.join(''), c.text);
      assert.equal(c.logprobTokens.length, 8);
    }
  });

  test('n over the limit is a 400 naming n, streamed or not', async () => {
    for (const stream of [true, false]) {
      await assert.rejects(client.chat.completions.create({ model: 'm', messages, max_tokens: 2, n: 17, stream }),
                           (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'n',
                           `stream: ${stream}`);
    }
  });
});

test('a client that aborts an n=3 stream frees all three slots within a second', async (t) => {
  // A server of its own with a long context, so the choices cannot finish before the abort.
  const own = await startServer(['-m', fixture('stories260K'), '--chat-template', 'chatml', '--parallel', '4',
                                 '--ctx', '8192']);
  t.after(async () => assert.equal(await own.stop(), 0, own.log()));
  const maxTokens = 8000;
  const before = await metrics(own.base);
  assert.equal(before['cohort_slots_active'], 0);
  let firstEvent = null;
  const req = http.request(`${own.base}/v1/chat/completions`,
                           { method: 'POST', headers: { 'content-type': 'application/json' } },
                           (res) => res.on('data', (d) => { firstEvent ??= d.toString(); }));
  req.on('error', () => {});
  req.end(JSON.stringify({ model: 'm', messages, stream: true, n: 3, max_tokens: maxTokens,
                           logit_bias: { [EOS]: -100 } }));
  const running = await metricsUntil(own.base, (m) => m['cohort_slots_active'] === 3 && firstEvent !== null, 10000);
  assert.equal(running['cohort_slots_active'], 3, 'the three choices never ran side by side');
  assert.match(firstEvent, /^data: /);
  req.destroy();
  const t0 = Date.now();
  const m = await metricsUntil(own.base, (m) => m['cohort_slots_active'] === 0 &&
                               m['cohort_requests_cancelled_total'] >= before['cohort_requests_cancelled_total'] + 3, 10000);
  const freedMs = Date.now() - t0;
  const generated = m['cohort_generated_tokens_total'] - before['cohort_generated_tokens_total'];
  t.diagnostic(`slots freed ${freedMs} ms after the abort; ${generated} of ${3 * maxTokens} tokens generated`);
  assert.equal(m['cohort_slots_active'], 0);
  assert.equal(m['cohort_requests_cancelled_total'], before['cohort_requests_cancelled_total'] + 3);
  assert.ok(freedMs < 1000, `the slots were freed ${freedMs} ms after the abort`);
  assert.ok(generated < 3 * maxTokens, `the aborted stream generated ${generated} tokens`);
});

describe('Qwen3 tools', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer(['-m', fixture('tiny-qwen3-f32'), '--chat-template', path.join(templates, 'Qwen-Qwen3-0.6B.jinja'),
                                '--ctx', '2048', '--parallel', '2']);
    client = new OpenAI({ apiKey: 'none', baseURL: `${server.base}/v1`, maxRetries: 0, timeout: 120000 });
  });
  after(async () => {
    const code = await server?.stop();
    assert.equal(code, 0, `server exit: ${code}\n${server?.log()}`);
  });

  test('forced tool calls stream per choice and reassemble to the plain calls', async () => {
    const params = {
      model: 'm', messages: [{ role: 'user', content: 'What is the weather in Oslo?' }], max_tokens: 400, seed: 7,
      temperature: 0.7, n: 2, tool_choice: { type: 'function', function: { name: 'get_weather' } },
      tools: [{ type: 'function', function: { name: 'get_weather', parameters: {
        type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'], additionalProperties: false } } }],
    };
    const plain = await client.chat.completions.create(params);
    const s = await collect(await client.chat.completions.create({ ...params, stream: true,
                                                                   stream_options: { include_usage: true } }), 2);
    for (const [i, c] of s.choices.entries()) {
      const want = plain.choices[i];
      assert.equal(want.finish_reason, 'tool_calls', JSON.stringify(want));
      assert.equal(c.finish, 'tool_calls');
      assert.equal(c.calls.length, want.message.tool_calls.length);
      assert.equal(c.calls[0].name, 'get_weather');
      assert.ok(c.calls[0].id);
      assert.deepEqual(JSON.parse(c.calls[0].arguments), JSON.parse(want.message.tool_calls[0].function.arguments), `choice ${i}`);
    }
    assertSameUsage(s.usage, plain.usage);
  });
});
