/*
 * The Java reference client in the roles of the transaction, consumer-group
 * and share-group scenarios (tests/integration/realkafka/test_txn.py,
 * test_groups.py, test_share.py): long-running peers a test starts, disturbs
 * (ferry reloads, worker kills, members joining and leaving) and stops by
 * creating a stop file. Each prints one JSON line at the end (stdout; the
 * client's own warnings go to stderr) and, with --progress FILE, rewrites
 * FILE with a small JSON document after every step, so a test can wait for
 * progress without parsing logs. Modes:
 *
 *   txn-produce    transactions of --txn-size records ("R-t-i", t the
 *                  transaction, i its record), every --abort-every'th
 *                  aborted on purpose, until the stop file; then one
 *                  committed END record ("R-END") per partition.
 *                  Result: committed, aborted, unknown (transaction numbers).
 *   txn-transform  consume-transform-produce: reads --topic read_committed in
 *                  group --group, writes "T:" + value to --out-topic (same
 *                  partition, same key) and commits the consumed offsets in
 *                  the same transaction (sendOffsetsToTransaction); on an
 *                  aborted transaction it rewinds to the group's committed
 *                  offsets. Stops once every input partition's END went out.
 *   txn-verify     read_committed reader of --topics A,B (assigned, from the
 *                  beginning) until an END on every partition; per topic: the
 *                  records of each transaction and the duplicates.
 *   group-member   a member of consumer group --group (--group-protocol
 *                  classic|consumer) reading "R-i" records, committing after
 *                  every poll and on revocation, until the stop file; then
 *                  leaves. With --describe, the group as Admin describes it
 *                  (coordinator, type, state) before it leaves.
 *   share-consume  a member of share group --group (KafkaShareConsumer,
 *                  explicit acknowledgement), accepting every record, until
 *                  the stop file. --reset-earliest sets the group's
 *                  share.auto.offset.reset first (Admin, IncrementalAlterConfigs).
 *
 * Common options: --bootstrap B --run-id R --timeout SECONDS (a deadline for
 * the whole run) --stop-file F --progress F, and Client.java's (whose modes,
 * option parsing, client properties, result line and JSON writer it extends).
 * Compiled with Client.java by scripts/install-kafka.
 */

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.ShareGroupDescription;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Scenarios extends Client {
    private long deadline;

    public static void main(String[] args) throws Exception {
        int rc = new Scenarios().run(args);
        System.out.flush();
        System.exit(rc);
    }

    @Override
    boolean flag(String k) {
        return k.equals("describe") || k.equals("reset-earliest") || super.flag(k);
    }

    @Override
    void dispatch(String mode) throws Exception {
        deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(get("timeout", "120")));
        switch (mode) {
        case "txn-produce": txnProduce(); break;
        case "txn-transform": txnTransform(); break;
        case "txn-verify": txnVerify(); break;
        case "group-member": groupMember(); break;
        case "share-consume": shareConsume(); break;
        default: super.dispatch(mode);
        }
    }

    // ---- helpers ----

    private int num(String k, int dflt) {
        return Integer.parseInt(get(k, String.valueOf(dflt)));
    }

    private boolean timeLeft() {
        return System.nanoTime() < deadline;
    }

    private boolean stopRequested() {
        String f = opt.get("stop-file");
        return f != null && Files.exists(Path.of(f));
    }

    /* Replaces the progress file (write, then rename: a reader never sees half). */
    private void progress(Map<String, Object> doc) {
        String f = opt.get("progress");
        if (f == null)
            return;
        try {
            Path p = Path.of(f), tmp = Path.of(f + ".tmp");
            Files.writeString(tmp, Client.toJson(doc), StandardCharsets.UTF_8);
            Files.move(tmp, p, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (java.io.IOException e) {
            error("progress: " + e);
        }
    }

    private static String addr(Node n) {
        return n == null || n.isEmpty() ? null : n.host() + ":" + n.port();
    }

    private Properties txnProducerProps(String txnId) throws Exception {
        Properties p = common();
        p.put("transactional.id", txnId);
        p.put("enable.idempotence", "true");
        p.put("acks", "all");
        p.put("linger.ms", "2");
        p.put("transaction.timeout.ms", "30000");
        p.put("delivery.timeout.ms", "60000");
        p.put("max.block.ms", "10000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return p;
    }

    /* Errors after which a transactional producer cannot go on (KafkaProducer javadoc). */
    private static boolean fatal(KafkaException e) {
        return e instanceof ProducerFencedException || e instanceof OutOfOrderSequenceException
            || e instanceof AuthorizationException || e instanceof UnsupportedVersionException;
    }

    /*
     * Commits the open transaction, retrying a commit that timed out (the
     * outcome of a timed-out commit is decided by retrying it, KIP-691);
     * returns how long it took, or throws what the producer threw otherwise.
     */
    private long commit(KafkaProducer<String, String> prod, long[] retries) {
        long t0 = System.nanoTime();
        while (true) {
            try {
                prod.commitTransaction();   // blocks up to max.block.ms
                return (System.nanoTime() - t0) / 1_000_000;
            } catch (TimeoutException e) {
                retries[0]++;
                if (!timeLeft())
                    throw e;
            }
        }
    }

    // ---- txn-produce ----

    private void txnProduce() throws Exception {
        String topic = get("topic", null), run = get("run-id", "R");
        int size = num("txn-size", 10), abortEvery = num("abort-every", 0);
        int maxTxns = num("max-txns", 100000), sleepMs = num("txn-sleep-ms", 0);
        String txnId = get("transactional-id", run + "-producer");
        List<Integer> committed = new ArrayList<>(), aborted = new ArrayList<>(), unknown = new ArrayList<>();
        long[] retries = { 0 };
        long maxCommitMs = 0, producers = 0, t = 0;
        KafkaProducer<String, String> prod = null;
        int partitions = 0;
        boolean endCommitted = false;
        try {
            while (timeLeft() && !endCommitted) {
                if (prod == null) {
                    prod = new KafkaProducer<>(txnProducerProps(txnId));
                    prod.initTransactions();
                    producers++;
                    partitions = prod.partitionsFor(topic).size();
                }
                boolean end = stopRequested() || t >= maxTxns;
                boolean abort = !end && abortEvery > 0 && t % abortEvery == abortEvery - 1;
                try {
                    prod.beginTransaction();
                    if (end) {
                        for (int p = 0; p < partitions; p++)
                            prod.send(new ProducerRecord<>(topic, p, "END", run + "-END"));
                    } else {
                        for (int i = 0; i < size; i++)
                            prod.send(new ProducerRecord<>(topic, String.valueOf(t * size + i),
                                                           run + "-" + t + "-" + i));
                    }
                    if (abort) {
                        prod.abortTransaction();
                        aborted.add((int) t);
                    } else {
                        maxCommitMs = Math.max(maxCommitMs, commit(prod, retries));
                        if (end)
                            endCommitted = true;
                        else
                            committed.add((int) t);
                    }
                } catch (KafkaException e) {
                    if (fatal(e) || e instanceof TimeoutException) {
                        /* the transaction's fate is the coordinator's: a new
                         * producer's initTransactions completes or aborts it */
                        error("txn " + t + ": " + e);
                        if (!end)
                            unknown.add((int) t);
                        prod.close(Duration.ZERO);
                        prod = null;
                    } else {
                        error("txn " + t + " aborted: " + e);
                        prod.abortTransaction();
                        if (!end)
                            aborted.add((int) t);
                    }
                }
                if (!end)
                    t++;
                progress(Map.of("txns", t, "committed", committed.size()));
                if (sleepMs > 0 && !endCommitted)
                    Thread.sleep(sleepMs);
            }
            if (!endCommitted)
                error("deadline before the END transaction committed");
            if (prod != null)
                sawNodes(prod.partitionsFor(topic));
        } finally {
            if (prod != null)
                prod.close(Duration.ofSeconds(10));
        }
        result.put("txn_size", size);
        result.put("committed", committed);
        result.put("aborted", aborted);
        result.put("unknown", unknown);
        result.put("commit_retries", retries[0]);
        result.put("max_commit_ms", maxCommitMs);
        result.put("producers", producers);
    }

    // ---- txn-transform ----

    private void rewind(KafkaConsumer<String, String> cons) {
        Set<TopicPartition> asg = cons.assignment();
        Map<TopicPartition, OffsetAndMetadata> c = cons.committed(asg, Duration.ofSeconds(30));
        for (TopicPartition tp : asg) {
            OffsetAndMetadata om = c.get(tp);
            if (om == null)
                cons.seekToBeginning(List.of(tp));
            else
                cons.seek(tp, om.offset());
        }
    }

    private void txnTransform() throws Exception {
        String in = get("topic", null), out = get("out-topic", null), run = get("run-id", "R");
        String group = get("group", run + "-ctp");
        Properties cp = common();
        cp.put("group.id", group);
        cp.put("group.protocol", get("group-protocol", "classic"));
        cp.put("isolation.level", "read_committed");
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("max.poll.records", get("max-poll-records", "50"));
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        long txns = 0, aborts = 0, records = 0, rewinds = 0, maxCommitMs = 0;
        long[] retries = { 0 };
        Set<Integer> ended = new HashSet<>();
        int partitions;
        try (KafkaConsumer<String, String> cons = new KafkaConsumer<>(cp);
             KafkaProducer<String, String> prod =
                 new KafkaProducer<>(txnProducerProps(get("transactional-id", run + "-ctp")))) {
            prod.initTransactions();
            partitions = cons.partitionsFor(in).size();
            cons.subscribe(List.of(in));
            while (timeLeft() && ended.size() < partitions) {
                ConsumerRecords<String, String> recs = cons.poll(Duration.ofMillis(200));
                if (recs.isEmpty())
                    continue;
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                Set<Integer> endsHere = new HashSet<>();
                try {
                    prod.beginTransaction();
                    for (ConsumerRecord<String, String> r : recs) {
                        prod.send(new ProducerRecord<>(out, r.partition(), r.key(), "T:" + r.value()));
                        next.put(new TopicPartition(r.topic(), r.partition()),
                                 new OffsetAndMetadata(r.offset() + 1));
                        if ((run + "-END").equals(r.value()))
                            endsHere.add(r.partition());
                    }
                    prod.sendOffsetsToTransaction(next, cons.groupMetadata());
                    maxCommitMs = Math.max(maxCommitMs, commit(prod, retries));
                    txns++;
                    records += recs.count();
                    ended.addAll(endsHere);
                } catch (KafkaException e) {
                    if (fatal(e))
                        throw e;
                    error("transform txn aborted: " + e);
                    aborts++;
                    prod.abortTransaction();
                    rewind(cons);
                    rewinds++;
                }
                progress(Map.of("txns", txns, "records", records));
                int sleepMs = num("txn-sleep-ms", 0);
                if (sleepMs > 0)
                    Thread.sleep(sleepMs);
            }
            if (ended.size() < partitions)
                error("deadline with END seen on " + ended.size() + " of " + partitions + " partitions");
            sawNodes(cons.partitionsFor(in));
            sawNodes(prod.partitionsFor(out));
        }
        result.put("txns", txns);
        result.put("aborted_txns", aborts);
        result.put("records", records);
        result.put("rewinds", rewinds);
        result.put("commit_retries", retries[0]);
        result.put("max_commit_ms", maxCommitMs);
    }

    // ---- txn-verify ----

    private void txnVerify() throws Exception {
        String run = get("run-id", "R");
        Properties cp = common();
        cp.put("isolation.level", "read_committed");
        cp.put("enable.auto.commit", "false");
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        Map<String, Map<String, Integer>> perTopic = new TreeMap<>();   // topic -> "t" -> records
        Map<String, Long> dups = new TreeMap<>(), foreign = new TreeMap<>(), total = new TreeMap<>();
        Map<String, Set<String>> seen = new HashMap<>();
        Set<TopicPartition> ended = new HashSet<>();
        List<TopicPartition> all = new ArrayList<>();
        try (KafkaConsumer<String, String> cons = new KafkaConsumer<>(cp)) {
            for (String topic : get("topics", "").split(",")) {
                for (PartitionInfo pi : cons.partitionsFor(topic))
                    all.add(new TopicPartition(topic, pi.partition()));
                sawNodes(cons.partitionsFor(topic));
                perTopic.put(topic, new TreeMap<>());
                dups.put(topic, 0L);
                foreign.put(topic, 0L);
                total.put(topic, 0L);
                seen.put(topic, new HashSet<>());
            }
            cons.assign(all);
            cons.seekToBeginning(all);
            while (timeLeft() && ended.size() < all.size()) {
                for (ConsumerRecord<String, String> r : cons.poll(Duration.ofMillis(200))) {
                    String t = r.topic(), v = r.value() == null ? "" : r.value();
                    total.merge(t, 1L, Long::sum);
                    if (v.startsWith("T:"))
                        v = v.substring(2);
                    if (v.equals(run + "-END")) {
                        ended.add(new TopicPartition(t, r.partition()));
                        continue;
                    }
                    String[] w = v.startsWith(run + "-") ? v.substring(run.length() + 1).split("-")
                                                         : new String[0];
                    if (w.length != 2) {
                        foreign.merge(t, 1L, Long::sum);
                        continue;
                    }
                    if (!seen.get(t).add(v)) {
                        dups.merge(t, 1L, Long::sum);
                        continue;
                    }
                    perTopic.get(t).merge(w[0], 1, Integer::sum);
                }
                progress(Map.of("ended", ended.size(),
                                "records", total.values().stream().mapToLong(x -> x).sum()));
            }
            if (ended.size() < all.size())
                error("deadline with END seen on " + ended.size() + " of " + all.size() + " partitions");
        }
        Map<String, Object> topics = new TreeMap<>();
        for (String t : perTopic.keySet()) {
            Map<String, Object> d = new LinkedHashMap<>();
            d.put("txn_records", perTopic.get(t));
            d.put("duplicates", dups.get(t));
            d.put("foreign", foreign.get(t));
            d.put("records", total.get(t));
            topics.put(t, d);
        }
        result.put("topics", topics);
    }

    // ---- group-member ----

    private void groupMember() throws Exception {
        String topic = get("topic", null), run = get("run-id", "R"), group = get("group", null);
        int pollSleep = num("poll-sleep-ms", 0);
        Properties cp = common();
        cp.put("group.id", group);
        cp.put("group.protocol", get("group-protocol", "classic"));
        cp.put("enable.auto.commit", "false");
        cp.put("auto.offset.reset", "earliest");
        cp.put("max.poll.records", get("max-poll-records", "20"));
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        List<Integer> records = new ArrayList<>();
        Map<TopicPartition, OffsetAndMetadata> pending = new HashMap<>();
        Map<Integer, Long> committed = new TreeMap<>();
        long[] counts = new long[4];   // assignments, revocations, commit failures, foreign
        String prefix = run + "-";
        try (KafkaConsumer<String, String> cons = new KafkaConsumer<>(cp)) {
            Runnable commitPending = () -> {
                if (pending.isEmpty())
                    return;
                try {
                    cons.commitSync(pending, Duration.ofSeconds(30));
                    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : pending.entrySet())
                        committed.merge(e.getKey().partition(), e.getValue().offset(), Math::max);
                } catch (KafkaException e) {
                    counts[2]++;
                    error("commit: " + e);
                }
                pending.clear();
            };
            cons.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                    counts[1]++;
                    commitPending.run();
                }

                public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                    counts[0]++;
                }

                public void onPartitionsLost(Collection<TopicPartition> parts) {
                    counts[1]++;
                    pending.keySet().removeAll(parts);
                }
            });
            while (timeLeft() && !stopRequested()) {
                ConsumerRecords<String, String> recs = cons.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : recs) {
                    int i = recordIndex(r.value(), prefix);
                    if (i < 0)
                        counts[3]++;
                    else
                        records.add(i);
                    pending.put(new TopicPartition(r.topic(), r.partition()),
                                new OffsetAndMetadata(r.offset() + 1));
                }
                commitPending.run();
                Map<String, Object> doc = new LinkedHashMap<>();
                doc.put("records", records.size());
                doc.put("committed", committed);
                doc.put("assigned", cons.assignment().size());
                progress(doc);
                if (pollSleep > 0 && !recs.isEmpty())
                    Thread.sleep(pollSleep);
            }
            commitPending.run();
            sawNodes(cons.partitionsFor(topic));
            if (opt.containsKey("describe"))
                describeGroup(group);
        }
        result.put("records", records);
        result.put("committed", committed);
        result.put("assignments", counts[0]);
        result.put("revocations", counts[1]);
        result.put("commit_failures", counts[2]);
        result.put("foreign", counts[3]);
    }

    private void describeGroup(String group) throws Exception {
        try (Admin admin = Admin.create(common())) {
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(group)).all()
                .get(30, TimeUnit.SECONDS).get(group);
            result.put("coordinator", addr(d.coordinator()));
            result.put("group_type", String.valueOf(d.type()));
            result.put("group_state", String.valueOf(d.groupState()));
            result.put("group_members", d.members().size());
            for (Node n : admin.describeCluster().nodes().get(30, TimeUnit.SECONDS))
                sawNode(n);
        }
    }

    // ---- share-consume ----

    private void shareConsume() throws Exception {
        String topic = get("topic", null), run = get("run-id", "R"), group = get("group", null);
        if (opt.containsKey("reset-earliest")) {
            try (Admin admin = Admin.create(common())) {
                ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
                AlterConfigOp op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"),
                                                     AlterConfigOp.OpType.SET);
                admin.incrementalAlterConfigs(Map.of(res, List.of(op))).all().get(30, TimeUnit.SECONDS);
            }
        }
        Properties cp = common();
        cp.put("group.id", group);
        cp.put("share.acknowledgement.mode", "explicit");
        cp.put("max.poll.records", get("max-poll-records", "50"));
        cp.put("key.deserializer", StringDeserializer.class.getName());
        cp.put("value.deserializer", StringDeserializer.class.getName());
        int pollSleep = num("poll-sleep-ms", 0);
        List<Integer> records = new ArrayList<>();
        long redelivered = 0, ackFailures = 0, foreign = 0, acked = 0;
        String prefix = run + "-";
        try (KafkaShareConsumer<String, String> cons = new KafkaShareConsumer<>(cp)) {
            cons.subscribe(List.of(topic));
            while (timeLeft() && !stopRequested()) {
                ConsumerRecords<String, String> recs = cons.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : recs) {
                    int i = recordIndex(r.value(), prefix);
                    if (i < 0)
                        foreign++;
                    else
                        records.add(i);
                    Optional<Short> dc = r.deliveryCount();
                    if (dc.isPresent() && dc.get() > 1)
                        redelivered++;
                    cons.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                if (!recs.isEmpty()) {
                    Map<TopicIdPartition, Optional<KafkaException>> res =
                        cons.commitSync(Duration.ofSeconds(30));
                    for (Map.Entry<TopicIdPartition, Optional<KafkaException>> e : res.entrySet()) {
                        if (e.getValue().isPresent()) {
                            ackFailures++;
                            error("acknowledge " + e.getKey() + ": " + e.getValue().get());
                        }
                    }
                    acked += recs.count();
                }
                progress(Map.of("records", records.size(), "acked", acked));
                if (pollSleep > 0 && !recs.isEmpty())
                    Thread.sleep(pollSleep);
            }
        }
        if (opt.containsKey("describe")) {
            try (Admin admin = Admin.create(common())) {
                ShareGroupDescription d = admin.describeShareGroups(List.of(group)).all()
                    .get(30, TimeUnit.SECONDS).get(group);
                result.put("coordinator", addr(d.coordinator()));
                result.put("group_state", String.valueOf(d.groupState()));
                for (Node n : admin.describeCluster().nodes().get(30, TimeUnit.SECONDS))
                    sawNode(n);
            }
        }
        result.put("records", records);
        result.put("acked", acked);
        result.put("redelivered", redelivered);
        result.put("ack_failures", ackFailures);
        result.put("foreign", foreign);
    }
}
