// The official openai client over HTTPS, in a process of its own so that NODE_EXTRA_CA_CERTS
// (read only at start-up) makes it trust the test's CA. Usage: node tls_client.mjs BASE KEY;
// prints {"text": ...} or {"error": ...} and exits 0 either way.
import OpenAI from 'openai';

const [base, apiKey] = process.argv.slice(2);
const client = new OpenAI({ apiKey, baseURL: `${base}/v1`, maxRetries: 0, timeout: 30000 });
try {
  const models = await client.models.list();
  const r = await client.completions.create({ model: models.data[0].id, prompt: 'Once upon a time',
                                              max_tokens: 8, temperature: 0 });
  console.log(JSON.stringify({ text: r.choices[0].text, model: models.data[0].id }));
} catch (e) {
  console.log(JSON.stringify({ error: String(e?.cause?.code ?? e?.message ?? e) }));
}
