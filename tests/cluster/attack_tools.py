#!/usr/bin/env python3
"""Network attacks without the cluster secret, for attack_netns_test.sh. Each prints one JSON line.

  attack_tools.py scan HOST PORT_LO PORT_HI
      TCP connect scan: the open ports.
  attack_tools.py garbage HOST PORT...
      To each TCP port: 64 KiB of random bytes, then what came back before the close (at most
      4 KiB, 3 s); to each port also one UDP datagram of random bytes.
  attack_tools.py flood HOST PORT COUNT SECONDS
      COUNT connections held open and silent for SECONDS; how many were accepted.
  attack_tools.py handshakes PCAP HOST PORT
      The client side of every recorded TCP connection to HOST:PORT in PCAP (a real member's
      secure handshake and job), extracted from the capture and replayed byte for byte to
      HOST:PORT; what each replay got back.
"""
import json
import os
import resource
import socket
import struct
import sys
import time


def out(obj):
    print(json.dumps(obj))


def scan(host, lo, hi):
    open_ports = []
    for port in range(int(lo), int(hi) + 1):
        s = socket.socket()
        s.settimeout(0.2)
        try:
            if s.connect_ex((host, port)) == 0:
                open_ports.append(port)
        finally:
            s.close()
    out({"open": open_ports})


def read_back(s, limit=4096, seconds=3.0):
    got = b""
    end = time.time() + seconds
    try:
        while len(got) < limit and time.time() < end:
            s.settimeout(max(0.05, end - time.time()))
            chunk = s.recv(limit - len(got))
            if not chunk:
                break
            got += chunk
    except (socket.timeout, OSError):
        pass
    return got


def garbage(host, *ports):
    result = {}
    for port in map(int, ports):
        entry = {}
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect((host, port))
            try:
                s.sendall(os.urandom(64 << 10))
            except OSError as e:
                entry["send"] = str(e)
            entry["reply_bytes"] = len(read_back(s))
        except OSError as e:
            entry["connect"] = str(e)
        finally:
            s.close()
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.sendto(os.urandom(1200), (host, port))
        u.close()
        result[str(port)] = entry
    out(result)


def flood(host, port, count, seconds):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, int(count) + 256)), hard))
    held, refused = [], 0
    for _ in range(int(count)):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((host, int(port)))
        held.append(s)
    time.sleep(1.0)
    accepted = 0
    for s in held:
        try:
            s.getpeername()
            accepted += 1
        except OSError:
            refused += 1
    time.sleep(max(0.0, float(seconds) - 1.0))
    for s in held:
        s.close()
    out({"connections": int(count), "established": accepted, "not_established": refused})


def client_streams(pcap, host, port):
    """Payloads from clients to host:port, per connection, in capture order (IPv4/TCP, Ethernet)."""
    data = open(pcap, "rb").read()
    magic = struct.unpack_from("<I", data, 0)[0]
    endian = "<" if magic in (0xA1B2C3D4, 0xA1B23C4D) else ">"
    pos, streams = 24, {}
    dst = socket.inet_aton(host)
    while pos + 16 <= len(data):
        _, _, incl, _ = struct.unpack_from(endian + "IIII", data, pos)
        pkt = data[pos + 16:pos + 16 + incl]
        pos += 16 + incl
        if len(pkt) < 14 + 20 or pkt[12:14] != b"\x08\x00":
            continue
        ip = pkt[14:]
        ihl = (ip[0] & 0x0F) * 4
        if ip[9] != 6 or ip[16:20] != dst:
            continue
        tcp = ip[ihl:]
        sport, dport, seq = struct.unpack_from(">HHI", tcp, 0)
        if dport != int(port):
            continue
        total = struct.unpack_from(">H", ip, 2)[0]
        payload = ip[ihl + (tcp[12] >> 4) * 4:total]
        key = (ip[12:16], sport)
        segs = streams.setdefault(key, {})
        if payload:
            segs.setdefault(seq, payload)  # a retransmission keeps the first copy
    return [b"".join(segs[s] for s in sorted(segs)) for segs in streams.values() if segs]


def handshakes(pcap, host, port):
    replays = []
    for stream in client_streams(pcap, host, port)[:8]:
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect((host, int(port)))
            # As recorded: the hello, then (after the server's answer) the proof and the job.
            s.sendall(stream[:40])
            first = read_back(s, 72, 2.0)
            try:
                s.sendall(stream[40:])
            except OSError:
                pass
            rest = read_back(s, 1 << 16, 3.0)
            replays.append({"sent": len(stream), "got_before_proof": len(first), "got_after": len(rest)})
        except OSError as e:
            replays.append({"error": str(e)})
        finally:
            s.close()
    out({"replays": replays})


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"scan": scan, "garbage": garbage, "flood": flood, "handshakes": handshakes}[cmd](*args)
