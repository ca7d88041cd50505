// Two measurements against a running `cohort serve` (token-id prompts on /v1/completions, so
// the lengths are exact):
//   ttft  HISTORY TURN ROUNDS: time to first token of a HISTORY-token conversation plus a
//         TURN-token new user turn, cold (a history the server has never seen: the whole
//         prompt computed) and warm (the same history sent before, as the previous turn of a
//         chat: only the new turn computed). Each round uses a fresh random history. Prints one
//         JSON line per round and the medians and their ratio.
//   itl   STREAMS PREFILL TOKENS: STREAMS streams decoding TOKENS-token completions one after
//         another; their inter-token gaps alone, then
//         while one PREFILL-token prompt is prefilled beside them. Prints the p50/p99 gaps of
//         both phases and the p99 ratio.
// Usage: node bench/prefix-cache.mjs BASE_URL ttft 2000 50 3
//        node bench/prefix-cache.mjs BASE_URL itl 4 4000 48
import http from 'node:http';
import { takeEvents } from './sse.mjs';

const [base, mode, ...args] = process.argv.slice(2);
const VOCAB_LO = 1000, VOCAB_HI = 100000;  // plain-text ids of a llama-3 vocabulary

let seed = 12345;
function randomIds(n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    out.push(VOCAB_LO + (seed % (VOCAB_HI - VOCAB_LO)));
  }
  return out;
}

// Streams one completion; calls onToken(now) per SSE event carrying text; resolves with the
// time to the first event and the usage. Node's http, not fetch: fetch gives up on a body that
// is silent for 300 s, and a 4,000-token prompt prefilled in small chunks beside other streams
// on a loaded 2-core machine can take longer than that to its first token.
function stream(prompt, maxTokens, { onToken, signal } = {}) {
  const t0 = performance.now();
  const body = JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true,
                                stream_options: { include_usage: true } });
  return new Promise((resolve, reject) => {
    let ttft = null;
    let usage = null;
    let buffered = '';
    const onAbort = () => { req.destroy(); done(); };
    const done = () => { signal?.removeEventListener('abort', onAbort); resolve({ ttft, usage }); };
    const req = http.request(`${base}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      if (res.statusCode !== 200) {
        let text = '';
        res.on('data', (c) => { text += c; });
        res.on('end', () => reject(new Error(`HTTP ${res.statusCode}: ${text}`)));
        return;
      }
      res.setEncoding('utf8');
      res.on('data', (chunk) => {
        buffered = takeEvents(buffered + chunk, (data) => {
          if (data.usage) usage = data.usage;
          if (data.choices?.length) {
            const now = performance.now();
            if (ttft === null) ttft = now - t0;
            onToken?.(now);
          }
        });
      });
      res.on('end', done);
      res.on('error', () => done());
    });
    req.on('error', (e) => (signal?.aborted ? done() : reject(e)));
    signal?.addEventListener('abort', onAbort);
    req.end(body);
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};

async function ttft(historyLen, turnLen, rounds) {
  const cold = [], warm = [];
  for (let r = 0; r < rounds; r++) {
    const history = randomIds(historyLen);
    const a = await stream([...history, ...randomIds(turnLen)], 1);  // never seen: all computed
    await stream(history, 1);                                         // the previous turn
    const b = await stream([...history, ...randomIds(turnLen)], 1);  // history cached
    cold.push(a.ttft);
    warm.push(b.ttft);
    console.log(JSON.stringify({ round: r + 1, cold_ms: +a.ttft.toFixed(1), warm_ms: +b.ttft.toFixed(1),
                                 cold_cached: a.usage.prompt_tokens_details?.cached_tokens ?? 0,
                                 warm_cached: b.usage.prompt_tokens_details?.cached_tokens ?? 0,
                                 prompt_tokens: b.usage.prompt_tokens }));
  }
  console.log(JSON.stringify({ history: historyLen, turn: turnLen, cold_ms_median: +median(cold).toFixed(1),
                               warm_ms_median: +median(warm).toFixed(1), speedup: +(median(cold) / median(warm)).toFixed(2) }));
}

// Inter-token gaps of `streams` streams over one phase; `during` (a promise) ends the phase
// when given, else the phase ends after `tokens` tokens of each stream.
// STREAMS streams, each a run of TOKENS-token completions of fresh 8-token prompts, one after
// another, so their contexts stay short and alike in both phases (one long completion would
// reach thousands of positions during a slow prefill, and its decode steps would grow dearer
// for that alone). Without `during`: ROUNDS completions each. With it: until during.run()
// ends. The gaps are those between a completion's tokens from its 3rd on (the first include
// its own prompt and the other streams' starts).
async function phase(streams, tokens, rounds, during) {
  const gaps = [];
  const controller = new AbortController();
  let started = 0;
  let release;
  const allStarted = new Promise((r) => { release = r; });
  let running = true;
  const runs = Array.from({ length: streams }, async () => {
    let first = true;
    for (let round = 0; during ? running : round < rounds; ++round) {
      let last = null;
      let count = 0;
      await stream(randomIds(8), tokens, {
        signal: controller.signal,
        onToken: (now) => {
          if (++count === 3 && first) {
            first = false;
            if (++started === streams) release();
          }
          if (count > 3 && last !== null && (!during || during.active)) gaps.push(now - last);
          last = now;
        },
      });
    }
  });
  if (during) {
    await allStarted;
    during.active = true;
    await during.run();
    during.active = false;
    running = false;
    controller.abort();
  }
  await Promise.allSettled(runs);
  return gaps;
}

async function itl(streams, prefillLen, tokens) {
  const alone = await phase(streams, tokens, 4);
  let prefillTtft = 0;
  const during = await phase(streams, tokens, 0, {
    active: false,
    run: async () => { prefillTtft = (await stream(randomIds(prefillLen), 1)).ttft; },
  });
  const p99a = quantile(alone, 0.99), p99b = quantile(during, 0.99);
  console.log(JSON.stringify({ streams, prefill: prefillLen, prefill_ttft_ms: +prefillTtft.toFixed(0),
                               alone: { gaps: alone.length, p50_ms: +quantile(alone, 0.5).toFixed(1), p99_ms: +p99a.toFixed(1) },
                               during: { gaps: during.length, p50_ms: +quantile(during, 0.5).toFixed(1), p99_ms: +p99b.toFixed(1) },
                               p99_ratio: +(p99b / p99a).toFixed(2) }));
}

if (mode === 'ttft') await ttft(Number(args[0] ?? 2000), Number(args[1] ?? 50), Number(args[2] ?? 3));
else if (mode === 'itl') await itl(Number(args[0] ?? 4), Number(args[1] ?? 4000), Number(args[2] ?? 48));
else throw new Error(`unknown mode ${mode}: ttft or itl`);
