// Generation throughput of `cohort serve` with C concurrent streams: each stream asks for
// max_tokens tokens (ignore_eos), and throughput is all generated tokens over the wall time
// from the first request to the last token, and decode throughput: the tokens after each
// stream's first one over the time from the earliest first token to the last token (prompt
// processing and queueing before the first token left out). Also the median time to first token.
// Usage: node bench/serve-throughput.mjs BASE_URL CONCURRENCY MAX_TOKENS
import { takeEvents } from './sse.mjs';

const [base, concurrencyArg, maxTokensArg] = process.argv.slice(2);
const concurrency = Number(concurrencyArg ?? 1);
const maxTokens = Number(maxTokensArg ?? 64);

async function oneStream(i) {
  const t0 = performance.now();
  const res = await fetch(`${base}/v1/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: `Story number ${i}: once upon a time`, max_tokens: maxTokens, temperature: 0.8,
                           seed: i, ignore_eos: true, stream: true, stream_options: { include_usage: true } }),
  });
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  let ttft = null;
  let tokens = 0;
  let last = null;
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of res.body) {
    if (ttft === null) ttft = performance.now() - t0;
    last = performance.now();
    buffered = takeEvents(buffered + decoder.decode(chunk, { stream: true }), (data) => {
      if (data.usage) tokens = data.usage.completion_tokens;
    });
  }
  return { ttft, tokens, first: t0 + ttft, last };
}

const start = performance.now();
const results = await Promise.all(Array.from({ length: concurrency }, (_, i) => oneStream(i)));
const seconds = (performance.now() - start) / 1000;
const tokens = results.reduce((s, r) => s + r.tokens, 0);
const ttfts = results.map((r) => r.ttft).sort((a, b) => a - b);
const decodeSeconds = (Math.max(...results.map((r) => r.last)) - Math.min(...results.map((r) => r.first))) / 1000;
const decodeTokens = results.reduce((s, r) => s + Math.max(0, r.tokens - 1), 0);
console.log(JSON.stringify({ concurrency, tokens, seconds: +seconds.toFixed(3), tokens_per_second: +(tokens / seconds).toFixed(2),
                              decode_tokens_per_second: +(decodeTokens / decodeSeconds).toFixed(2),
                             ttft_ms_median: +ttfts[Math.floor(ttfts.length / 2)].toFixed(1) }));
