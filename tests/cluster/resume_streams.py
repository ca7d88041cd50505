#!/usr/bin/env python3
"""Streams that must survive a lost node, for resume_netns_test.sh (standard library only).

  resume_streams.py stream OUT TOKENS URL...   one stream per URL (temperature 0, ignore_eos,
      a token-id prompt of its own); creates OUT/flowing once every stream has 5 chunks, and
      writes OUT/results.json when all have ended.
  resume_streams.py check OUT TOKENS URL       every stream finished with finish_reason length
      and TOKENS completion tokens, was resumed, and its text after the (last) resume equals an
      undisturbed run through URL (the surviving placement) given the tokens streamed before
      it: the prompt ids plus those tokens, TOKENS minus their count to generate.
  (A URL given to stream as plain:URL takes one plain request instead, checked by check as
      answered 200 with all TOKENS tokens after at least one retry (X-Cohort-Retries), its text
      that of an undisturbed run through URL.)
  resume_streams.py check-moved OUT TOKENS URL  the same across a rebalance: every stream was
      still running when the new placement was ready (OUT/moved_at, seconds since the epoch),
      and one the move did not break needs no resume.
The client key, when the nodes require one, is taken from COHORT_API_KEY.
"""
import http.client
import json
import os
import sys
import threading
import time
import urllib.parse


def prompt_of(i):
    return [1, 100 + 17 * i, 200 + 5 * i]  # BOS and two tokens of the 512 of stories260K


def post(url, body, timeout):
    u = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    headers = {"Content-Type": "application/json"}
    if os.environ.get("COHORT_API_KEY"):
        headers["Authorization"] = "Bearer " + os.environ["COHORT_API_KEY"]
    conn.request("POST", "/v1/completions", json.dumps(body), headers)
    return conn, conn.getresponse()


def run_stream(i, url, tokens, out, chunks):
    result = {"url": url, "prompt": prompt_of(i), "pieces": [], "finish_reason": None, "usage": None,
              "resumes": [], "errors": [], "done": False, "status": None}
    out[i] = result
    try:
        body = {"prompt": prompt_of(i), "max_tokens": tokens, "temperature": 0, "ignore_eos": True,
                "stream": True, "stream_options": {"include_usage": True}}
        conn, resp = post(url, body, 120)
        result["status"] = resp.status
        buf = b""
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.rstrip(b"\r\n")
            if line.startswith(b": cohort-resumed "):
                note = json.loads(line[len(b": cohort-resumed "):])
                note["at_piece"] = len(result["pieces"])
                result["resumes"].append(note)
            elif line.startswith(b"data: "):
                data = line[6:]
                if data == b"[DONE]":
                    result["done"] = True
                    continue
                j = json.loads(data)
                if "error" in j:
                    result["errors"].append(j["error"])
                    continue
                if j.get("usage"):
                    result["usage"] = j["usage"]
                for c in j.get("choices", []):
                    result["pieces"].append(c.get("text", ""))
                    chunks[i] += 1
                    if c.get("finish_reason"):
                        result["finish_reason"] = c["finish_reason"]
        conn.close()
    except Exception as e:  # reported, and the check fails on it
        result["errors"].append({"message": repr(e)})
    result["ended_at"] = time.time()


def run_plain(i, url, tokens, out):
    result = {"url": url, "prompt": prompt_of(i), "plain": True, "status": None, "text": None, "finish_reason": None,
              "usage": None, "retries": 0, "errors": []}
    out[i] = result
    try:
        body = {"prompt": prompt_of(i), "max_tokens": tokens, "temperature": 0, "ignore_eos": True}
        conn, resp = post(url, body, 120)
        result["status"] = resp.status
        result["retries"] = int(resp.getheader("X-Cohort-Retries") or 0)
        j = json.loads(resp.read())
        conn.close()
        if resp.status != 200:
            result["errors"].append(j)
        else:
            result["text"] = j["choices"][0]["text"]
            result["finish_reason"] = j["choices"][0]["finish_reason"]
            result["usage"] = j.get("usage")
    except Exception as e:  # reported, and the check fails on it
        result["errors"].append({"message": repr(e)})


