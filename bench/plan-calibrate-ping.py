#!/usr/bin/env python3
"""TCP ping-pong for bench/plan-calibrate.sh (this machine has no `ping`):
`serve HOST PORT` answers one client; `ping HOST PORT N` prints half the median round trip
of N one-byte exchanges in microseconds (TCP_NODELAY, as the transport)."""
import socket
import statistics
import sys
import time

mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "serve":
    srv = socket.create_server((host, port))
    conn, _ = srv.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while data := conn.recv(1):
        conn.sendall(data)
else:
    for _ in range(100):
        try:
            s = socket.create_connection((host, port))
            break
        except OSError:
            time.sleep(0.05)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtts = []
    for _ in range(int(sys.argv[4])):
        t = time.perf_counter()
        s.sendall(b"x")
        s.recv(1)
        rtts.append(time.perf_counter() - t)
    print(f"{statistics.median(rtts) * 1e6 / 2:.0f}")
