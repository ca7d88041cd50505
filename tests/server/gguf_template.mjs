// Writes a copy of a GGUF file with one more key: tokenizer.chat_template, for tests whose
// model must carry its own template (a cluster instance has no --chat-template), or a uint32
// (an embedding model's pooling_type). The key goes after the existing ones; the tensor infos
// are kept and the data section, whose offsets are relative to its aligned start, is copied
// unchanged after new padding.
import fs from 'node:fs';

export const CHATML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + " +
  "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const SCALAR_BYTES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };

export function withChatTemplate(src, dst, template = CHATML) {
  const value = Buffer.from(template);
  const encoded = Buffer.alloc(8 + value.length);
  encoded.writeBigUInt64LE(BigInt(value.length), 0);
  value.copy(encoded, 8);
  withKey(src, dst, 'tokenizer.chat_template', 8, encoded);
}

export function withUint32(src, dst, name, v) {
  const encoded = Buffer.alloc(4);
  encoded.writeUInt32LE(v, 0);
  withKey(src, dst, name, 4, encoded);
}

// `encoded`: the value's bytes as GGUF stores them after its type.
function withKey(src, dst, name, valueType, encoded) {
  const buf = fs.readFileSync(src);
  if (buf.toString('latin1', 0, 4) !== 'GGUF') throw new Error(`${src} is not a GGUF file`);
  let at = 8;  // magic, version
  const u64 = () => { const v = Number(buf.readBigUInt64LE(at)); at += 8; return v; };
  const u32 = () => { const v = buf.readUInt32LE(at); at += 4; return v; };
  const str = () => { const n = u64(); const s = buf.toString('utf8', at, at + n); at += n; return s; };
  const skipValue = (type) => {
    if (type === 8) { str(); return; }
    if (type === 9) {
      const inner = u32();
      const n = u64();
      for (let i = 0; i < n; i++) skipValue(inner);
      return;
    }
    if (!(type in SCALAR_BYTES)) throw new Error(`GGUF value type ${type}`);
    at += SCALAR_BYTES[type];
  };
  const nTensors = u64();
  const nKv = u64();
  let alignment = 32;
  for (let i = 0; i < nKv; i++) {
    const key = str();
    const type = u32();
    if (key === 'general.alignment' && type === 4) alignment = buf.readUInt32LE(at);
    if (key === name) throw new Error(`${src} has ${name} already`);
    skipValue(type);
  }
  const kvEnd = at;
  for (let i = 0; i < nTensors; i++) {
    str();
    const dims = u32();
    at += 8 * dims + 4 + 8;
  }
  const infosEnd = at;
  const dataStart = Math.ceil(infosEnd / alignment) * alignment;

  const key = Buffer.from(name);
  const kv = Buffer.alloc(8 + key.length + 4 + encoded.length);
  let k = 0;
  kv.writeBigUInt64LE(BigInt(key.length), k); k += 8;
  key.copy(kv, k); k += key.length;
  kv.writeUInt32LE(valueType, k); k += 4;
  encoded.copy(kv, k);

  const head = Buffer.from(buf.subarray(0, kvEnd));
  head.writeBigUInt64LE(BigInt(nKv + 1), 16);
  const metaLength = kvEnd + kv.length + (infosEnd - kvEnd);
  const pad = Buffer.alloc(Math.ceil(metaLength / alignment) * alignment - metaLength);
  fs.writeFileSync(dst, Buffer.concat([head, kv, buf.subarray(kvEnd, infosEnd), pad, buf.subarray(dataStart)]));
}