def stream(out_dir, tokens, urls):
    """URLs prefixed "plain:" are sent one plain (non-streamed) request each."""
    results = [None] * len(urls)
    chunks = [0] * len(urls)
    threads = []
    for i, u in enumerate(urls):
        if u.startswith("plain:"):
            chunks[i] = None
            threads.append(threading.Thread(target=run_plain, args=(i, u[len("plain:"):], tokens, results)))
        else:
            threads.append(threading.Thread(target=run_stream, args=(i, u, tokens, results, chunks)))
    for t in threads:
        t.start()
    flagged = False
    while any(t.is_alive() for t in threads):
        if not flagged and all(c is None or c >= 5 for c in chunks):
            open(os.path.join(out_dir, "flowing"), "w").close()
            flagged = True
        time.sleep(0.02)
    for t in threads:
        t.join()
    json.dump(results, open(os.path.join(out_dir, "results.json"), "w"))


def check_plain(i, r, tokens, url):
    """A plain request across the loss: answered 200 with all its tokens after at least one
    retry on the next placement, and its text that of an undisturbed run on it."""
    name = f"plain request {i} via {r['url']}"
    usage = r["usage"] or {}
    if r["errors"] or r["status"] != 200 or r["finish_reason"] != "length" or usage.get("completion_tokens") != tokens:
        return [f"{name}: HTTP {r['status']}, finish {r['finish_reason']}, usage {usage}, errors {r['errors']}"]
    if r["retries"] < 1:
        return [f"{name}: answered without a retry (the node was lost after it ended?)"]
    _, resp = post(url, {"prompt": r["prompt"], "max_tokens": tokens, "temperature": 0, "ignore_eos": True}, 60)
    ref = json.loads(resp.read())
    want = ref["choices"][0]["text"] if "choices" in ref else None
    if r["text"] != want:
        return [f"{name}: {r['text']!r}, an undisturbed run gives {want!r} ({ref if want is None else ''})"]
    print(f"resume_streams: {name}: {tokens} tokens, finish length, retried {r['retries']} time(s); "
          f"the text equals an undisturbed run ({len(want)} chars)")
    return []


def check(out_dir, tokens, url, must_resume=True):
    results = json.load(open(os.path.join(out_dir, "results.json")))
    moved_at = None if must_resume else float(open(os.path.join(out_dir, "moved_at")).read())
    bad = []
    for i, r in enumerate(results):
        if r.get("plain"):
            if moved_at is None:
                bad.extend(check_plain(i, r, tokens, url))
            continue
        name = f"stream {i} via {r['url']}"
        usage = r["usage"] or {}
        if r["errors"] or r["finish_reason"] != "length" or usage.get("completion_tokens") != tokens or not r["done"]:
            bad.append(f"{name}: finish {r['finish_reason']}, usage {usage}, errors {r['errors']}")
            continue
        if moved_at is not None and r["ended_at"] <= moved_at:
            bad.append(f"{name}: ended {moved_at - r['ended_at']:.2f} s before the new placement was ready")
            continue
        if not r["resumes"]:
            if must_resume:
                bad.append(f"{name}: finished without a resume (the node was lost after it ended?)")
            else:
                print(f"resume_streams: {name}: {tokens} tokens, finish length, not interrupted; ended "
                      f"{r['ended_at'] - moved_at:.2f} s after the new placement was ready")
            continue
        last = r["resumes"][-1]
        after = "".join(r["pieces"][last["at_piece"]:])
        _, resp = post(url, {"prompt": r["prompt"] + last["tokens"], "max_tokens": tokens - last["after_tokens"],
                             "temperature": 0, "ignore_eos": True}, 60)
        ref = json.loads(resp.read())
        want = ref["choices"][0]["text"] if "choices" in ref else None
        pauses = ", ".join(f"{n['pause_ms']} ms after {n['after_tokens']} tokens (epoch {n['epoch']})" for n in r["resumes"])
        if after != want:
            bad.append(f"{name}: after the resume {after!r}, an undisturbed run gives {want!r} ({ref if want is None else ''})")
        else:
            print(f"resume_streams: {name}: {tokens} tokens, finish length; resumed {pauses}; "
                  f"the text after it equals an undisturbed run ({len(after)} chars)")
    for b in bad:
        print("resume_streams: FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    mode, out_dir, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if mode == "stream":
        stream(out_dir, n, sys.argv[4:])
    elif mode == "check":
        sys.exit(check(out_dir, n, sys.argv[4]))
    elif mode == "check-moved":
        sys.exit(check(out_dir, n, sys.argv[4], must_resume=False))
    else:
        sys.exit(f"unknown mode {mode}")
