"""Scenarios of the official RocketMQ 5 Python client (PyPI
rocketmq-python-client 5.1.2) against a Sluice 5.x endpoint, for
client/tests/grpc_python.rs. Usage: py5_scenarios.py SCENARIO ENDPOINT TOPIC
[ARGS...]. Prints one JSON object (every received message as `view` shows
it, with its delivery attempt and when it came); exits non-zero on any
client error."""

import json
import sys
import threading
import time

from rocketmq import (ClientConfiguration, ConsumeResult, Credentials, FilterExpression, Message,
                      MessageListener, Producer, PushConsumer, SimpleConsumer, TransactionChecker,
                      TransactionResolution)

SCENARIO, ENDPOINT, TOPIC = sys.argv[1:4]
ARGS = sys.argv[4:]
CONFIG = ClientConfiguration(ENDPOINT, Credentials(), request_timeout=5)


def message(body, tag=None, keys=None, group=None, delivery_ms=None, props=None):
    m = Message()
    m.topic, m.body = TOPIC, body.encode()
    if tag:
        m.tag = tag
    if keys:
        m.keys = keys
    if group:
        m.message_group = group
    if delivery_ms:
        m.delivery_timestamp = delivery_ms
    for k, v in (props or {}).items():
        m.add_property(k, v)
    return m


def view(m):
    return {"id": m.message_id, "topic": m.topic, "body": m.body.decode(), "tag": m.tag,
            "keys": sorted(m.keys or []), "props": dict(m.properties or {}),
            "group": m.message_group, "attempt": m.delivery_attempt, "type": m.message_type,
            "delivery_ms": m.delivery_timestamp, "corrupted": m.corrupted,
            "at_ms": int(time.time() * 1000)}


def indexed(i, who):
    """Message i in the shape the mixed test checks: body `<who>-i`, tag by
    parity, key `key-i`, property idx=i."""
    return message("%s-%d" % (who, i), tag="TagA" if i % 2 == 0 else "TagB", keys="key-%d" % i,
                   props={"idx": str(i)})


def receive_all(consumer, want, invisible=15, deadline_s=30, ack=True):
    got, deadline = [], time.time() + deadline_s
    while len(got) < want and time.time() < deadline:
        for m in consumer.receive(32, invisible):
            got.append(view(m))
            if ack:
                consumer.ack(m)
    return got


def simple(group, expression="*", await_s=2):
    c = SimpleConsumer(CONFIG, group, {TOPIC: FilterExpression(expression)}, await_duration=await_s)
    c.startup()
    return c


def producer(checker=None):
    p = Producer(CONFIG, (TOPIC,), checker=checker)
    p.startup()
    return p


def send_and_receive():
    """Normal sends with tag, keys and properties; a tag filter's group
    gets only its tag; acked (under a 2 s lease), nothing comes back."""
    p = producer()
    sent = []
    for i in range(6):
        tag = "TagA" if i % 2 == 0 else "TagB"
        r = p.send(message("body %d" % i, tag=tag, keys="k%d" % i,
                           props={"color": "blue", "idx": str(i)}))
        sent.append({"id": r.message_id, "tag": tag})
    p.shutdown()
    tagged = simple(TOPIC + "-a", "TagA")
    only_a = receive_all(tagged, 3, invisible=2)
    time.sleep(2.5)  # past every lease: an unacked message would be back
    again = [view(m) for m in tagged.receive(32, 15)]
    tagged.shutdown()
    return {"sent": sent, "tag_a": only_a, "again": again}


FIFO_ORDER = ["g0-0", "g0-1", "g1-0", "g0-2", "g1-1", "g0-3", "g1-2", "g0-4", "g1-3", "g1-4"]


def fifo(group):
    """Two message groups interleaved, consumed one message per receive by
    an orderly group. While g0-0 is unacked a receive gets nothing of g0;
    the first delivery of g0-1 is left to expire (2 s) and must come back
    before anything after it in its group."""
    p = producer()
    for body in FIFO_ORDER:
        p.send(message(body, group=body.split("-")[0]))
    p.shutdown()
    c = simple(group, await_s=1)
    deadline = time.time() + 20
    first = []
    while not first and time.time() < deadline:
        first = c.receive(1, 10)
    log = [view(m) for m in first]
    probe = c.receive(1, 10)
    log += [view(m) for m in probe]
    for m in first + probe:
        c.ack(m)
    acked = [m.body.decode() for m in first + probe]
    while len(acked) < len(FIFO_ORDER) and time.time() < deadline:
        for m in c.receive(1, 2):
            log.append(view(m))
            if m.body == b"g0-1" and m.delivery_attempt == 1:
                continue  # left to expire
            c.ack(m)
            acked.append(m.body.decode())
    c.shutdown()
    return {"sent": FIFO_ORDER, "probe": log[len(first):len(first) + len(probe)], "log": log,
            "acked": acked}


def delay(seconds):
    due_ms = int(time.time() * 1000) + int(seconds) * 1000
    p = producer()
    sent = p.send(message("later", delivery_ms=due_ms)).message_id
    p.shutdown()
    c = simple(TOPIC + "-d")
    got = receive_all(c, 1, deadline_s=int(seconds) + 20)
    c.shutdown()
    return {"id": sent, "due_ms": due_ms, "received": got}


class Checker(TransactionChecker):
    """Answers the broker's check-backs by the half's body, and records
    each one."""

    def __init__(self):
        self.checked, self.lock = [], threading.Lock()

    def check(self, message):
        with self.lock:
            self.checked.append(view(message))
        body = message.body.decode()
        return TransactionResolution.COMMIT if body == "check-commit" \
            else TransactionResolution.ROLLBACK


