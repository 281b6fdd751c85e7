"""The official RocketMQ C++ client (PyPI `rocketmq` 0.4.4) as the peer of
the Sluice client: it produces messages the Sluice client consumes, and
consumes messages the Sluice client produced.

Usage:
  python3 cpp_peer.py produce NAMESRV TOPIC COUNT
  python3 cpp_peer.py produce_batch NAMESRV TOPIC COUNT
  python3 cpp_peer.py consume NAMESRV TOPIC COUNT
  python3 cpp_peer.py consume_twice NAMESRV TOPIC COUNT

`produce_batch` sends all COUNT messages in one `send_batch` (the C++
client sends a batch as SEND_MESSAGE with the header's batch flag set).
`consume_twice` consumes all COUNT, prints FIRST, then waits for all COUNT
to arrive a second time: an offset reset pushed by the broker
(RESET_CONSUMER_CLIENT_OFFSET) must reach it.

Message i has body "<who>-i", tag TagA/TagB by parity, key "key-i" and the
user property idx=i. `consume` checks every field of every message and
exits non-zero on any difference; it prints OK when all COUNT arrived.

With SLUICE_ACCESS_KEY and SLUICE_SECRET_KEY in the environment, every
client signs its requests (`set_session_credentials`, RocketMQ ACL 1.0); a
send the broker refuses prints "FAIL: ..." with the client's error text.
"""
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer

MODE, NAMESRV, TOPIC, COUNT = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
DEADLINE_S = 60


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def credentials(client):
    ak, sk = os.environ.get("SLUICE_ACCESS_KEY"), os.environ.get("SLUICE_SECRET_KEY")
    if ak and sk:
        client.set_session_credentials(ak, sk, "ALIYUN")


def broker_remarks():
    """The broker's answers to refused sends, as the C++ client logged them
    (its exception, raised after its retries, names only the route)."""
    path = os.path.expanduser("~/logs/rocketmq-cpp/%d_rocketmq-cpp.log.0" % os.getpid())
    # The client's logger writes asynchronously: under load its last lines
    # land a moment after the client returns (CI saw an empty read once).
    for _ in range(30):
        try:
            with open(path, errors="replace") as f:
                found = [l.strip() for l in f if "processSendResponse error remark:" in l]
        except OSError:
            found = []
        if found:
            return found
        time.sleep(0.1)
    return []


def produce():
    p = Producer("cpp-peer-producer")
    p.set_namesrv_addr(NAMESRV)
    credentials(p)
    p.start()
    error = None
    try:
        for i in range(COUNT):
            m = Message(TOPIC)
            m.set_keys("key-%d" % i)
            m.set_tags("TagA" if i % 2 == 0 else "TagB")
            m.set_property("idx", str(i))
            m.set_body("cpp-%d" % i)
            try:
                r = p.send_sync(m)
            except Exception as e:  # the client raises after its retries
                error = "send %d raised %s: %s" % (i, type(e).__name__, e)
                break
            if int(r.status) != 0:
                fail("send %d returned status %s" % (i, r.status))
    finally:
        p.shutdown()
    if error:
        fail(error + "; broker said: " + " | ".join(broker_remarks()[-1:]))
    print("OK sent %d" % COUNT, flush=True)


def message(i):
    m = Message(TOPIC)
    m.set_keys("key-%d" % i)
    m.set_tags("TagA" if i % 2 == 0 else "TagB")
    m.set_property("idx", str(i))
    m.set_body("cpp-%d" % i)
    return m


def produce_batch():
    p = Producer("cpp-peer-batch-producer")
    p.set_namesrv_addr(NAMESRV)
    credentials(p)
    p.start()
    try:
        r = p.send_batch([message(i) for i in range(COUNT)])
        if int(r.status) != 0:
            fail("batch send returned status %s" % r.status)
    finally:
        p.shutdown()
    print("OK sent batch of %d" % COUNT, flush=True)


def consume(rounds=1):
    got, problems, lock = {}, [], threading.Lock()

    def on_message(msg):
        body = msg.body.decode()
        with lock:
            try:
                i = int(body.split("-", 1)[1])
            except (IndexError, ValueError):
                problems.append("unexpected body %r" % body)
                return
            want_tag = "TagA" if i % 2 == 0 else "TagB"
            if msg.tags.decode() != want_tag:
                problems.append("%s: tags %r" % (body, msg.tags.decode()))
            if msg.keys.decode() != "key-%d" % i:
                problems.append("%s: keys %r" % (body, msg.keys.decode()))
            if msg.get_property("idx").decode() != str(i):
                problems.append("%s: idx %r" % (body, msg.get_property("idx")))
            got[body] = got.get(body, 0) + 1

    def complete(times):
        return len(got) >= COUNT and all(n >= times for n in got.values())

    c = PushConsumer("cpp-peer-consumer-%s" % TOPIC)
    c.set_namesrv_addr(NAMESRV)
    credentials(c)
    c.subscribe(TOPIC, on_message, "*")
    c.start()
    try:
        for r in range(1, rounds + 1):
            deadline = time.time() + DEADLINE_S
            while time.time() < deadline:
                with lock:
                    if complete(r):
                        break
                time.sleep(0.2)
            with lock:
                if not complete(r):
                    fail("round %d: received %d distinct of %d, %d in all"
                         % (r, len(got), COUNT, sum(got.values())))
            if r < rounds:
                # Let the consumer commit its offsets before the reset.
                time.sleep(6)
                print("FIRST", flush=True)
    finally:
        c.shutdown()
    if problems:
        fail("; ".join(problems[:5]))
    print("OK received %d" % COUNT, flush=True)


if __name__ == "__main__":
    {
        "produce": produce,
        "produce_batch": produce_batch,
        "consume": consume,
        "consume_twice": lambda: consume(rounds=2),
    }[MODE]()
