"""POST a JSON body and read the chunked reply off the socket, printing one
line per HTTP chunk: its size, then (after all chunks) the SSE data payloads
joined, as JSON. For --stream-quantum: every chunk's size must be padded.
usage: chunks.py PORT PATH BODY_FILE OUT_JSON"""
import json, socket, sys

port, path, body = int(sys.argv[1]), sys.argv[2], open(sys.argv[3], "rb").read()
s = socket.create_connection(("127.0.0.1", port), timeout=60)
s.sendall(b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
          % (path.encode(), len(body)) + body)
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(65536)
head, buf = buf.split(b"\r\n\r\n", 1)
assert b"chunked" in head.lower(), head
sizes, data = [], b""
def need(n):
    global buf
    while len(buf) < n:
        more = s.recv(65536)
        if not more:
            raise SystemExit("connection closed mid-chunk")
        buf += more
while True:
    while b"\r\n" not in buf:
        buf += s.recv(65536)
    line, buf = buf.split(b"\r\n", 1)
    n = int(line.split(b";")[0], 16)
    if n == 0:
        break
    need(n + 2)
    sizes.append(n)
    data += buf[:n]
    buf = buf[n + 2:]
events = [l[6:] for l in data.decode().split("\n") if l.startswith("data: ")]
json.dump({"sizes": sizes, "events": events}, open(sys.argv[4], "w"))
