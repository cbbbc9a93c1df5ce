"""The control plane against hostile and honest peers, with real sockets and real processes.

1. control_server_driver (control/control_server.hpp) takes garbage, wrong tokens, messages
   before hello, oversized lines, invalid UTF-8, half lines, a bad hello and 200 rapid
   connect/close; it must stay up, count each drop exactly, and still serve a good client (its
   events printed, its malformed lines counted but the connection kept, the stop delivered, a
   reconnecting rank replacing its old connection, a late joiner getting the stop).
2. A port someone listens on: exit 2, one line naming the port.
3. control_client_driver (control/control_client.hpp) under real `mpirun -np 2` against the server:
   both ranks' hello, step, checkpoint, stopped, done; the stop reaches both; heartbeats flow; a
   rank that exits without report_done still exits promptly; no launcher, no connection; a
   launcher that is not there is one line naming the address.
Stdlib only. Exit 0 when every check held, 1 otherwise, 77 (skip) without mpirun.
"""
import json
import os
import queue
import shutil
import socket
import subprocess
import sys
import threading
import time

SERVER = os.environ["GRAPHTUNE_CONTROL_SERVER_DRIVER"]
CLIENT = os.environ["GRAPHTUNE_CONTROL_CLIENT_DRIVER"]
TOKEN = "5f0c1e2d3b4a69788796a5b4c3d2e1f0"
MPIRUN = ["timeout", "60", "mpirun", "--allow-run-as-root", "--oversubscribe"]

checks = failures = 0


def check(name, held, detail=""):
    global checks, failures
    checks += 1
    if held:
        print(f"ok   {name}")
    else:
        failures += 1
        print(f"FAIL {name} {detail}")
    sys.stdout.flush()


