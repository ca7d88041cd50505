#!/usr/bin/env python3
"""64 (or N) HTTP clients at once, each on a connection of its own, released together by a
barrier so their SYNs arrive as one burst. Prints one "ok STATUS" or "error WHAT" per client.
usage: burst_client.py HOST PORT PATH [BODY] [N]"""
import socket
import sys
import threading

host, port, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
body = sys.argv[4] if len(sys.argv) > 4 and sys.argv[4] else ""
n = int(sys.argv[5]) if len(sys.argv) > 5 else 64
barrier = threading.Barrier(n)
results = [None] * n


def client(i):
    method = "POST" if body else "GET"
    request = (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode()
    barrier.wait()
    try:
        s = socket.create_connection((host, port), timeout=60)
        s.sendall(request)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        s.close()
        line = data.split(b"\r\n", 1)[0].decode("latin1")
        parts = line.split(" ")
        results[i] = f"ok {parts[1]}" if len(parts) > 1 and line.startswith("HTTP/1.") else "error no-status"
    except OSError as e:
        results[i] = f"error {type(e).__name__}"


threads = [threading.Thread(target=client, args=(i,)) for i in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("\n".join(results))
