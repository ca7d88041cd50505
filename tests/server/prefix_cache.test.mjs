// The prefix cache through the official `openai` client: a 3-turn chat where each turn sends
// the whole conversation. Turns 2 and 3 must report in usage.prompt_tokens_details.cached_tokens
// at least the earlier turns' prompt and completion tokens less one cache block (16), give at
// temperature 0 the text a fresh server (no cache) gives for the same messages, and /metrics
// must count the cached and computed prompt tokens and the cache's bytes and hit ratio.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServer, fixture, metrics } from './serve_helper.mjs';

const model = fixture('stories260K');
const BLOCK = 16;  // SchedulerOptions::cache_block_tokens
const common = ['-m', model, '--chat-template', 'chatml', '--parallel', '2', '--ctx', '512'];
let cached;
let fresh;

function clientOf(server) {
  return new OpenAI({ apiKey: 'none', baseURL: `${server.base}/v1`, maxRetries: 0, timeout: 60000 });
}

before(async () => {
  cached = await startServer([...common, '--cache-ram', String(64 << 20)]);
  fresh = await startServer([...common, '--cache-ram', '0']);
});

after(async () => {
  for (const s of [cached, fresh]) {
    const code = await s?.stop();
    assert.equal(code, 0, `server exit: ${code}\n${s?.log()}`);
  }
});

const turns = ['Once upon a time there was a little girl named Lily.',
               'She went to the park with her mom.',
               'Then they saw a big dog.'];

async function chat(client, messages, stream) {
  const params = { model: 'stories260K', messages, max_tokens: 40, temperature: 0 };
  if (!stream) {
    const r = await client.chat.completions.create(params);
    return { text: r.choices[0].message.content, usage: r.usage };
  }
  const s = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  for await (const chunk of s) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) text += c.delta?.content ?? '';
  }
  return { text, usage };
}

test('a 3-turn chat reuses the earlier turns and answers as a fresh server does', async () => {
  const client = clientOf(cached);
  const reference = clientOf(fresh);
  const messages = [];
  let previous = 0;  // earlier turns' prompt + completion tokens
  let cachedSum = 0;
  let promptSum = 0;
  for (let i = 0; i < turns.length; i++) {
    messages.push({ role: 'user', content: turns[i] });
    const got = await chat(client, messages, i === 2);  // the last turn streamed: usage chunk too
    const want = await chat(reference, messages, false);
    assert.equal(got.text, want.text, `turn ${i + 1}`);
    const details = got.usage.prompt_tokens_details;
    assert.ok(details, 'usage has prompt_tokens_details');
    assert.equal(want.usage.prompt_tokens_details.cached_tokens, 0, 'the fresh server caches nothing');
    if (i === 0) {
      assert.equal(details.cached_tokens, 0);
    } else {
      assert.ok(details.cached_tokens >= previous - BLOCK,
                `turn ${i + 1}: cached ${details.cached_tokens} of ${got.usage.prompt_tokens}, earlier turns ${previous}`);
      assert.ok(details.cached_tokens < got.usage.prompt_tokens);
    }
    assert.equal(got.usage.prompt_tokens, want.usage.prompt_tokens);
    cachedSum += details.cached_tokens;
    promptSum += got.usage.prompt_tokens;
    previous = got.usage.prompt_tokens + got.usage.completion_tokens;
    messages.push({ role: 'assistant', content: got.text });
  }
  const m = await metrics(cached.base);
  assert.equal(m.cohort_prompt_tokens_cached_total, cachedSum);
  assert.equal(m.cohort_prompt_tokens_total + m.cohort_prompt_tokens_cached_total, promptSum);
  assert.ok(m.cohort_prefix_cache_bytes > 0);
  assert.equal(m.cohort_prefix_cache_bytes_max, 64 << 20);
  assert.equal(m.cohort_prefix_cache_lookups_total, 3);
  assert.equal(m.cohort_prefix_cache_hits_total, 2);
  assert.ok(Math.abs(m.cohort_prefix_cache_hit_ratio - cachedSum / promptSum) < 1e-6);
  const f = await metrics(fresh.base);
  assert.equal(f.cohort_prompt_tokens_cached_total, 0);
  assert.equal(f.cohort_prefix_cache_bytes_max, 0);
});
