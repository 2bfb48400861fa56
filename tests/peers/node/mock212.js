#!/usr/bin/env node
/*
 * mock212.js — hosts librdkafka's mock Kafka cluster, in the version bundled
 * with node-rdkafka (2.12: Metadata v12, Produce v10, Fetch v16,
 * FindCoordinator, classic consumer groups, idempotent producers), for
 * ferry's integration tests.
 *
 *   node mock212.js [-b N] [-t TOPIC]...
 *
 * A node-rdkafka producer created with test.mock.num.brokers=N makes
 * librdkafka start an N-broker mock cluster inside this process (broker ids
 * 1..N, each on an ephemeral 127.0.0.1 port, reachable from other processes).
 * The brokers' addresses are read back with getMetadata. Each -t topic is
 * created by a metadata request that allows auto-creation (the mock gives it
 * 4 partitions, replication factor min(3, N)); the mock has no CreateTopics.
 * Then exactly one line
 *
 *   BOOTSTRAP=127.0.0.1:p1,127.0.0.1:p2,...      (ordered by broker id)
 *
 * is printed to stdout, as tests/peers/mock_cluster does. Commands on stdin,
 * one per line, answered with one line:
 *
 *   topic NAME     create a topic (auto-create, 4 partitions)   -> OK | ERR ...
 *   version        -> VERSION node-rdkafka=X librdkafka=Y
 *   bootstrap      -> BOOTSTRAP=...
 *   quit           -> OK, then exit
 *
 * EOF on stdin, SIGTERM or SIGINT exit 0. librdkafka logs go to stderr.
 * Test helper only.
 */
'use strict';

const readline = require('readline');
const Kafka = require('node-rdkafka');

function usage(code) {
  process.stderr.write('usage: mock212.js [-b BROKERS] [-t TOPIC]...\n');
  process.exit(code);
}

let brokers = 3;
const topics = [];
{
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i++) {
    if (a[i] === '-b' && i + 1 < a.length) {
      brokers = Number(a[++i]);
      if (!Number.isInteger(brokers) || brokers < 1 || brokers > 64) usage(2);
    } else if (a[i] === '-t' && i + 1 < a.length) {
      topics.push(a[++i].split(':')[0]);   // "name[:partitions]": count ignored
    } else if (a[i] === '-h') {
      usage(0);
    } else {
      usage(2);
    }
  }
}

function log(msg) {
  process.stderr.write(`mock212: ${msg}\n`);
}

let exiting = false;
function exit(code) {
  if (exiting) return;
  exiting = true;
  // disconnect() destroys the handle and with it the mock cluster; do not
  // wait long for it.
  setTimeout(() => process.exit(code), 2000).unref();
  try {
    host.disconnect(() => process.exit(code));
  } catch (e) {
    process.exit(code);
  }
}

// A signal ends the process at once: the mock cluster lives in it.
process.on('SIGTERM', () => process.exit(0));
process.on('SIGINT', () => process.exit(0));

const host = new Kafka.Producer({
  'client.id': 'mock212-host',
  'test.mock.num.brokers': brokers,
  'allow.auto.create.topics': true,
  'log_level': 4,
  'event_cb': true,
});
host.on('event.log', (l) => log(`${l.fac}: ${l.message}`));
host.on('event.error', (e) => log(`error: ${e}`));

function metadata(opts) {
  return new Promise((resolve, reject) => {
    host.getMetadata(Object.assign({ timeout: 5000 }, opts), (err, md) =>
      (err ? reject(err) : resolve(md)));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let bootstrapLine = null;

async function createTopic(name) {
  const deadline = Date.now() + 15000;
  let last = 'no metadata';
  while (Date.now() < deadline) {
    try {
      const md = await metadata({ topic: name, allTopics: false });
      const t = md.topics.find((x) => x.name === name);
      if (t && t.partitions.length > 0 && t.partitions.every((p) => p.leader > 0)) {
        return t.partitions.length;
      }
      last = JSON.stringify(t);
    } catch (e) {
      last = String(e);
    }
    await sleep(100);
  }
  throw new Error(`topic ${name} not created: ${last}`);
}

async function main() {
  await new Promise((resolve, reject) =>
    host.connect({ timeout: 10000 }, (err) => (err ? reject(err) : resolve())));
  const md = await metadata({});
  const bs = md.brokers.slice().sort((a, b) => a.id - b.id);
  if (bs.length !== brokers) throw new Error(`mock has ${bs.length} brokers, wanted ${brokers}`);
  bootstrapLine = 'BOOTSTRAP=' + bs.map((b) => `${b.host}:${b.port}`).join(',');
  for (const t of topics) {
    const n = await createTopic(t);
    log(`topic ${t}: ${n} partitions`);
  }
  log(`librdkafka ${Kafka.librdkafkaVersion}, ${brokers} brokers`);
  process.stdout.write(bootstrapLine + '\n');

  const rl = readline.createInterface({ input: process.stdin, terminal: false });
  let queue = Promise.resolve();
  rl.on('line', (line) => {
    queue = queue.then(() => command(line.trim()));
  });
  rl.on('close', () => queue.then(() => exit(0)));
}

async function command(line) {
  if (!line) return;
  const argv = line.split(/\s+/);
  const reply = (s) => process.stdout.write(s + '\n');
  switch (argv[0]) {
    case 'topic':
      if (argv.length < 2) return reply('ERR usage: topic NAME');
      try {
        await createTopic(argv[1]);
        return reply('OK');
      } catch (e) {
        return reply(`ERR ${e.message}`);
      }
    case 'version':
      return reply(`VERSION node-rdkafka=${require('node-rdkafka/package.json').version} ` +
                   `librdkafka=${Kafka.librdkafkaVersion}`);
    case 'bootstrap':
      return reply(bootstrapLine);
    case 'quit':
      reply('OK');
      return exit(0);
    default:
      return reply(`ERR unknown command '${argv[0]}'`);
  }
}

main().catch((e) => {
  log(`fatal: ${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
