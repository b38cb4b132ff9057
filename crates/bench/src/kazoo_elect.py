#!/usr/bin/env python3
"""The stock ZooKeeper election for `tenure bench elect --store zk`: kazoo's
Election recipe (kazoo.recipe.election, a lock under the election's path).

Prints "queued <path>" once its candidacy is in the election, "elected
<path>" when kazoo's run() calls the leader function, and leads until
SIGTERM or SIGINT, on which it leaves the election (the lock is released,
the next candidate is woken) and closes its session.
"""

import argparse
import signal
import sys
import threading
import time

from kazoo.client import KazooClient

# One line at a time: the leader function runs on kazoo's thread, and
# print() writes a line and its newline separately.
OUT = threading.Lock()


def say(line: str) -> None:
    with OUT:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


# How long a candidacy may take to appear in the election's contenders.
QUEUE_TIMEOUT_S = 20.0
QUEUE_POLL_S = 0.005


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--hosts", required=True, help="host:port,... of the ensemble")
    p.add_argument("--timeout", type=float, required=True, help="session timeout, seconds")
    p.add_argument("--path", required=True, help="the election's znode path")
    p.add_argument("--value", required=True, help="this candidate's identifier")
    a = p.parse_args()

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())

    zk = KazooClient(hosts=a.hosts, timeout=a.timeout)
    zk.start(timeout=QUEUE_TIMEOUT_S)
    election = zk.Election(a.path, a.value)

    def lead() -> None:
        say(f"elected {a.path}")
        stop.wait()

    runner = threading.Thread(target=election.run, args=(lead,), daemon=True)
    runner.start()
    until = time.monotonic() + QUEUE_TIMEOUT_S
    while a.value not in election.contenders():
        if time.monotonic() > until or stop.is_set():
            print("not queued in time", file=sys.stderr, flush=True)
            return 1
        time.sleep(QUEUE_POLL_S)
    say(f"queued {a.path}")

    while not stop.wait(0.1):
        if not runner.is_alive():
            print("the election ended", file=sys.stderr, flush=True)
            return 1
    election.cancel()
    runner.join(timeout=5)
    zk.stop()
    zk.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
