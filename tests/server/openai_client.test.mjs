// The official `openai` npm client against a real `cohort serve` (demo model stories260K with
// a ChatML template): plain and streamed chat and completions, usage counts, stop sequences,
// finish reasons, logprobs, seeds (streamed text == plain text), errors and API keys.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import OpenAI from 'openai';
import { startServer, fixture, cohortBin, metrics } from './serve_helper.mjs';

const KEY = 'sk-test-cohort';
const model = fixture('stories260K');
let server;
let client;

before(async () => {
  server = await startServer(['-m', model, '--chat-template', 'chatml', '--parallel', '4',
                              '--ctx', '256', '--api-key', KEY]);
  client = new OpenAI({ apiKey: KEY, baseURL: `${server.base}/v1`, maxRetries: 0, timeout: 60000 });
});

after(async () => {
  const code = await server?.stop();
  assert.equal(code, 0, `server exit: ${code}\n${server?.log()}`);
});

const messages = [{ role: 'user', content: 'Once upon a time' }];
const EOS = 2;  // stories260K's </s>

function tokenize(text) {
  const out = execFileSync(cohortBin, ['tokenize', '-m', model], { input: text }).toString().trim();
  return out.split(/\s+/).map(Number);
}

async function streamChat(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  let text = '';
  let finish = null;
  let usage = null;
  let roles = 0;
  let chunks = 0;  // chunks with text
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta?.role) roles += 1;
      if (choice.delta?.content) chunks += 1;
      text += choice.delta?.content ?? '';
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { text, finish, usage, roles, chunks };
}

test('models lists the served model', async () => {
  const list = await client.models.list();
  const ids = [];
  for await (const m of list) ids.push(m.id);
  assert.deepEqual(ids, ['stories260K']);
});

test('chat: usage counts and finish_reason length', async () => {
  const r = await client.chat.completions.create({ model: 'stories260K', messages, max_tokens: 12,
                                                   temperature: 0, logit_bias: { [EOS]: -100 } });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.ok(r.choices[0].message.content.length > 0);
  const rendered = '<|im_start|>user\nOnce upon a time<|im_end|>\n<|im_start|>assistant\n';
  assert.equal(r.usage.prompt_tokens, tokenize(rendered).length);
  assert.equal(r.usage.completion_tokens, 12);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
});

test('completions: prompt as text and as token ids count the same', async () => {
  const ids = tokenize('Once upon a time');
  const a = await client.completions.create({ model: 'x', prompt: 'Once upon a time', max_tokens: 20, temperature: 0 });
  const b = await client.completions.create({ model: 'x', prompt: ids, max_tokens: 20, temperature: 0 });
  assert.equal(a.object, 'text_completion');
  assert.equal(a.usage.prompt_tokens, ids.length);
  assert.equal(b.usage.prompt_tokens, ids.length);
  assert.equal(a.choices[0].text, b.choices[0].text);
  assert.match(a.choices[0].text, /[a-z]/);
});

test('finish_reason stop on the end-of-generation token', async () => {
  const r = await client.chat.completions.create({ model: 'm', messages, max_tokens: 30, logit_bias: { [EOS]: 100 } });
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.equal(r.choices[0].message.content, '');
  assert.equal(r.usage.completion_tokens, 1);
});

test('streamed text equals plain text for the same seed', async () => {
  const params = { model: 'm', messages, max_tokens: 40, temperature: 0.9, top_p: 0.95, seed: 1234,
                   logit_bias: { [EOS]: -100 } };
  const plain = await client.chat.completions.create(params);
  const streamed = await streamChat({ ...params, stream_options: { include_usage: true } });
  assert.equal(streamed.text, plain.choices[0].message.content);
  assert.equal(streamed.finish, plain.choices[0].finish_reason);
  assert.deepEqual(streamed.usage, plain.usage);
  assert.equal(streamed.roles, 1);
  // It streams: text comes in more than one piece. (How many depends on the machine: the
  // server sends in one event all the tokens a reader has not taken yet, and on a busy box the
  // 260K model makes 40 tokens in a few of the reader's turns.)
  assert.ok(streamed.chunks >= 2, `the text came in ${streamed.chunks} chunk(s)`);
  // Same seed again: same text; another seed: (almost surely) different.
  const again = await client.chat.completions.create(params);
  assert.equal(again.choices[0].message.content, plain.choices[0].message.content);
  const other = await client.chat.completions.create({ ...params, seed: 99 });
  assert.notEqual(other.choices[0].message.content, plain.choices[0].message.content);
});

