// The prefix cache on distributed instances: the 3-turn chat of prefix_chat.mjs on
// `cohort serve --local-ranks 2` split by tensor (tp) and by pipeline stage (pp), each rank
// keeping its own slice of every cached block. Each is compared with a fresh server of the
// same layout (--cache-ram 0), so the texts are held to the layout's own numerics.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, fixture, metrics } from './serve_helper.mjs';
import { threeTurnChat } from './prefix_chat.mjs';

const model = fixture('stories260K');
const common = ['-m', model, '--chat-template', 'chatml', '--parallel', '2', '--ctx', '512', '--local-ranks', '2'];
const servers = [];

async function start(args) {
  const s = await startServer([...common, ...args]);
  servers.push(s);
  return s;
}

after(async () => {
  for (const s of servers) {
    const code = await s.stop();
    assert.equal(code, 0, `server exit: ${code}\n${s.log()}`);
  }
});

for (const layout of ['tp', 'pp']) {
  test(`${layout}: a 3-turn chat reuses the earlier turns on every rank and answers as a fresh server does`, async () => {
    const cached = await start(['--layout', layout, '--cache-ram', String(64 << 20)]);
    const fresh = await start(['--layout', layout, '--cache-ram', '0']);
    const { cachedSum, promptSum } = await threeTurnChat(cached, fresh);
    assert.ok(cachedSum > 0);
    const m = await metrics(cached.base);
    assert.equal(m.cohort_prompt_tokens_cached_total, cachedSum);
    assert.equal(m.cohort_prompt_tokens_total + m.cohort_prompt_tokens_cached_total, promptSum);
    assert.ok(m.cohort_prefix_cache_bytes > 0);
    assert.equal(m.cohort_prefix_cache_lookups_total, 3);
    assert.equal(m.cohort_prefix_cache_hits_total, 2);
  });
}
