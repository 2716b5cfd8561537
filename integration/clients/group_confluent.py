"""group_confluent.py: a confluent-kafka-python (librdkafka) subscribe() reader for the
integration suite (integration/groups_clients_test.go). It joins GROUP, subscribes to
TOPIC (auto.offset.reset=earliest), prints each record as one JSON line
{"partition","offset","key","value"} (key and value base64) on stdout, commits
synchronously what it printed, and exits 0 once it has printed MAX records or no record
came for IDLE_MS after the first assignment. STRATEGY, when given, is librdkafka's
partition.assignment.strategy (cooperative-sticky: incremental rebalances). Run with Debian's
/usr/bin/python3 (scripts/setup installs python3-confluent-kafka).

    /usr/bin/python3 group_confluent.py BROKER GROUP TOPIC MAX IDLE_MS [STRATEGY]
"""
import base64
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def b64(b):
    return None if b is None else base64.b64encode(b).decode("ascii")


def main():
    if len(sys.argv) not in (6, 7):
        print("usage: group_confluent.py BROKER GROUP TOPIC MAX IDLE_MS [STRATEGY]", file=sys.stderr)
        return 2
    broker, group, topic, max_n, idle_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    assigned = []

    def on_assign(consumer, parts):
        assigned.append(time.monotonic())
        print("confluent-kafka: assigned %s" % sorted(p.partition for p in parts), file=sys.stderr)

    def on_revoke(consumer, parts):
        print("confluent-kafka: revoked %s" % sorted(p.partition for p in parts), file=sys.stderr)

    conf = {
        "bootstrap.servers": broker,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 10000,
        "heartbeat.interval.ms": 1000,
        "broker.address.family": "v4",
    }
    if len(sys.argv) == 7:
        conf["partition.assignment.strategy"] = sys.argv[6]
    c = Consumer(conf)
    c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    printed = 0
    last = time.monotonic()
    nxt = {}
    try:
        while printed < max_n:
            m = c.poll(0.2)
            now = time.monotonic()
            if m is None:
                if assigned and now - max(last, assigned[0]) > idle_ms / 1000.0:
                    break
                continue
            if m.error():
                if m.error().code() == -191:  # _PARTITION_EOF (not enabled, kept for clarity)
                    continue
                raise KafkaException(m.error())
            sys.stdout.write(json.dumps({"partition": m.partition(), "offset": m.offset(),
                                         "key": b64(m.key()), "value": b64(m.value())}) + "\n")
            printed += 1
            last = now
            nxt[m.partition()] = m.offset() + 1
        if nxt:
            c.commit(offsets=[TopicPartition(topic, p, o) for p, o in sorted(nxt.items())], asynchronous=False)
    finally:
        c.close()
    sys.stdout.flush()
    print("confluent-kafka: printed %d, committed %s" % (printed, sorted(nxt.items())), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
