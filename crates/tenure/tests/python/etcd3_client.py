"""python-etcd3 (Debian's python3-etcd3) against one tenure node's etcd listener.

Run by crates/tenure/tests/serial/etcd_api.rs: argv = host port ca cert key.
Exits non-zero with a message on the first thing that differs from etcd.
"""
import sys
import time

import etcd3

host, port, ca, cert, key = sys.argv[1:6]
c = etcd3.client(host=host, port=int(port), ca_cert=ca, cert_cert=cert, cert_key=key, timeout=10)


def check(cond, what):
    if not cond:
        sys.exit("python-etcd3: " + what)


status = c.status()
check(status.version.startswith("3.4"), "status version " + status.version)
check(status.leader is not None, "status names no leader")

c.put("py/a", "x")
value, meta = c.get("py/a")
check(value == b"x" and meta.version == 1, "get after put: %r" % (value,))

lease = c.lease(10)
check(lease.granted_ttl == 10, "granted ttl %r" % lease.granted_ttl)
c.put("py/b", "y", lease=lease)
lease.refresh()
check(0 < lease.remaining_ttl <= 10, "remaining ttl %r" % lease.remaining_ttl)
check(b"py/b" in lease.keys, "lease keys %r" % lease.keys)
lease.revoke()
check(c.get("py/b")[0] is None, "a revoked lease's key is still there")

events = []
watch_id = c.add_watch_callback("py/w", lambda r: events.extend(getattr(r, "events", [])))
c.put("py/w", "1")
c.delete("py/w")
deadline = time.time() + 10
while len(events) < 2 and time.time() < deadline:
    time.sleep(0.05)
c.cancel_watch(watch_id)
kinds = [type(e).__name__ for e in events]
check(kinds == ["PutEvent", "DeleteEvent"], "watch events %r" % kinds)

# Uncontended only: in Debian's python3-etcd3 0.12 a contended acquire
# fails inside the client (its retry callback does not match Debian's
# tenacity: a TypeError, "wait() missing 1 required positional argument",
# raised in the client's own code). Contention is tested with etcdctl lock.
first = c.lock("py-lock", ttl=5)
check(first.acquire(timeout=5), "the lock was not acquired")
check(first.is_acquired(), "the lock is not held after acquire")
first.release()
check(not first.is_acquired(), "the lock is still held after release")
second = c.lock("py-lock", ttl=5)
check(second.acquire(timeout=5), "the lock was not acquired after its release")
second.release()
print("ok")
