"""The official RocketMQ C++ client (PyPI `rocketmq` 0.4.4) as the peer of
the Sluice client: it produces messages the Sluice client consumes, and
consumes messages the Sluice client produced.

Usage:
  python3 cpp_peer.py produce NAMESRV TOPIC COUNT
  python3 cpp_peer.py consume NAMESRV TOPIC COUNT

Message i has body "<who>-i", tag TagA/TagB by parity, key "key-i" and the
user property idx=i. `consume` checks every field of every message and
exits non-zero on any difference; it prints OK when all COUNT arrived.
"""
import sys
import threading
import time

from rocketmq.client import Message, Producer, PushConsumer

MODE, NAMESRV, TOPIC, COUNT = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
DEADLINE_S = 60


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def produce():
    p = Producer("cpp-peer-producer")
    p.set_namesrv_addr(NAMESRV)
    p.start()
    try:
        for i in range(COUNT):
            m = Message(TOPIC)
            m.set_keys("key-%d" % i)
            m.set_tags("TagA" if i % 2 == 0 else "TagB")
            m.set_property("idx", str(i))
            m.set_body("cpp-%d" % i)
            r = p.send_sync(m)
            if int(r.status) != 0:
                fail("send %d returned status %s" % (i, r.status))
    finally:
        p.shutdown()
    print("OK sent %d" % COUNT, flush=True)


def consume():
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
            got[body] = True

    c = PushConsumer("cpp-peer-consumer")
    c.set_namesrv_addr(NAMESRV)
    c.subscribe(TOPIC, on_message, "*")
    c.start()
    try:
        deadline = time.time() + DEADLINE_S
        while time.time() < deadline:
            with lock:
                if len(got) >= COUNT:
                    break
            time.sleep(0.2)
    finally:
        c.shutdown()
    if problems:
        fail("; ".join(problems[:5]))
    if len(got) != COUNT:
        fail("received %d of %d" % (len(got), COUNT))
    print("OK received %d" % COUNT, flush=True)


if __name__ == "__main__":
    {"produce": produce, "consume": consume}[MODE]()