class Driver:
    """The server driver with its stdout read line by line on a thread."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([SERVER, "--token", TOKEN, *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, errors="replace")
        self.lines = []
        self.fresh = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        listening = self.wait_for(lambda l: l.startswith("listening "), 10)
        assert listening, f"the driver did not start: {self.proc.stderr.read()}"
        host, port = listening.split()[1].rsplit(":", 1)
        self.address = (host, int(port))

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            self.fresh.put(line.rstrip("\n"))

    def wait_for(self, predicate, seconds):
        """The first line from now on that satisfies predicate, or None after `seconds`."""
        end = time.time() + seconds
        while time.time() < end:
            try:
                line = self.fresh.get(timeout=max(0.01, end - time.time()))
            except queue.Empty:
                return None
            if predicate(line):
                return line
        return None

    def finish(self, seconds=30):
        try:
            rc = self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = "killed"
        time.sleep(0.1)  # the reader thread takes the last lines
        return rc

    def count(self, text):
        return sum(1 for l in self.lines if l.startswith(text))


def connect(address):
    s = socket.create_connection(address, timeout=5)
    return s


def closed_by_server(s, seconds=5):
    """True when the server closes the connection (EOF or reset) within `seconds`."""
    s.settimeout(seconds)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False


def send_quietly(s, data):
    """Sends what the server lets through; it may close mid-way (that is the point)."""
    try:
        s.sendall(data)
    except (ConnectionResetError, BrokenPipeError):
        pass


def hello(rank, world=2, token=TOKEN, **extra):
    h = {"type": "hello", "token": token, "rank": rank, "world": world, "host": "attack-host",
         "local_rank": rank, "device": "cpu", "pid": 4242}
    h.update(extra)
    return (json.dumps(h) + "\n").encode()


def read_line(s, seconds=5):
    s.settimeout(seconds)
    data = b""
    try:
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except socket.timeout:
        pass
    return data.decode(errors="replace").strip()


def attacks():
    d = Driver("--seconds", "60", "--stop-after-hello", "--until-done", "1")
    unauthenticated = [  # each must be refused and its connection closed
        ("garbage bytes", b"\x00\x01\x02garbage\xff\n"),
        ("a hello with a wrong token", hello(0, token="0" * 32)),
        ("a step before hello", b'{"type":"step","step":1,"steps":2,"loss":0.5,"lr":0,"grad_norm":0,'
                                b'"tokens_per_s":0,"rss_mib":0,"peak_rss_mib":0}\n'),
        ("invalid UTF-8", b"\xc3\x28\xa0\xa1\n"),
        ("invalid UTF-8 inside the hello's host", hello(0)[:-2].replace(b'"attack-host"', b'"\xff\xfe"') + b"}\n"),
        ("a hello whose rank is not below world", hello(5, world=2)),
        ("a hello with the token's prefix", hello(0, token=TOKEN[:16])),
    ]
    for name, data in unauthenticated:
        s = connect(d.address)
        send_quietly(s, data)
        check(f"{name}: the server closes the connection", closed_by_server(s))
        s.close()

    s = connect(d.address)  # a message cut short by the peer going away
    send_quietly(s, hello(0)[:20])
    s.close()
    half_lines = 1

    oversized = [("1 MiB without a newline", b"x" * (1 << 20)),
                 ("1 MiB with a newline", b'{"type":"error","message":"' + b"y" * (1 << 20) + b'"}\n')]
    for name, data in oversized:
        s = connect(d.address)
        send_quietly(s, data)
        check(f"{name}: the server closes the connection", closed_by_server(s))
        s.close()

    for _ in range(200):  # connect and close at once: no message, nothing to count
        socket.create_connection(d.address, timeout=5).close()

    check("the server survived the attacks", d.proc.poll() is None)

    # The honest worker, rank 0 of 1: its hello makes the driver request the stop.
    a = connect(d.address)
    a.sendall(hello(0, world=1))
    check("good client: hello printed", d.wait_for(lambda l: l.startswith("hello rank=0 world=1 host=attack-host"), 10) is not None)
    stop = read_line(a)
    check("good client: the stop line arrives", stop.startswith("{") and json.loads(stop).get("type") == "stop", repr(stop))
    a.sendall(b'{"type":"step","step":3,"steps":9,"loss":0.25,"lr":0.5,"grad_norm":1,"tokens_per_s":2,'
              b'"rss_mib":3,"peak_rss_mib":4}\n')
    check("good client: step printed", d.wait_for(lambda l: l.startswith("step rank=0 step=3 steps=9 loss=0.25"), 10) is not None)
    a.sendall(b"{this is not json\n")  # malformed 1: counted, connection kept
    a.sendall(hello(1, world=2))        # malformed 2: a second hello, from another rank
    a.sendall(b'{"type":"heartbeat","rss_mib":12.5,"peak_rss_mib":13}\n')
    check("good client: heartbeat after malformed lines printed (connection kept)",
          d.wait_for(lambda l: l.startswith("heartbeat rank=0 rss_mib=12.500"), 10) is not None)

    # Rank 0 connects again: the new connection replaces the old one, which the server closes
    # without reporting rank 0 gone; the stop was already requested, so the newcomer gets it
    # right after its hello.
    b = connect(d.address)
    b.sendall(hello(0, world=1))
    check("reconnect: the old connection is closed", closed_by_server(a))
    a.close()
    stop_again = read_line(b)
    check("late joiner: the stop line arrives after its hello", '"stop"' in stop_again, repr(stop_again))
    b.sendall(b'{"type":"done"}\n')
    b.close()

    rc = d.finish()
    out = "\n".join(d.lines)
    check("driver exits 0 after the good client's done", rc == 0, f"rc={rc}\n{out}")
    check("done printed", d.count("done rank=0") == 1)
    check("rank 0 reported gone exactly once (the replaced connection is no disconnect)",
          d.count("disconnected rank=0") == 1, out)
    check("hello printed twice (connect, reconnect)", d.count("hello rank=0") == 2)
    check("stop requested once", d.count("stop requested") == 1)
    want = (f"drops unauthenticated={len(unauthenticated) + half_lines} oversized={len(oversized)} "
            f"malformed=2")
    check(f"exact drop counts: {want}", want in d.lines, d.lines[-1] if d.lines else "")


def taken_port():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    r = subprocess.run([SERVER, "--port", str(port), "--seconds", "1"], capture_output=True, text=True, timeout=30)
    holder.close()
    err = r.stderr.strip().splitlines()
    check("taken port: exit 2", r.returncode == 2, f"rc={r.returncode}")
    check("taken port: one line naming the port",
          len(err) == 1 and f"--port {port}: address already in use" in err[0], repr(r.stderr))


def mpirun_clients(extra_client_args, want_done):
    d = Driver("--seconds", "40", "--stop-after-hello", "--until-done", "2" if want_done else "0")
    host, port = d.address
    env_args = ["-x", f"GRAPHTUNE_CONTROL_ADDR={host}:{port}", "-x", f"GRAPHTUNE_JOB_TOKEN={TOKEN}",
                "-x", "GRAPHTUNE_HEARTBEAT_S=0.1"]
    start = time.time()
    r = subprocess.run(MPIRUN + ["-np", "2"] + env_args + [CLIENT] + extra_client_args,
                       capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    took = time.time() - start
    if not want_done:  # the server does not wait for done: both ranks gone is the end
        d.wait_for(lambda l: False, 0.5)
        d.proc.terminate()
    d.finish()
    return r, took, d


def under_mpirun():
    r, took, d = mpirun_clients(["--linger", "0.5"], want_done=True)
    print("    " + r.stdout.strip().replace("\n", "\n    "))
    check("mpirun -np 2: exit 0", r.returncode == 0, r.stderr[-2000:])
    check("mpirun -np 2: every client check passed on both ranks (8)",
          r.stdout.count("ok   rank") == 8 and "FAIL" not in r.stdout)
    for rank in (0, 1):
        check(f"rank {rank}: hello with world=2, local rank and device",
              d.count(f"hello rank={rank} world=2 host=") == 1
              and any(l.startswith(f"hello rank={rank} ") and f"local_rank={rank} device=cpu" in l for l in d.lines))
        check(f"rank {rank}: step with its loss", d.count(f"step rank={rank} step=1 steps=10 loss={1.5 + rank:g} ") == 1)
        check(f"rank {rank}: checkpoint", d.count(f"checkpoint rank={rank} step=1 path=/ckpt/step_1/rank{rank}") == 1)
        check(f"rank {rank}: stopped after the stop", d.count(f"stopped rank={rank} step=1") == 1)
        check(f"rank {rank}: heartbeats every 0.1 s while lingering", d.count(f"heartbeat rank={rank} ") >= 2)
        check(f"rank {rank}: done then disconnected",
              d.count(f"done rank={rank}") == 1 and d.count(f"disconnected rank={rank}") == 1)
    check("no drops", "drops unauthenticated=0 oversized=0 malformed=0" in d.lines, d.lines[-1:])

    # No report_done: main returns with the heartbeat thread running; the process must still end.
    r, took, d = mpirun_clients(["--no-done", "--linger", "0.3"], want_done=False)
    check("without report_done: mpirun exits 0", r.returncode == 0, r.stderr[-2000:])
    check(f"without report_done: the ranks exit promptly ({took:.1f} s < 15 s)", took < 15)
    check("without report_done: both ranks disconnected, no done",
          d.count("disconnected rank=") == 2 and d.count("done rank=") == 0, "\n".join(d.lines))

    env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHTUNE_CONTROL")}
    r = subprocess.run([CLIENT, "--unconnected"], capture_output=True, text=True, env=env, timeout=30)
    check("no launcher in the environment: every call a no-op", r.returncode == 0 and "FAIL" not in r.stdout,
          r.stdout + r.stderr)

    s = socket.socket()  # a port nobody listens on (closed again at once)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    start = time.time()
    r = subprocess.run([CLIENT], capture_output=True, text=True, timeout=60,
                       env=dict(env, GRAPHTUNE_CONTROL_ADDR=f"127.0.0.1:{port}", GRAPHTUNE_JOB_TOKEN=TOKEN))
    took = time.time() - start
    err = r.stderr.strip().splitlines()
    check("unreachable launcher: exit 2 with one line naming the address",
          r.returncode == 2 and len(err) == 1 and f"GRAPHTUNE_CONTROL_ADDR=127.0.0.1:{port}" in err[0], repr(r.stderr))
    check(f"unreachable launcher: retried for about 5 s ({took:.1f} s)", 4 <= took < 15)


def main():
    if not shutil.which("mpirun"):
        print("SKIP: mpirun not found")
        return 77
    attacks()
    taken_port()
    under_mpirun()
    print(f"{checks - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
