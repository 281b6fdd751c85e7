"""Scenarios of the official RocketMQ 5 Python client (PyPI
rocketmq-python-client 5.1.2) against a Sluice 5.x endpoint, for
client/tests/grpc_python.rs. Usage: py5_scenarios.py SCENARIO ENDPOINT TOPIC
[ARGS...]. Prints one JSON object; exits non-zero on any client error."""

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
    return {"id": m.message_id, "body": m.body.decode(), "tag": m.tag, "keys": sorted(m.keys or []),
            "props": dict(m.properties or {}), "group": m.message_group, "attempt": m.delivery_attempt}


def receive_all(consumer, want, invisible=15, deadline_s=30, ack=True):
    got, deadline = [], time.time() + deadline_s
    while len(got) < want and time.time() < deadline:
        for m in consumer.receive(32, invisible):
            got.append((m, time.time()))
            if ack:
                consumer.ack(m)
    return got


def simple(group, expression="*"):
    c = SimpleConsumer(CONFIG, group, {TOPIC: FilterExpression(expression)}, await_duration=2)
    c.startup()
    return c


def produce(count, **kw):
    p = Producer(CONFIG, (TOPIC,))
    p.startup()
    try:
        return [p.send(message("m%d" % i, **kw)).message_id for i in range(count)]
    finally:
        p.shutdown()


def send_and_receive():
    """Normal sends with tag, keys and a property; a tag filter's group
    gets only its tag; receive + ack drains everything once."""
    p = Producer(CONFIG, (TOPIC,))
    p.startup()
    sent = []
    for i in range(6):
        tag = "TagA" if i % 2 == 0 else "TagB"
        r = p.send(message("body %d" % i, tag=tag, keys="k%d" % i, props={"color": "blue"}))
        sent.append({"id": r.message_id, "tag": tag})
    p.shutdown()
    tagged = simple(TOPIC + "-a", "TagA")
    only_a = [view(m) for m, _ in receive_all(tagged, 3)]
    again = tagged.receive(32, 15)  # all acked: nothing comes back
    tagged.shutdown()
    return {"sent": sent, "tag_a": only_a, "again": len(again)}


def fifo():
    """Two message groups interleaved; each group's order is kept."""
    p = Producer(CONFIG, (TOPIC,))
    p.startup()
    sent = []
    for i in range(10):
        group = "g%d" % (i % 2)
        p.send(message("%s-%d" % (group, i // 2), group=group))
        sent.append("%s-%d" % (group, i // 2))
    p.shutdown()
    c = simple(TOPIC + "-f")
    got = [view(m) for m, _ in receive_all(c, 10)]
    c.shutdown()
    return {"sent": sent, "received": got}


def delay(seconds):
    due_ms = int(time.time() * 1000) + int(seconds) * 1000
    produce(1, delivery_ms=due_ms)
    c = simple(TOPIC + "-d")
    got = receive_all(c, 1, deadline_s=int(seconds) + 20)
    c.shutdown()
    return {"due_ms": due_ms, "received_ms": [int(at * 1000) for _, at in got]}


class Checker(TransactionChecker):
    def check(self, message):
        return TransactionResolution.COMMIT


def transaction():
    """A committed, a rolled-back and an unended half (committed by the
    checker on the broker's check-back)."""
    p = Producer(CONFIG, (TOPIC,), checker=Checker())
    p.startup()
    ids = {}
    for kind in ("commit", "rollback", "check"):
        tx = p.begin_transaction()
        ids[kind] = p.send(message(kind), tx).message_id
        if kind == "commit":
            tx.commit()
        elif kind == "rollback":
            tx.rollback()
    c = simple(TOPIC + "-t")
    got = [view(m) for m, _ in receive_all(c, 2, deadline_s=40)]
    time.sleep(3)
    late = [view(m) for m in c.receive(32, 15)]
    c.shutdown()
    p.shutdown()
    return {"ids": ids, "received": got + late}


def redelivery():
    """Not acked: received again after the invisible duration, attempt 2;
    a renewed one (change_invisible_duration) only after its new time."""
    produce(2)
    c = simple(TOPIC + "-r")
    first = receive_all(c, 2, invisible=2, ack=False)
    renewed = first[1][0]
    c.change_invisible_duration(renewed, 8)
    second = receive_all(c, 1, invisible=30, ack=True, deadline_s=6)
    third = receive_all(c, 1, invisible=30, ack=True, deadline_s=12)
    c.shutdown()
    t0 = first[0][1]
    return {"first": [view(m) for m, _ in first],
            "second": [dict(view(m), after_s=at - t0) for m, at in second],
            "third": [dict(view(m), after_s=at - t0) for m, at in third],
            "renewed_id": renewed.message_id}


class Counting(MessageListener):
    def __init__(self):
        self.seen, self.lock = [], threading.Lock()

    def consume(self, message):
        with self.lock:
            self.seen.append(message.message_id)
        return ConsumeResult.SUCCESS


def push(count):
    sent = produce(int(count))
    listener = Counting()
    c = PushConsumer(CONFIG, TOPIC + "-p", listener, {TOPIC: FilterExpression("*")})
    c.startup()
    deadline = time.time() + 40
    while time.time() < deadline and len(set(listener.seen)) < len(sent):
        time.sleep(0.2)
    c.shutdown()
    return {"sent": sorted(sent), "seen": sorted(set(listener.seen))}


def produce_n(count):
    return {"sent": produce(int(count), tag="Mixed", keys="mixed", props={"from": "5x"})}


def consume_n(group, count):
    c = simple(group)
    got = receive_all(c, int(count), deadline_s=60)
    extra = c.receive(32, 15)
    c.shutdown()
    return {"received": [view(m) for m, _ in got], "extra": len(extra)}


SCENARIOS = {"send-and-receive": send_and_receive, "fifo": fifo, "delay": delay,
             "transaction": transaction, "redelivery": redelivery, "push": push,
             "produce": produce_n, "consume": consume_n}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[SCENARIO](*ARGS)))
    sys.stdout.flush()
