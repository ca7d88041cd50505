// Many clients at once against a real `cohort serve`: 16 concurrent streaming clients all
// complete with the same text each gets alone; a new request's time to first token stays
// bounded while long streams run; a client killed mid-stream frees its slot (seen in /metrics),
// and so does one killed while it waits for a plain (non-streaming) answer.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import OpenAI from 'openai';
import { startServer, fixture, metrics, metricsUntil, sleep } from './serve_helper.mjs';

const EOS = 2;
let server;
let client;

before(async () => {
  server = await startServer(['-m', fixture('stories260K'), '--chat-template', 'chatml', '--parallel', '8',
                              '--ctx', '1024', '--max-queue', '32']);
  client = new OpenAI({ apiKey: 'none', baseURL: `${server.base}/v1`, maxRetries: 0, timeout: 120000 });
});

after(async () => {
  assert.equal(await server.stop(), 0, server.log());
});

const prompts = ['Once upon a time', 'The little dog', 'Lily and Tom', 'One day, a girl', 'The sun was',
                 'Sam had a ball', 'There was a cat', 'Mom said'];

async function streamText(params, onFirst) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  let text = '';
  let finish = null;
  for await (const chunk of stream) {
    const delta = chunk.choices[0]?.delta?.content ?? '';
    if (delta && !text && onFirst) onFirst();
    text += delta;
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  return { text, finish };
}

test('16 concurrent streaming clients complete with their solo text', async () => {
  const params = (i) => ({ model: 'm', messages: [{ role: 'user', content: prompts[i % 8] + ' '.repeat(i >= 8 ? 1 : 0) }],
                           max_tokens: 48, temperature: 0, logit_bias: { [EOS]: -100 } });
  // Each alone, one after another.
  const solo = [];
  for (let i = 0; i < 16; i++) solo.push((await client.chat.completions.create(params(i))).choices[0].message.content);
  // All 16 at once: 8 slots, the rest wait in the queue and join as slots free up.
  const results = await Promise.all(Array.from({ length: 16 }, (_, i) => streamText(params(i))));
  for (let i = 0; i < 16; i++) {
    assert.equal(results[i].finish, 'length', `client ${i}`);
    assert.equal(results[i].text, solo[i], `client ${i}`);
  }
  const m = await metrics(server.base);
  assert.equal(m['cohort_slots_active'], 0);
  assert.equal(m['cohort_queue_depth'], 0);
});

test('time to first token stays bounded while long streams run', async (t) => {
  const long = { model: 'm', max_tokens: 500, temperature: 0.8, logit_bias: { [EOS]: -100 } };
  let running = 0;
  let finished = 0;
  const streams = prompts.slice(0, 6).map((p, i) =>
    streamText({ ...long, seed: i, messages: [{ role: 'user', content: p }] }, () => { running += 1; })
      .then((r) => { finished += 1; return r; }));
  while (running < 6) await sleep(5);
  const t0 = Date.now();
  let ttft = null;
  const probe = await streamText({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, temperature: 0 },
                                 () => { ttft = Date.now() - t0; });
  const stillRunning = 6 - finished;
  t.diagnostic(`time to first token beside 6 streams: ${ttft} ms; ${stillRunning} streams still running`);
  assert.ok(probe.text.length > 0);
  assert.ok(ttft !== null && ttft < 2000, `time to first token ${ttft} ms`);
  const results = await Promise.all(streams);
  assert.ok(stillRunning > 0, 'the long streams ended before the probe: the test proves nothing');
  for (const r of results) assert.equal(r.finish, 'length');
});

// Starts a streaming request on a raw HTTP connection and destroys the socket after the
// first data event.
function streamAndKill(base, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' } },
      (res) => {
        if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
        res.once('data', (d) => { req.destroy(); resolve(d.toString()); });
      });
    req.on('error', () => {});
    req.end(JSON.stringify(body));
  });
}

test('killing the client mid-stream frees its slot', async (t) => {
  const before = await metrics(server.base);
  const first = await streamAndKill(server.base, { model: 'm', messages: [{ role: 'user', content: 'Once' }], stream: true,
                                                   max_tokens: 1000, logit_bias: { [EOS]: -100 } });
  assert.match(first, /^data: /);
  let m;
  const deadline = Date.now() + 10000;
  do {
    await sleep(50);
    m = await metrics(server.base);
  } while ((m['cohort_slots_active'] !== 0 || m['cohort_requests_cancelled_total'] === before['cohort_requests_cancelled_total']) &&
           Date.now() < deadline);
  assert.equal(m['cohort_slots_active'], 0);
  assert.equal(m['cohort_requests_cancelled_total'], before['cohort_requests_cancelled_total'] + 1);
  const generated = m['cohort_generated_tokens_total'] - before['cohort_generated_tokens_total'];
  t.diagnostic(`the killed stream generated ${generated} of 1000 tokens`);
  assert.ok(generated < 1000, `the killed stream generated ${generated} tokens`);
  // The slot serves the next request.
  const r = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5 });
  assert.ok(r.usage.completion_tokens >= 1);
});

test('killing a non-streaming client mid-generation frees its slot', async (t) => {
  // A server of its own with a long context, so the request cannot finish before the kill
  // even on a fast machine (stories260K makes thousands of tokens a second).
  const own = await startServer(['-m', fixture('stories260K'), '--chat-template', 'chatml', '--parallel', '2',
                                 '--ctx', '8192']);
  t.after(async () => assert.equal(await own.stop(), 0, own.log()));
  const maxTokens = 8000;
  const before = await metrics(own.base);
  assert.equal(before['cohort_slots_active'], 0);
  // A plain request sends nothing until the end, so the only sign of the client going away is
  // its socket: the server must notice the hang-up while it generates.
  let answered = false;
  const req = http.request(`${own.base}/v1/chat/completions`,
                           { method: 'POST', headers: { 'content-type': 'application/json' } },
                           () => { answered = true; });
  req.on('error', () => {});
  req.end(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Once' }], max_tokens: maxTokens,
                           logit_bias: { [EOS]: -100 } }));
  const running = await metricsUntil(own.base, (m) => m['cohort_slots_active'] === 1 &&
                                     m['cohort_generated_tokens_total'] > before['cohort_generated_tokens_total'], 10000);
  assert.equal(running['cohort_slots_active'], 1, 'the request never started generating');
  req.destroy();
  const t0 = Date.now();
  const m = await metricsUntil(own.base, (m) => m['cohort_slots_active'] === 0 &&
                               m['cohort_requests_cancelled_total'] > before['cohort_requests_cancelled_total'], 10000);
  const freedMs = Date.now() - t0;
  const generated = m['cohort_generated_tokens_total'] - before['cohort_generated_tokens_total'];
  t.diagnostic(`slot freed ${freedMs} ms after the kill; ${generated} of ${maxTokens} tokens generated`);
  assert.equal(answered, false, 'the request finished before the client was killed: the test proves nothing');
  assert.equal(m['cohort_slots_active'], 0);
  assert.equal(m['cohort_requests_cancelled_total'], before['cohort_requests_cancelled_total'] + 1);
  assert.ok(freedMs < 1000, `the slot was freed ${freedMs} ms after the kill`);
  assert.ok(generated < maxTokens, `the killed request generated ${generated} tokens`);
  // The slot serves the next request, a plain one that stays to the end.
  const r = await fetch(`${own.base}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5 }),
  });
  assert.equal(r.status, 200);
  assert.ok((await r.json()).usage.completion_tokens >= 1);
});
