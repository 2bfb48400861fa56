#!/usr/bin/env node
/*
 * kafkajs-group.js — kafkajs (pure JS) against ferry: a consumer group of
 * two members, then a producer, for ferry's integration tests.
 *
 *   node kafkajs-group.js -b BOOTSTRAP -t TOPIC -g GROUP -n COUNT [--timeout-ms MS]
 *
 * 1. Two consumers (two members, each with its own connections) join GROUP
 *    and subscribe to TOPIC from the beginning; we wait until both hold a
 *    non-empty assignment, the assignments are disjoint and cover every
 *    partition of the topic.
 * 2. A producer (acks=all) sends COUNT messages, key k-i, value "value i",
 *    in batches.
 * 3. Both members consume until COUNT messages arrived in total (or the
 *    timeout); offsets are committed by kafkajs as batches resolve.
 * Ends with one line "RESULT {json}" on stdout: per member the keys it
 * consumed and its assignment, the producer's result, the brokers of
 * admin.describeCluster(), and errors. kafkajs' log (DEBUG, one JSON object
 * per line) goes to stderr.
 */
'use strict';

const { Kafka, logLevel, Partitioners, PartitionAssigners } = require('kafkajs');

const o = { count: 1000, timeoutMs: 60000 };
{
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i++) {
    const v = a[i + 1];
    if (a[i] === '-b') o.bootstrap = v;
    else if (a[i] === '-t') o.topic = v;
    else if (a[i] === '-g') o.group = v;
    else if (a[i] === '-n') o.count = Number(v);
    else if (a[i] === '--timeout-ms') o.timeoutMs = Number(v);
    else {
      process.stderr.write('usage: kafkajs-group.js -b BOOTSTRAP -t TOPIC -g GROUP -n COUNT\n');
      process.exit(2);
    }
    i++;
  }
  if (!o.bootstrap || !o.topic || !o.group) process.exit(2);
}

const logCreator = () => ({ namespace, level, log }) => {
  const { message, ...extra } = log;
  process.stderr.write(JSON.stringify({ level, namespace, message, ...extra }) + '\n');
};

const kafka = new Kafka({
  clientId: 'ferry-it-kafkajs',
  brokers: o.bootstrap.split(','),
  logLevel: logLevel.DEBUG,
  logCreator,
  connectionTimeout: 10000,
  requestTimeout: 30000,
  retry: { retries: 8, initialRetryTime: 200 },
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const errors = [];

// The round-robin assigner, with the group leader's SyncGroup held back a
// little. librdkafka's mock group coordinator (2.12) moves a classic group to
// UP as soon as the leader's SyncGroup brings every member's assignment, and
// answers a follower's SyncGroup that arrives after that with
// INVALID_REQUEST (rdkafka_mock_cgrp.c: check_state() has no SyncGroup case
// for state UP). Both JoinGroup responses leave the mock at the same moment,
// so which SyncGroup comes first is a race, lost now and then under load. The
// delay lets the follower's SyncGroup arrive first, as it would with a real
// broker, which answers both in either order.
const SYNC_DELAY_MS = 500;
const delayedRoundRobin = (config) => {
  const rr = PartitionAssigners.roundRobin(config);
  return {
    name: rr.name,
    version: rr.version,
    protocol: (subscription) => rr.protocol(subscription),
    assign: async (group) => {
      await sleep(SYNC_DELAY_MS);
      return rr.assign(group);
    },
  };
};

async function main() {
  const t0 = Date.now();
  const admin = kafka.admin();
  await admin.connect();
  const meta = await admin.fetchTopicMetadata({ topics: [o.topic] });
  const allPartitions = meta.topics[0].partitions.map((p) => p.partitionId).sort((a, b) => a - b);
  const cluster = await admin.describeCluster();

  const members = [0, 1].map((idx) => ({
    idx,
    consumer: kafka.consumer({ groupId: o.group, sessionTimeout: 10000,
                               heartbeatInterval: 1000, rebalanceTimeout: 20000,
                               maxWaitTimeInMs: 250,
                               partitionAssigners: [delayedRoundRobin] }),
    keys: [],
    assignment: [],
    joins: 0,
    memberId: null,
  }));
  let total = 0;
  for (const m of members) {
    const c = m.consumer;
    c.on(c.events.GROUP_JOIN, (e) => {
      m.joins++;
      m.memberId = e.payload.memberId;
      m.assignment = ((e.payload.memberAssignment || {})[o.topic] || []).slice().sort((a, b) => a - b);
    });
    c.on(c.events.CRASH, (e) => errors.push(`member ${m.idx} crashed: ${e.payload.error}`));
    await c.connect();
    await c.subscribe({ topics: [o.topic], fromBeginning: true });
  }
  await Promise.all(members.map((m) => m.consumer.run({
    eachMessage: async ({ message }) => {
      m.keys.push(message.key ? message.key.toString() : null);
      total++;
    },
  })));

  // Wait for a complete, disjoint assignment over both members.
  const stable = () => {
    const [a, b] = members.map((m) => m.assignment);
    if (!a.length || !b.length) return false;
    const u = a.concat(b).sort((x, y) => x - y);
    return JSON.stringify(u) === JSON.stringify(allPartitions);
  };
  const joinDeadline = Date.now() + 30000;
  while (!stable() && Date.now() < joinDeadline) await sleep(50);
  const joinedMs = Date.now() - t0;
  if (!stable()) {
    errors.push(`group never settled: assignments ${JSON.stringify(members.map((m) => m.assignment))} ` +
                `over partitions ${JSON.stringify(allPartitions)}`);
  }

  const producer = kafka.producer({ createPartitioner: Partitioners.DefaultPartitioner,
                                    allowAutoTopicCreation: false });
  await producer.connect();
  let acked = 0;
  const batch = 100;
  for (let i = 0; i < o.count; i += batch) {
    const messages = [];
    for (let j = i; j < Math.min(o.count, i + batch); j++) {
      messages.push({ key: `k-${j}`, value: `value ${j}` });
    }
    const res = await producer.send({ topic: o.topic, acks: -1, messages });
    for (const r of res) if (r.errorCode) errors.push(`produce error ${r.errorCode} on partition ${r.partition}`);
    acked += messages.length;
  }
  await producer.disconnect();
  const producedMs = Date.now() - t0;

  const deadline = Date.now() + o.timeoutMs;
  while (total < o.count && Date.now() < deadline) await sleep(50);
  // A short grace period: anything consumed twice shows up now.
  await sleep(500);
  const consumedMs = Date.now() - t0;

  // (kafkajs 2.2.4 cannot parse the 2.12 mock's LeaveGroup v3 response and
  // logs an error for it; that is between kafkajs and the mock.)
  await Promise.all(members.map((m) => m.consumer.disconnect()));
  await admin.disconnect();

  process.stdout.write('RESULT ' + JSON.stringify({
    partitions: allPartitions,
    brokers: cluster.brokers.map((b) => ({ id: b.nodeId, host: b.host, port: b.port })),
    acked,
    members: members.map((m) => ({ memberId: m.memberId, assignment: m.assignment, joins: m.joins,
                                   keys: m.keys })),
    errors,
    timings: { joinedMs, producedMs, consumedMs },
  }) + '\n');
}

const hard = setTimeout(() => {
  process.stderr.write('kafkajs-group: hard time limit reached\n');
  process.exit(3);
}, o.timeoutMs + 90000);
hard.unref();
main().then(() => process.exit(0), (e) => {
  process.stderr.write(`kafkajs-group: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
