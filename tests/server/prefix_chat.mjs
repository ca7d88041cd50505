// The prefix cache's acceptance chat, shared by the one-process and the distributed tests: a
// 3-turn chat through the official `openai` client where each turn sends the whole
// conversation. Turns 2 and 3 must report in usage.prompt_tokens_details.cached_tokens at
// least the earlier turns' prompt and completion tokens less one cache block, and give at
// temperature 0 the text a fresh server (no cache) gives for the same messages.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

export const BLOCK = 16;  // SchedulerOptions::cache_block_tokens

export function clientOf(server) {
  return new OpenAI({ apiKey: 'none', baseURL: `${server.base}/v1`, maxRetries: 0, timeout: 60000 });
}

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

// Runs the chat on `cached` (a server with a prefix cache) and each turn's messages on `fresh`
// (one without); returns the cached and the total prompt tokens of the three turns.
export async function threeTurnChat(cached, fresh) {
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
  return { cachedSum, promptSum };
}
