"""Interop check with the official RocketMQ C++ client (PyPI `rocketmq` 0.4.4,
which bundles librocketmq) against a running Sluice name server.

Usage: python3 cpp_client.py NAMESRV_ADDR TOPIC COUNT

Sends COUNT messages with keys and tags, then checks that a pull consumer
reads them all, that a clustering push consumer receives them all, and that
a tag subscription receives exactly its tag. Exits non-zero on any failure.
"""
import sys
import threading
import time

from rocketmq.client import Message, PullConsumer, PushConsumer, Producer

NAMESRV, TOPIC, COUNT = sys.argv[1], sys.argv[2], int(sys.argv[3])
DEADLINE_S = 90


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def body_of(i):
    return "body-%d" % i


def send_all():
    p = Producer("interop-producer")
    p.set_namesrv_addr(NAMESRV)
    p.start()
    try:
        for i in range(COUNT):
            m = Message(TOPIC)
            m.set_keys("key-%d" % i)
            m.set_tags("TagA" if i % 2 == 0 else "TagB")
            m.set_property("idx", str(i))
            m.set_body(body_of(i))
            r = p.send_sync(m)
            if int(r.status) != 0:
                fail("send %d returned status %s" % (i, r.status))
    finally:
        p.shutdown()
    print("sent %d" % COUNT, flush=True)


def pull_all():
    c = PullConsumer("interop-pull")
    c.set_namesrv_addr(NAMESRV)
    c.start()
    seen = {}
    try:
        deadline = time.time() + DEADLINE_S
        while len(seen) < COUNT and time.time() < deadline:
            for msg in c.pull(TOPIC):
                body = msg.body.decode()
                if msg.get_property("idx") is None:
                    fail("user property lost on %s" % body)
                seen[body] = (msg.tags.decode(), msg.keys.decode())
    finally:
        c.shutdown()
    want = {body_of(i) for i in range(COUNT)}
    if set(seen) != want:
        fail("pull consumer read %d of %d" % (len(set(seen) & want), COUNT))
    for i in range(COUNT):
        tags, keys = seen[body_of(i)]
        if tags != ("TagA" if i % 2 == 0 else "TagB") or keys != "key-%d" % i:
            fail("message %d came back with tags %r keys %r" % (i, tags, keys))
    print("pull consumer read all %d" % COUNT, flush=True)


def push_collect(group, expression, expect):
    got, lock = {}, threading.Lock()

    def on_message(msg):
        with lock:
            got[msg.body.decode()] = msg.tags.decode()

    c = PushConsumer(group)
    c.set_namesrv_addr(NAMESRV)
    c.subscribe(TOPIC, on_message, expression)
    c.start()
    try:
        deadline = time.time() + DEADLINE_S
        while time.time() < deadline:
            with lock:
                if len(got) >= expect:
                    break
            time.sleep(0.2)
        time.sleep(2)  # anything beyond `expect` would show up now
    finally:
        c.shutdown()
    return got


def main():
    send_all()
    pull_all()
    got = push_collect("interop-push-all", "*", COUNT)
    if set(got) != {body_of(i) for i in range(COUNT)}:
        fail("push consumer received %d of %d" % (len(got), COUNT))
    print("push consumer received all %d" % COUNT, flush=True)
    tag_a = push_collect("interop-push-taga", "TagA", (COUNT + 1) // 2)
    wrong = [b for b, t in tag_a.items() if t != "TagA"]
    if wrong:
        fail("tag subscription received other tags: %s" % wrong[:5])
    if len(tag_a) != (COUNT + 1) // 2:
        fail("tag subscription received %d of %d" % (len(tag_a), (COUNT + 1) // 2))
    print("tag subscription received exactly its %d" % len(tag_a), flush=True)
    print("OK", flush=True)


if __name__ == "__main__":
    main()