def transaction():
    """A committed, a rolled-back and two unended halves the checker
    resolves on the broker's check-back (one committed, one rolled back)."""
    checker = Checker()
    p = producer(checker)
    ids = {}
    for kind in ("commit", "rollback", "check-commit", "check-rollback"):
        tx = p.begin_transaction()
        ids[kind] = p.send(message(kind, keys=kind), tx).message_id
        if kind == "commit":
            tx.commit()
        elif kind == "rollback":
            tx.rollback()
    c = simple(TOPIC + "-t")
    got = receive_all(c, 2, deadline_s=30)
    deadline = time.time() + 20
    while time.time() < deadline:
        with checker.lock:
            if {"check-commit", "check-rollback"} <= {m["body"] for m in checker.checked}:
                break
        time.sleep(0.2)
    # Every half is resolved now: nothing else may arrive.
    late = [view(m) for m in c.receive(32, 15)]
    c.shutdown()
    p.shutdown()
    return {"ids": ids, "received": got + late, "checked": checker.checked}


def redelivery():
    """Three messages received unacked under a 2 s lease: m0 is left
    alone, m1's lease is renewed to 6 s, m2's is renewed and then acked
    with the renewed handle after its first lease ended. Receives go on
    all along (acking what they get) until 9 s after the renewals."""
    p = producer()
    for i in range(3):
        p.send(message("m%d" % i))
    p.shutdown()
    c = simple(TOPIC + "-r", await_s=1)
    first, deadline = {}, time.time() + 20
    while len(first) < 3 and time.time() < deadline:
        for m in c.receive(32, 2):
            first[m.body.decode()] = (m, view(m))
    m1, m2 = first["m1"][0], first["m2"][0]
    handle_before = m2.receipt_handle
    c.change_invisible_duration(m1, 6)
    c.change_invisible_duration(m2, 6)
    renewed_ms = int(time.time() * 1000)
    handles = {"before": handle_before, "after": m2.receipt_handle}
    m2_acked_ms, later = None, []
    while time.time() * 1000 < renewed_ms + 9000:
        if m2_acked_ms is None and time.time() * 1000 >= first["m2"][1]["at_ms"] + 2500:
            c.ack(m2)  # the renewed handle, after the first lease ended
            m2_acked_ms = int(time.time() * 1000)
        for m in c.receive(32, 30):
            later.append(view(m))
            c.ack(m)
    c.shutdown()
    return {"first": {b: v for b, (_, v) in first.items()}, "later": later, "handles": handles,
            "renewed_ms": renewed_ms, "m2_acked_ms": m2_acked_ms}


class Recording(MessageListener):
    """Records every delivery; fails the first attempt of `fail_body`;
    takes `busy_s` over each message."""

    def __init__(self, fail_body=None, busy_s=0.0):
        self.seen, self.lock = [], threading.Lock()
        self.fail_body, self.busy_s = fail_body, busy_s

    def consume(self, message):
        with self.lock:
            self.seen.append(view(message))
        time.sleep(self.busy_s)
        if message.body.decode() == self.fail_body and message.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def until_seen(listener, count, deadline_s):
    deadline = time.time() + deadline_s
    while time.time() < deadline:
        with listener.lock:
            if len(listener.seen) >= count:
                break
        time.sleep(0.1)
    time.sleep(1.5)  # a delivery the broker repeats would land here


def push(count, fail_body=None):
    """A PushConsumer gets everything sent before it started; the first
    delivery of `fail_body`, if named, is consumed with FAILURE."""
    p = producer()
    sent = [p.send(indexed(i, "push")).message_id for i in range(int(count))]
    p.shutdown()
    listener = Recording(fail_body)
    c = PushConsumer(CONFIG, TOPIC + "-p", listener, {TOPIC: FilterExpression("*")})
    c.startup()
    until_seen(listener, len(sent) + (1 if fail_body else 0), 30)
    c.shutdown()
    with listener.lock:
        return {"sent": sent, "seen": listener.seen}


FIFO_PUSH_ORDER = ["g0-0", "g1-0", "g0-1", "g1-1", "g0-2", "g1-2", "g0-3", "g1-3"]


def fifo_push(group):
    """A PushConsumer of an orderly group, 0.3 s on each message, while
    two message groups are sent 0.1 s apart: each group's next message
    arrives while the one before it is still being consumed."""
    listener = Recording(busy_s=0.3)
    c = PushConsumer(CONFIG, group, listener, {TOPIC: FilterExpression("*")})
    c.startup()
    time.sleep(1.5)  # its first assignment query
    p = producer()
    for body in FIFO_PUSH_ORDER:
        p.send(message(body, group=body.split("-")[0]))
        time.sleep(0.1)
    p.shutdown()
    until_seen(listener, len(FIFO_PUSH_ORDER), 15)
    fifo_mode = c.fifo
    c.shutdown()
    with listener.lock:
        return {"fifo": fifo_mode, "sent": FIFO_PUSH_ORDER, "seen": listener.seen}


def produce_n(count):
    p = producer()
    try:
        return {"sent": [p.send(indexed(i, "five")).message_id for i in range(int(count))]}
    finally:
        p.shutdown()


def consume_n(group, count):
    """Receives `count` under 8 s leases, acking each; then, past every
    lease, whatever comes back (an acked message must not)."""
    c = simple(group)
    got = receive_all(c, int(count), invisible=8, deadline_s=60)
    time.sleep(8.5)
    extra = [view(m) for m in c.receive(32, 15)]
    c.shutdown()
    return {"received": got, "extra": extra}


SCENARIOS = {"send-and-receive": send_and_receive, "fifo": fifo, "delay": delay,
             "transaction": transaction, "redelivery": redelivery, "push": push,
             "fifo-push": fifo_push,
             "produce": produce_n, "consume": consume_n}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[SCENARIO](*ARGS)))
    sys.stdout.flush()
