#!/usr/bin/env node
/*
 * rdkafka-client.js — a node-rdkafka (librdkafka 2.12) client for ferry's
 * integration tests.
 *
 *   node rdkafka-client.js produce  -b BOOTSTRAP -t TOPIC -n COUNT [-k PREFIX]
 *                                   [--follow] [--value-bytes N] [--debug CONTEXTS]
 *   node rdkafka-client.js consume  -b BOOTSTRAP -t TOPIC -n COUNT -g GROUP
 *                                   [--timeout-ms MS] [--value-bytes N] [--debug CONTEXTS]
 *   node rdkafka-client.js metadata -b BOOTSTRAP [--debug CONTEXTS]
 *
 * produce: an idempotent producer sends COUNT messages, key PREFIX-i, value
 *   "value i" (padded with dots to N bytes with --value-bytes N), and waits
 *   for every delivery report. With --follow it keeps
 *   producing (about one message per ms) until stdin reaches EOF and prints
 *   "PROGRESS delivered=N errors=N" lines on stdout as it goes.
 * consume: a consumer in group GROUP reads from the earliest offset until it
 *   has COUNT messages (or the timeout), committing as it goes. With
 *   --value-bytes the values are reported as "<value without its trailing
 *   dots>|<length>".
 * Every mode ends with one line "RESULT {json}" on stdout: counts, errors,
 *   keys/values where relevant, and the brokers of the client's last
 *   metadata (id, host, port). Exit status 0 unless the client itself could
 *   not run; the test decides what counts as a failure.
 * librdkafka's log (with --debug) goes to stderr, one line per entry:
 *   "LOG <severity> <facility> <message>".
 */
'use strict';

const Kafka = require('node-rdkafka');

function parseArgs(argv) {
  const o = { mode: argv[0], count: 0, prefix: 'm', follow: false, debug: '',
              timeoutMs: 60000, valueBytes: 0 };
  for (let i = 1; i < argv.length; i++) {
    const a = argv[i];
    const next = () => {
      if (i + 1 >= argv.length) usage();
      return argv[++i];
    };
    if (a === '-b') o.bootstrap = next();
    else if (a === '-t') o.topic = next();
    else if (a === '-n') o.count = Number(next());
    else if (a === '-k') o.prefix = next();
    else if (a === '-g') o.group = next();
    else if (a === '--follow') o.follow = true;
    else if (a === '--debug') o.debug = next();
    else if (a === '--timeout-ms') o.timeoutMs = Number(next());
    else if (a === '--value-bytes') o.valueBytes = Number(next());
    else usage();
  }
  if (!['produce', 'consume', 'metadata'].includes(o.mode) || !o.bootstrap) usage();
  if (o.mode !== 'metadata' && !o.topic) usage();
  if (o.mode === 'consume' && !o.group) usage();
  return o;
}

function usage() {
  process.stderr.write('usage: rdkafka-client.js produce|consume|metadata -b BOOTSTRAP ' +
                       '[-t TOPIC] [-n COUNT] [-k PREFIX] [-g GROUP] [--follow] ' +
                       '[--debug CONTEXTS] [--timeout-ms MS] [--value-bytes N]\n');
  process.exit(2);
}

const opts = parseArgs(process.argv.slice(2));

function baseConf() {
  const c = {
    'bootstrap.servers': opts.bootstrap,
    'client.id': `ferry-it-node-rdkafka-${opts.mode}`,
    'event_cb': true,
    'log_level': 7,
    'socket.timeout.ms': 20000,
  };
  if (opts.debug) c.debug = opts.debug;
  return c;
}

function attachLog(client) {
  client.on('event.log', (l) => {
    process.stderr.write(`LOG ${l.severity} ${l.fac} ${String(l.message).replace(/\n/g, ' ')}\n`);
  });
  client.on('event.error', (e) => {
    process.stderr.write(`ERROR ${e.code} ${e.message}\n`);
  });
}

function result(obj) {
  process.stdout.write('RESULT ' + JSON.stringify(obj) + '\n');
}

function metadataBrokers(client) {
  return new Promise((resolve) => {
    client.getMetadata({ timeout: 10000 }, (err, md) => {
      if (err) return resolve({ error: String(err) });
      resolve({ brokers: md.brokers.map((b) => ({ id: b.id, host: b.host, port: b.port })),
                topics: md.topics.map((t) => ({ name: t.name,
                  partitions: t.partitions.map((p) => ({ id: p.id, leader: p.leader })) })) });
    });
  });
}

