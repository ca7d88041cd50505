// The prefix cache through the official `openai` client: the 3-turn chat of prefix_chat.mjs
// (cached tokens, texts equal to a fresh server's), and /metrics must count the cached and
// computed prompt tokens and the cache's bytes and hit ratio.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, fixture, metrics } from './serve_helper.mjs';
import { threeTurnChat } from './prefix_chat.mjs';

const model = fixture('stories260K');
const common = ['-m', model, '--chat-template', 'chatml', '--parallel', '2', '--ctx', '512'];
let cached;
let fresh;

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

test('a 3-turn chat reuses the earlier turns and answers as a fresh server does', async () => {
  const { cachedSum, promptSum } = await threeTurnChat(cached, fresh);
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