test('completions stream equals plain', async () => {
  const params = { model: 'm', prompt: 'Lily and Tom', max_tokens: 30, temperature: 0.7, seed: 5 };
  const plain = await client.completions.create(params);
  const stream = await client.completions.create({ ...params, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.text ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, plain.choices[0].text);
  assert.equal(finish, plain.choices[0].finish_reason);
});

test('stop sequences are honoured, streamed and not', async () => {
  const base = { model: 'm', messages, max_tokens: 60, temperature: 0, logit_bias: { [EOS]: -100 } };
  const full = (await client.chat.completions.create(base)).choices[0].message.content;
  const words = full.split(' ').filter((w) => w.length >= 3);
  assert.ok(words.length > 4, full);
  const stop = ` ${words[3]}`;
  const cut = full.slice(0, full.indexOf(stop));
  const r = await client.chat.completions.create({ ...base, stop: [stop, 'zzzz-never'] });
  assert.equal(r.choices[0].message.content, cut);
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.ok(r.usage.completion_tokens < 60);
  const s = await streamChat({ ...base, stop });
  assert.equal(s.text, cut);
  assert.equal(s.finish, 'stop');
});

test('logprobs: one entry per token with top_logprobs alternatives', async () => {
  const r = await client.chat.completions.create({ model: 'm', messages, max_tokens: 8, temperature: 0,
                                                   logprobs: true, top_logprobs: 3, logit_bias: { [EOS]: -100 } });
  const content = r.choices[0].logprobs.content;
  assert.equal(content.length, r.usage.completion_tokens);
  for (const entry of content) {
    assert.equal(entry.top_logprobs.length, 3);
    assert.ok(entry.logprob <= 0);
    // Greedy: the chosen token is the most likely one.
    assert.equal(entry.token, entry.top_logprobs[0].token);
    assert.ok(entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob);
  }
  assert.equal(content.map((e) => e.token).join(''), r.choices[0].message.content);
});

test('n choices: each its own generation, usage summed; 16 stop strings', async () => {
  const params = { model: 'm', messages, max_tokens: 10, temperature: 1, seed: 11, logit_bias: { [EOS]: -100 } };
  const r = await client.chat.completions.create({ ...params, n: 3 });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.equal(r.usage.completion_tokens, 30);
  // Choice 0 is the plain request with the same seed; the others differ (other seeds).
  assert.equal(r.choices[0].message.content, (await client.chat.completions.create(params)).choices[0].message.content);
  assert.ok(new Set(r.choices.map((c) => c.message.content)).size > 1);
  const stops = Array.from({ length: 16 }, (_, i) => `zz${i}`);
  const s = await client.chat.completions.create({ ...params, stop: stops });
  assert.equal(s.choices[0].finish_reason, 'length');
});

test('errors come back as OpenAI errors', async () => {
  await assert.rejects(client.chat.completions.create({ model: 'm', messages: [] }),
                       (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /messages/.test(e.message));
  await assert.rejects(client.chat.completions.create({ model: 'm', messages, temperature: 5 }),
                       (e) => e.status === 400 && e.param === 'temperature');
  await assert.rejects(client.chat.completions.create({ model: 'm', messages, max_tokens: 100000 }),
                       (e) => e.status === 400 && e.param === 'max_tokens');
  await assert.rejects(client.completions.create({ model: 'm', prompt: 'x '.repeat(400), max_tokens: 5 }),
                       (e) => e.status === 400 && e.code === 'context_length_exceeded');
});

test('API key: missing or wrong is 401, right works', async () => {
  const noKey = new OpenAI({ apiKey: 'wrong', baseURL: `${server.base}/v1`, maxRetries: 0 });
  await assert.rejects(noKey.chat.completions.create({ model: 'm', messages, max_tokens: 2 }),
                       (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  const res = await fetch(`${server.base}/v1/models`);
  assert.equal(res.status, 401);
  assert.equal((await res.json()).error.code, 'invalid_api_key');
  const health = await fetch(`${server.base}/health`);
  assert.equal(health.status, 200);
  assert.deepEqual(await health.json(), { status: 'ok' });
});

test('metrics count requests and tokens', async () => {
  const m = await metrics(server.base, KEY);
  assert.ok(m['cohort_generated_tokens_total'] > 0);
  assert.ok(m['cohort_requests_finished_total'] >= 10);
  assert.equal(m['cohort_slots_active'], 0);
  assert.equal(m['cohort_slots_total'], 4);
  assert.ok(m['cohort_http_responses_total{path="/v1/chat/completions",status="200"}'] >= 5);
  assert.ok(m['cohort_time_to_first_token_seconds_count'] >= 5);
});
