#!/usr/bin/env python3
"""Where an idle adorchd's resident memory is: VmRSS, VmHWM and /proc/PID/smaps summed per
mapped file (the binary, each shared library) and anonymous memory (heap, thread stacks), on
the embedded default config, started as systemd starts it (NOTIFY_SOCKET). Also exec → READY=1.

    scripts/footprint.py [--adorchd .build/release/adorchd] [--starts 5] [--settle 2]

Needs no redis; `adorch-bench footprint --smoke` is the benchmark's own (shorter) figure.
"""
import argparse, os, shutil, signal, socket, subprocess, sys, tempfile, time
from collections import defaultdict


def start(adorchd, workdir, extra_env):
    notify = os.path.join(workdir, "notify.sock")
    if os.path.exists(notify):
        os.unlink(notify)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(notify)
    env = dict(os.environ)
    for key in ("WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM"):
        env.pop(key, None)
    env.update(extra_env)
    env["NOTIFY_SOCKET"] = notify
    args = [adorchd, "--socket", os.path.join(workdir, "adorchd.sock"), "--state-dir", os.path.join(workdir, "state"),
            "--log-target", "console"]
    t0 = time.monotonic()
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    listener.settimeout(10)
    ready, full = None, None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and full is None:
        try:
            msg = listener.recv(65536).decode(errors="replace")
        except socket.timeout:
            break
        now = time.monotonic()
        lines = msg.split("\n")
        if "READY=1" in lines and ready is None:
            ready = now - t0
        for line in lines:
            if line.startswith("STATUS="):
                parts = line.split(",")
                if len(parts) > 1:
                    ratio = parts[1].strip().split(" ")[0].split("/")
                    if len(ratio) == 2 and ratio[0] == ratio[1] and ratio[0] != "0":
                        full = now - t0
    listener.close()
    return proc, ready, full


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            out[key] = value.strip()
    return out


def smaps(pid):
    """kB per mapping name: Rss, Pss, Private_Dirty, Shared_Clean, Private_Clean, Size."""
    totals = defaultdict(lambda: defaultdict(int))
    name = None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            head = line.split()
            if not head:
                continue
            if "-" in head[0] and len(head) >= 5 and not head[0].endswith(":"):
                path = head[5] if len(head) > 5 else "[anon]"
                name = os.path.basename(path) if path.startswith("/") else path
                if name.startswith("[stack"):
                    name = "[stack]"
            elif head[0].endswith(":") and len(head) >= 2 and head[1].isdigit():
                totals[name][head[0][:-1]] += int(head[1])
    return totals


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--adorchd", default=".build/release/adorchd")
    p.add_argument("--starts", type=int, default=5)
    p.add_argument("--settle", type=float, default=2.0, help="seconds idle after every slot is full")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the daemon")
    a = p.parse_args()
    extra = dict(kv.split("=", 1) for kv in a.env)
    workdir = tempfile.mkdtemp(prefix="adorch-fp-")
    try:
        proc, ready, full = start(a.adorchd, workdir, extra)
        time.sleep(a.settle)
        st, sm = status(proc.pid), smaps(proc.pid)
        threads = len(os.listdir(f"/proc/{proc.pid}/task"))
        proc.send_signal(signal.SIGTERM)
        proc.wait()
        readies = []
        for i in range(a.starts):
            shutil.rmtree(os.path.join(workdir, "state"), ignore_errors=True)
            pr, r, _ = start(a.adorchd, workdir, extra)
            pr.send_signal(signal.SIGTERM)
            pr.wait()
            if r is not None:
                readies.append(r * 1000)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    size = os.path.getsize(a.adorchd)
    print(f"binary {a.adorchd}: {size / 1e6:.1f} MB; threads {threads}; "
          + (f"every slot full {full * 1000:.0f} ms after exec" if full else "slots never full (is the sim plugin next to it?)"))
    print(f"VmRSS {st['VmRSS']}  VmHWM {st['VmHWM']}  RssAnon {st.get('RssAnon')}  RssFile {st.get('RssFile')}")
    readies.sort()
    if readies:
        print(f"exec -> READY=1: median {readies[len(readies) // 2]:.2f} ms, all {', '.join(f'{r:.2f}' for r in readies)}")
    print(f"{'mapping':42} {'Size':>8} {'Rss':>7} {'Pss':>7} {'ShClean':>7} {'PrClean':>7} {'PrDirty':>7}  kB")
    rows = sorted(sm.items(), key=lambda kv: -kv[1]["Rss"])
    tot = defaultdict(int)
    for name, v in rows:
        for k in v:
            tot[k] += v[k]
        if v["Rss"] < 40:
            continue
        print(f"{name[:42]:42} {v['Size']:8} {v['Rss']:7} {v['Pss']:7} {v['Shared_Clean']:7} {v['Private_Clean']:7} {v['Private_Dirty']:7}")
    print(f"{'total':42} {tot['Size']:8} {tot['Rss']:7} {tot['Pss']:7} {tot['Shared_Clean']:7} {tot['Private_Clean']:7} {tot['Private_Dirty']:7}")


if __name__ == "__main__":
    main()
