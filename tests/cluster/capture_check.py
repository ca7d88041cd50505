#!/usr/bin/env python3
"""Searches a packet capture for what must not travel in clear between cluster nodes.

usage: capture_check.py PCAP MODEL.gguf TOKEN_IDS TEXT...

Prints one JSON object: for each TEXT (the prompt, the API key, the answer) whether its bytes
occur in the capture, and for the token embedding rows of TOKEN_IDS (comma-separated; rows of
token_embd.weight, read from the GGUF, f32 only) how many rows have any 16-byte window, at any
4-byte offset, in the capture. The capture's file bytes are searched whole: packet headers sit
between segments, so a 16-byte window that straddles two segments is missed, but a row of 64
floats has 61 windows, most inside one segment.
"""
import json
import struct
import sys

GGUF_F32 = 0
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s.decode("utf-8", "replace")

    def value(self, t):
        if t in SCALAR:
            return self.take(SCALAR[t])
        if t == 8:
            return self.string()
        if t == 9:
            inner, n = self.take("<I"), self.take("<Q")
            return [self.value(inner) for _ in range(n)]
        raise ValueError(f"GGUF value type {t}")


def embedding_rows(path, ids):
    data = open(path, "rb").read()
    r = Reader(data)
    if data[:4] != b"GGUF":
        raise ValueError(f"{path} is not GGUF")
    r.pos = 4
    r.take("<I")  # version
    n_tensors, n_kv = r.take("<Q"), r.take("<Q")
    alignment = 32
    for _ in range(n_kv):
        key, t = r.string(), r.take("<I")
        v = r.value(t)
        if key == "general.alignment":
            alignment = v
    tensors = {}
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        tensors[name] = (dims, r.take("<I"), r.take("<Q"))
    base = (r.pos + alignment - 1) // alignment * alignment
    dims, ttype, offset = tensors["token_embd.weight"]
    if ttype != GGUF_F32:
        raise ValueError("token_embd.weight is not f32: use an f32 model")
    row_bytes = dims[0] * 4
    return [data[base + offset + i * row_bytes: base + offset + (i + 1) * row_bytes] for i in ids]


def main():
    pcap, model, ids, texts = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    captured = open(pcap, "rb").read()
    rows = embedding_rows(model, [int(x) for x in ids.split(",") if x])
    rows_seen = sum(any(row[k:k + 16] in captured for k in range(0, len(row) - 15, 4)) for row in rows)
    print(json.dumps({"bytes": len(captured), "texts": {t: t.encode() in captured for t in texts},
                      "rows": len(rows), "rows_seen": rows_seen}))


if __name__ == "__main__":
    main()