const connect = (client) => new Promise((resolve, reject) =>
  client.connect({ timeout: 20000 }, (err) => (err ? reject(err) : resolve())));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function produce() {
  const p = new Kafka.Producer(Object.assign(baseConf(), {
    'enable.idempotence': true,
    'dr_cb': true,
    'linger.ms': 5,
    'message.timeout.ms': 60000,
  }));
  attachLog(p);
  const errors = [];
  let delivered = 0;
  p.on('delivery-report', (err) => {
    if (err) errors.push(String(err.message || err));
    else delivered++;
  });
  await connect(p);
  p.setPollInterval(5);

  let produced = 0;
  const send = () => {
    const k = `${opts.prefix}-${produced}`;
    p.produce(opts.topic, null, Buffer.from(`value ${produced}`.padEnd(opts.valueBytes, '.')), k);
    produced++;
  };
  const t0 = Date.now();
  if (opts.follow) {
    let eof = false;
    process.stdin.on('data', () => {});
    process.stdin.on('end', () => { eof = true; });
    process.stdin.resume();
    const progress = setInterval(() => {
      process.stdout.write(`PROGRESS produced=${produced} delivered=${delivered} errors=${errors.length}\n`);
    }, 200);
    while (!eof) {
      for (let i = 0; i < 5 && !eof; i++) {
        try {
          send();
        } catch (e) {
          errors.push(`produce: ${e.message}`);
        }
      }
      await sleep(5);
    }
    clearInterval(progress);
  } else {
    for (let i = 0; i < opts.count; i++) {
      try {
        send();
      } catch (e) {
        errors.push(`produce: ${e.message}`);
      }
    }
  }
  await new Promise((resolve) => p.flush(60000, () => resolve()));
  // Delivery reports are served by the poll interval: wait for the last ones.
  const deadline = Date.now() + 10000;
  while (delivered + errors.length < produced && Date.now() < deadline) await sleep(20);
  const md = await metadataBrokers(p);
  result({ produced, delivered, errors: errors.slice(0, 20), errorCount: errors.length,
           elapsedMs: Date.now() - t0, metadata: md, librdkafka: Kafka.librdkafkaVersion });
  await new Promise((resolve) => p.disconnect(5000, () => resolve()));
}

async function consume() {
  const c = new Kafka.KafkaConsumer(Object.assign(baseConf(), {
    'group.id': opts.group,
    'enable.auto.commit': true,
    'auto.commit.interval.ms': 500,
    'session.timeout.ms': 10000,
  }), { 'auto.offset.reset': 'earliest' });
  attachLog(c);
  const errors = [];
  await connect(c);
  c.subscribe([opts.topic]);
  const records = [];
  const partitions = {};
  const t0 = Date.now();
  while (records.length < opts.count && Date.now() - t0 < opts.timeoutMs) {
    const batch = await new Promise((resolve) => c.consume(500, (err, msgs) => {
      if (err) {
        errors.push(String(err.message || err));
        return resolve([]);
      }
      resolve(msgs);
    }));
    for (const m of batch) {
      let v = m.value ? m.value.toString() : null;
      if (v !== null && opts.valueBytes)   /* "value i|LENGTH": the RESULT line stays small */
        v = `${v.replace(/\.+$/, '')}|${v.length}`;
      records.push([m.key ? m.key.toString() : null, v]);
      partitions[m.partition] = (partitions[m.partition] || 0) + 1;
    }
    if (batch.length === 0) await sleep(20);
  }
  try {
    c.commitSync(null);
  } catch (e) {
    errors.push(`commit: ${e.message}`);
  }
  const md = await metadataBrokers(c);
  result({ consumed: records.length, records, partitions, errors: errors.slice(0, 20),
           errorCount: errors.length, elapsedMs: Date.now() - t0, metadata: md,
           librdkafka: Kafka.librdkafkaVersion });
  await new Promise((resolve) => c.disconnect(() => resolve()));
}

async function metadata() {
  const p = new Kafka.Producer(baseConf());
  attachLog(p);
  await connect(p);
  result({ metadata: await metadataBrokers(p), librdkafka: Kafka.librdkafkaVersion });
  await new Promise((resolve) => p.disconnect(5000, () => resolve()));
}

const main = { produce, consume, metadata }[opts.mode];
const hardLimit = setTimeout(() => {
  process.stderr.write('rdkafka-client: hard time limit reached\n');
  process.exit(3);
}, opts.timeoutMs + 120000);
hardLimit.unref();
main().then(() => process.exit(0), (e) => {
  process.stderr.write(`rdkafka-client: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
