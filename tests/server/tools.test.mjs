// Tools and structured output through the official `openai` client against a real `cohort
// serve`, one server per family with its real chat template from llama.cpp's bundle (Qwen3,
// Llama 3.1, DeepSeek V3.1, Kimi K2, gpt-oss) on tiny random-weight fixtures. A random model
// cannot choose to call a tool, so the calls are forced (tool_choice required or named): the
// grammar makes them well-formed and their arguments schema-valid, checked with ajv. Streamed
// deltas must reassemble to the same call, a tool result must round-trip through the
// template, and json_schema output must validate.
import { test, before, after, describe } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';
import Ajv from 'ajv';
import { startServer, fixture } from './serve_helper.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const templates = process.env.COHORT_TEMPLATES ?? path.join(here, '..', '..', 'build', 'external', 'templates');
const ajv = new Ajv({ strict: false });

const weatherSchema = {
  type: 'object',
  properties: {
    city: { type: 'string', maxLength: 10 },
    unit: { enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer' },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: weatherSchema } },
  { type: 'function', function: { name: 'get_time', description: 'The time', parameters: { type: 'object', properties: {} } } },
];
const validateWeather = ajv.compile(weatherSchema);

const families = [
  { name: 'Qwen3', model: 'tiny-qwen3-f32', template: 'Qwen-Qwen3-0.6B.jinja' },
  { name: 'Llama 3.1', model: 'tiny-llama-f32', template: 'meta-llama-Llama-3.1-8B-Instruct.jinja' },
  { name: 'DeepSeek V3.1', model: 'tiny-deepseek2-f32', template: 'deepseek-ai-DeepSeek-V3.1.jinja' },
  { name: 'Kimi K2', model: 'tiny-deepseek2-f32', template: 'Kimi-K2-Instruct.jinja' },
  { name: 'gpt-oss', model: 'tiny-qwen3moe-f32', template: 'openai-gpt-oss-120b.jinja' },
];

for (const family of families) {
  describe(family.name, () => {
    let server;
    let client;
    before(async () => {
      server = await startServer(['-m', fixture(family.model), '--chat-template', path.join(templates, family.template),
                                  '--ctx', '2048', '--parallel', '2']);
      client = new OpenAI({ apiKey: 'none', baseURL: `${server.base}/v1`, maxRetries: 0, timeout: 120000 });
    });
    after(async () => {
      const code = await server?.stop();
      assert.equal(code, 0, `server exit: ${code}\n${server?.log()}`);
    });

    const ask = { model: family.model, messages: [{ role: 'user', content: 'What is the weather in Oslo?' }], tools,
                  max_tokens: 600, seed: 11, temperature: 0.7 };

    test('tool_choice required: a schema-valid call, finish_reason tool_calls, streamed the same', async () => {
      const named = { ...ask, tool_choice: { type: 'function', function: { name: 'get_weather' } } };
      const r = await client.chat.completions.create(named);
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls', JSON.stringify(choice));
      assert.equal(choice.message.tool_calls.length, 1);
      const call = choice.message.tool_calls[0];
      assert.equal(call.type, 'function');
      assert.ok(call.id);
      assert.equal(call.function.name, 'get_weather');
      const args = JSON.parse(call.function.arguments);
      assert.ok(validateWeather(args), JSON.stringify(validateWeather.errors));

      const stream = await client.chat.completions.create({ ...named, stream: true });
      const calls = [];
      let finish = null;
      for await (const chunk of stream) {
        for (const c of chunk.choices) {
          if (c.finish_reason) finish = c.finish_reason;
          for (const d of c.delta?.tool_calls ?? []) {
            calls[d.index] ??= { id: '', name: '', arguments: '' };
            if (d.id) calls[d.index].id = d.id;
            if (d.function?.name) calls[d.index].name += d.function.name;
            if (d.function?.arguments) calls[d.index].arguments += d.function.arguments;
          }
        }
      }
      assert.equal(finish, 'tool_calls');
      assert.equal(calls.length, 1);
      assert.equal(calls[0].name, call.function.name);
      assert.deepEqual(JSON.parse(calls[0].arguments), args);

      const any = await client.chat.completions.create({ ...ask, tool_choice: 'required' });
      assert.equal(any.choices[0].finish_reason, 'tool_calls');
      const anyCall = any.choices[0].message.tool_calls[0];
      assert.ok(['get_weather', 'get_time'].includes(anyCall.function.name));
      assert.equal(typeof JSON.parse(anyCall.function.arguments), 'object');
    });

    test('tool_choice auto streamed: the text comes as it is made, and adds up to the plain answer', async () => {
      const auto = { ...ask, tool_choice: 'auto', max_tokens: 24, temperature: 0 };
      const whole = (await client.chat.completions.create(auto)).choices[0];
      let content = '';
      let reasoning = '';
      let textChunks = 0;
      let calls = 0;
      for await (const chunk of await client.chat.completions.create({ ...auto, stream: true })) {
        for (const c of chunk.choices) {
          if (c.delta?.content || c.delta?.reasoning_content) textChunks += 1;
          content += c.delta?.content ?? '';
          reasoning += c.delta?.reasoning_content ?? '';
          calls += (c.delta?.tool_calls ?? []).length;
        }
      }
      assert.equal(content, (whole.message.content ?? '').trimStart(), JSON.stringify(whole));
      assert.equal(reasoning, whole.message.reasoning_content ?? '');
      assert.equal(calls, whole.message.tool_calls?.length ?? 0);
      // gpt-oss's channels are known only whole; the others' text streams piece by piece.
      if (family.name !== 'gpt-oss' && (content + reasoning).length > 8) assert.ok(textChunks >= 2, `${textChunks} chunks: ${content}`);
    });

    test('a tool result round-trips through the template', async () => {
      const history = [
        { role: 'user', content: 'What is the weather in Oslo?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function',
          function: { name: 'get_weather', arguments: '{"city":"Oslo","unit":"celsius"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: '{"temperature": 5}' },
      ];
      const r = await client.chat.completions.create({ ...ask, messages: history, tool_choice: 'none', max_tokens: 8 });
      assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
      const plain = await client.chat.completions.create({ ...ask, messages: history.slice(0, 1), tool_choice: 'none', max_tokens: 1 });
      assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens, 'the call and its result are in the prompt');
    });

    test('json_schema strict: the content validates', async () => {
      const schema = { type: 'object', properties: { n: { type: 'integer' }, ok: { type: 'boolean' },
                       tag: { enum: ['a', 'b'] } }, required: ['n', 'ok', 'tag'], additionalProperties: false };
      const r = await client.chat.completions.create({
        model: family.model, messages: [{ role: 'user', content: 'Reply in JSON.' }], max_tokens: 300, seed: 5,
        response_format: { type: 'json_schema', json_schema: { name: 'reply', strict: true, schema } } });
      assert.equal(r.choices[0].finish_reason, 'stop', JSON.stringify(r.choices[0]));
      const value = JSON.parse(r.choices[0].message.content);
      const validate = ajv.compile(schema);
      assert.ok(validate(value), JSON.stringify(validate.errors));
    });
  });
}
