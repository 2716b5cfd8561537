// group_kafkajs.js: a kafkajs consumer-group reader for the integration suite
// (integration/groups_clients_test.go). It joins GROUP, subscribes to TOPIC from
// the earliest offset when the group has no commit, prints each record as one JSON
// line {"partition","offset","key","value"} (key and value base64) on stdout,
// commits what it printed, and exits 0 once it has printed MAX records or no record
// came for IDLE_MS after the first assignment. Run from the repository with
// NODE_PATH=.tools/node/node_modules (scripts/setup installs kafkajs there).
//
//   node group_kafkajs.js BROKER GROUP TOPIC MAX IDLE_MS
'use strict';
const { Kafka, logLevel } = require('kafkajs');

const [broker, groupId, topic, maxArg, idleArg] = process.argv.slice(2);
if (!broker || !groupId || !topic || !maxArg || !idleArg) {
  console.error('usage: node group_kafkajs.js BROKER GROUP TOPIC MAX IDLE_MS');
  process.exit(2);
}
const max = Number(maxArg);
const idleMs = Number(idleArg);

async function main() {
  const kafka = new Kafka({ clientId: 'tiered-it-kafkajs', brokers: [broker], logLevel: logLevel.WARN, retry: { retries: 8 } });
  const consumer = kafka.consumer({ groupId, sessionTimeout: 10000, heartbeatInterval: 1000, rebalanceTimeout: 10000 });
  let printed = 0;
  let last = Date.now();
  let assigned = false;
  let done = false;
  const next = new Map(); // partition -> next offset to commit
  consumer.on(consumer.events.GROUP_JOIN, () => { assigned = true; last = Date.now(); });
  await consumer.connect();
  await consumer.subscribe({ topics: [topic], fromBeginning: true });
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
      for (const m of batch.messages) {
        if (done || printed >= max) { done = true; break; }
        process.stdout.write(JSON.stringify({
          partition: batch.partition,
          offset: Number(m.offset),
          key: m.key === null ? null : m.key.toString('base64'),
          value: m.value === null ? null : m.value.toString('base64'),
        }) + '\n');
        printed++;
        last = Date.now();
        next.set(batch.partition, (BigInt(m.offset) + 1n).toString());
        resolveOffset(m.offset);
      }
      await heartbeat();
    },
  });
  while (!done && printed < max && !(assigned && Date.now() - last > idleMs)) {
    await new Promise((r) => setTimeout(r, 100));
  }
  done = true;
  consumer.pause([{ topic }]);
  const offsets = [...next].map(([partition, offset]) => ({ topic, partition, offset }));
  if (offsets.length > 0) {
    await consumer.commitOffsets(offsets);
  }
  await consumer.disconnect();
  console.error(`kafkajs: printed ${printed}, committed ${JSON.stringify(offsets)}`);
}

main().catch((err) => {
  console.error('kafkajs:', err && err.stack ? err.stack : err);
  process.exit(1);
});
