#!/usr/bin/env python3
"""Times N pushes of S-byte items with C concurrent clients, one item per
request: hotq over HTTP (POST /v1/queues/q/items) or Redis (LPUSH) over a
raw RESP socket. Prints items/s and MiB/s."""
import http.client, socket, sys, threading, time

def hotq_worker(host, port, queue, items, size, errors):
    conn = http.client.HTTPConnection(host, port, timeout=120)
    for i in items:
        body = (b"%010d" % i) + b"x" * (size - 10)
        conn.request("POST", f"/v1/queues/{queue}/items", body=body,
                     headers={"Content-Type": "application/octet-stream"})
        r = conn.getresponse(); r.read()
        if r.status != 201:
            errors.append(r.status)

def redis_worker(host, port, key, items, size, errors):
    s = socket.create_connection((host, port))
    f = s.makefile("rb")
    for i in items:
        body = (b"%010d" % i) + b"x" * (size - 10)
        cmd = b"*3\r\n$5\r\nLPUSH\r\n$%d\r\n%s\r\n$%d\r\n" % (len(key), key, len(body))
        s.sendall(cmd + body + b"\r\n")
        line = f.readline()
        if not line.startswith(b":"):
            errors.append(line)

def main():
    kind, addr, n, size, c = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    host, port = addr.rsplit(":", 1); port = int(port)
    errors = []
    shares = [list(range(w, n, c)) for w in range(c)]
    target = hotq_worker if kind == "hotq" else redis_worker
    name = sys.argv[6] if len(sys.argv) > 6 else "bigpush"
    arg = name if kind == "hotq" else name.encode()
    threads = [threading.Thread(target=target, args=(host, port, arg, share, size, errors)) for share in shares]
    start = time.monotonic()
    for t in threads: t.start()
    for t in threads: t.join()
    elapsed = time.monotonic() - start
    print(f"{kind} push n={n} size={size} C={c}: {n/elapsed:.1f} items/s, {n*size/elapsed/1048576:.1f} MiB/s, errors={len(errors)}")

main()
