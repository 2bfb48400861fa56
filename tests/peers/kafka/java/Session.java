/*
 * An interactive session of the Java reference client (kafka-clients, the
 * broker's version), for the scenarios that act on a cluster while clients
 * run: Admin operations, and a paced idempotent producer with a group
 * consumer running in the background ("load") while the test moves leaders,
 * kills brokers or reloads the proxy. One JVM does it all, so a scenario
 * pays one JVM start-up and strace watches every connection it makes.
 *
 *   java Session --bootstrap B [--prop k=v]... [--timeout SECONDS]
 *
 * Reads one command per line on stdin (words separated by blanks) and
 * answers each with one JSON line on stdout: {"cmd": ..., "ok": true, ...}
 * or {"cmd": ..., "ok": false, "error": "..."}. It first prints
 * {"ready": true, "lib_version": ...}. Every Admin call waits at most
 * --timeout seconds (default 30). Addresses are "host:port".
 *
 *   describe-cluster                       cluster_id, controller, nodes [{id, addr}]
 *   create-topic NAME PARTS RF [k=v]...    (RF 0: the broker's default)
 *   create-topic NAME assign=1,2,3/2,3,1 [k=v]...   replicas per partition
 *   delete-topics NAME...
 *   list-topics                            topics
 *   describe-topic NAME                    topic_id, partitions [{partition, leader,
 *                                          leader_addr, replicas, isr, addrs}]
 *   describe-configs topic|broker NAME [KEY]...   configs {k: {value, source}}
 *   alter-configs topic|broker NAME set:K=V|delete:K...   (incremental)
 *   reassign TOPIC PARTITION 1,2,3|cancel
 *   list-reassignments                     reassignments [{topic, partition, replicas,
 *                                          adding, removing}]
 *   elect-preferred TOPIC PARTITION...     results {"T-P": null | error}
 *   elect-preferred *                      the same for every partition of the cluster
 *   produce TOPIC N RUN                    acked (records RUN-0 .. RUN-(N-1), key i)
 *   join-group GROUP TOPIC N RUN           a member that stays in the group: returns
 *                                          once it consumed N records and committed
 *   leave-group
 *   list-groups                            groups [{id, type, state, protocol}]
 *   describe-group GROUP                   state, type, coordinator, coordinator_id,
 *                                          assignor, members [{client_id, member_id,
 *                                          host, assignment}]
 *   group-offsets GROUP                    offsets {"T-P": offset}
 *   delete-groups GROUP...
 *   unregister-broker ID
 *   load-start TOPIC GROUP RATE RUN        producer (idempotent, acks=all) paced at RATE
 *                                          records/s + consumer in GROUP (commits every
 *                                          second and on revocation)
 *   load-mark                              starts a new window for the stall figures
 *   load-status                            progress, per partition: acked, acks since
 *                                          the mark, longest gap between acks in the
 *                                          window (the open one included), the same
 *                                          for consumed records; connection counts
 *   load-stop [SECONDS]                    stops producing, flushes, waits until every
 *                                          acknowledged record was consumed (or the
 *                                          deadline), lingers 1 s for duplicates,
 *                                          commits; the final figures (see loadReport)
 *   quit
 *
 * Compiled once by scripts/install-kafka with Client.java (whose JSON writer
 * it uses) into the cache.
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.BitSet;
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
import java.util.TreeSet;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewPartitionReassignment;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.PartitionReassignment;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.ElectionType;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Session {
    private final Properties base = new Properties();
    private long timeoutS = 30;
    private Admin admin;
    private Member member;
    private Load load;

    public static void main(String[] args) throws Exception {
        Session s = new Session();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length)
                throw new IllegalArgumentException(a + " needs a value");
            String v = args[++i];
            switch (a) {
            case "--bootstrap": s.base.put("bootstrap.servers", v); break;
            case "--timeout": s.timeoutS = Long.parseLong(v); break;
            case "--prop": {
                int eq = v.indexOf('=');
                s.base.put(v.substring(0, eq), v.substring(eq + 1));
                break;
            }
            default: throw new IllegalArgumentException("unknown argument " + a);
            }
        }
        s.run();
        System.exit(0);
    }

    private Properties props(String clientId) {
        Properties p = new Properties();
        p.put("client.id", clientId);
        p.putAll(base);
        return p;
    }

    private static synchronized void emit(Map<String, Object> m) {
        System.out.println(Client.toJson(m));
        System.out.flush();
    }

    private void run() throws Exception {
        admin = Admin.create(props("ferry-session-admin"));
        Map<String, Object> hello = new LinkedHashMap<>();
        hello.put("ready", true);
        hello.put("lib_version", Client.clientVersion());
        emit(hello);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w.length == 0 || w[0].isEmpty())
                continue;
            Map<String, Object> out = new LinkedHashMap<>();
            out.put("cmd", w[0]);
            out.put("ok", true);
            if (w[0].equals("quit")) {
                emit(out);
                break;
            }
            try {
                command(w, out);
            } catch (Exception e) {
                Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                out.put("ok", false);
                out.put("error", c.toString());
            }
            emit(out);
        }
        if (load != null)
            load.stop(10);
        if (member != null)
            member.close();
        admin.close(Duration.ofSeconds(5));
    }

    private <T> T get(KafkaFuture<T> f) throws Exception {
        return f.get(timeoutS, TimeUnit.SECONDS);
    }

    static String addr(Node n) {
        return n == null || n.isEmpty() ? null : n.host() + ":" + n.port();
    }

    private static List<Integer> ids(String csv) {
        List<Integer> out = new ArrayList<>();
        for (String s : csv.split(","))
            out.add(Integer.parseInt(s));
        return out;
    }

    private static ConfigResource resource(String type, String name) {
        switch (type) {
        case "topic": return new ConfigResource(ConfigResource.Type.TOPIC, name);
        case "broker": return new ConfigResource(ConfigResource.Type.BROKER, name);
        default: throw new IllegalArgumentException("resource type topic|broker, not " + type);
        }
    }

    private void command(String[] w, Map<String, Object> out) throws Exception {
        switch (w[0]) {
        case "describe-cluster": {
            DescribeClusterResult d = admin.describeCluster();
            List<Object> nodes = new ArrayList<>();
            for (Node n : get(d.nodes())) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("id", n.id());
                m.put("addr", addr(n));
                nodes.add(m);
            }
            Node ctl = get(d.controller());
            out.put("cluster_id", get(d.clusterId()));
            out.put("controller_id", ctl == null ? null : ctl.id());
            out.put("controller", addr(ctl));
            out.put("nodes", nodes);
            break;
        }
        case "create-topic": {
            NewTopic t;
            int next;
            if (w[2].startsWith("assign=")) {
                Map<Integer, List<Integer>> a = new HashMap<>();
                String[] parts = w[2].substring(7).split("/");
                for (int i = 0; i < parts.length; i++)
                    a.put(i, ids(parts[i]));
                t = new NewTopic(w[1], a);
                next = 3;
            } else {
                short rf = Short.parseShort(w[3]);
                t = new NewTopic(w[1], Optional.of(Integer.parseInt(w[2])),
                                 rf > 0 ? Optional.of(rf) : Optional.empty());
                next = 4;
            }
            Map<String, String> cfg = new HashMap<>();
            for (int i = next; i < w.length; i++) {
                int eq = w[i].indexOf('=');
                cfg.put(w[i].substring(0, eq), w[i].substring(eq + 1));
            }
            t.configs(cfg);
            get(admin.createTopics(List.of(t)).all());
            break;
        }
        case "delete-topics":
            get(admin.deleteTopics(Arrays.asList(w).subList(1, w.length)).all());
            break;
        case "list-topics":
            out.put("topics", new ArrayList<>(new TreeSet<>(get(admin.listTopics().names()))));
            break;
        case "describe-topic": {
            TopicDescription d = get(admin.describeTopics(List.of(w[1])).allTopicNames()).get(w[1]);
            out.put("topic_id", d.topicId().toString());
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo pi : d.partitions()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("partition", pi.partition());
                m.put("leader", pi.leader() == null || pi.leader().isEmpty() ? null : pi.leader().id());
                m.put("leader_addr", addr(pi.leader()));
                List<Integer> rep = new ArrayList<>(), isr = new ArrayList<>();
                Set<String> addrs = new TreeSet<>();
                for (Node n : pi.replicas()) {
                    rep.add(n.id());
                    if (addr(n) != null)
                        addrs.add(addr(n));
                }
                for (Node n : pi.isr())
                    isr.add(n.id());
                m.put("replicas", rep);
                m.put("isr", isr);
                m.put("addrs", new ArrayList<>(addrs));
                parts.add(m);
            }
            out.put("partitions", parts);
            break;
        }
        case "describe-configs": {
            ConfigResource r = resource(w[1], w[2]);
            Set<String> keys = new HashSet<>(Arrays.asList(w).subList(3, w.length));
            Config c = get(admin.describeConfigs(List.of(r)).all()).get(r);
            Map<String, Object> cfg = new TreeMap<>();
            for (ConfigEntry e : c.entries()) {
                if (!keys.isEmpty() && !keys.contains(e.name()))
                    continue;
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("value", e.value());
                m.put("source", e.source().toString());
                cfg.put(e.name(), m);
            }
            out.put("configs", cfg);
            break;
        }
        case "alter-configs": {
            ConfigResource r = resource(w[1], w[2]);
            List<AlterConfigOp> ops = new ArrayList<>();
            for (int i = 3; i < w.length; i++) {
                if (w[i].startsWith("set:")) {
                    String kv = w[i].substring(4);
                    int eq = kv.indexOf('=');
                    ops.add(new AlterConfigOp(new ConfigEntry(kv.substring(0, eq), kv.substring(eq + 1)),
                                              AlterConfigOp.OpType.SET));
                } else if (w[i].startsWith("delete:")) {
                    ops.add(new AlterConfigOp(new ConfigEntry(w[i].substring(7), null),
                                              AlterConfigOp.OpType.DELETE));
                } else {
                    throw new IllegalArgumentException("set:K=V or delete:K, not " + w[i]);
                }
            }
            get(admin.incrementalAlterConfigs(Map.of(r, ops)).all());
            break;
        }
        case "reassign": {
            TopicPartition tp = new TopicPartition(w[1], Integer.parseInt(w[2]));
            Optional<NewPartitionReassignment> target = w[3].equals("cancel") ? Optional.empty()
                : Optional.of(new NewPartitionReassignment(ids(w[3])));
            get(admin.alterPartitionReassignments(Map.of(tp, target)).all());
            break;
        }
        case "list-reassignments": {
            List<Object> list = new ArrayList<>();
            for (Map.Entry<TopicPartition, PartitionReassignment> e :
                     get(admin.listPartitionReassignments().reassignments()).entrySet()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("topic", e.getKey().topic());
                m.put("partition", e.getKey().partition());
                m.put("replicas", e.getValue().replicas());
                m.put("adding", e.getValue().addingReplicas());
                m.put("removing", e.getValue().removingReplicas());
                list.add(m);
            }
            out.put("reassignments", list);
            break;
        }
        case "elect-preferred": {
            Set<TopicPartition> tps = new HashSet<>();
            for (int i = 2; i < w.length; i++)
                tps.add(new TopicPartition(w[1], Integer.parseInt(w[i])));
            if (w.length == 2 && w[1].equals("*"))
                tps = null;   // every partition of the cluster
            Map<String, Object> res = new TreeMap<>();
            for (Map.Entry<TopicPartition, Optional<Throwable>> e :
                     get(admin.electLeaders(ElectionType.PREFERRED, tps).partitions()).entrySet())
                res.put(e.getKey().toString(), e.getValue().map(Throwable::toString).orElse(null));
            out.put("results", res);
            break;
        }
        case "produce": {
            int n = Integer.parseInt(w[2]);
            AtomicLong acked = new AtomicLong();
            List<String> errors = new ArrayList<>();
            try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps("ferry-session-producer"))) {
                for (int i = 0; i < n; i++)
                    p.send(new ProducerRecord<>(w[1], String.valueOf(i), w[3] + "-" + i), (md, e) -> {
                        if (e == null)
                            acked.incrementAndGet();
                        else
                            synchronized (errors) {
                                errors.add(e.toString());
                            }
                    });
                p.flush();
            }
            out.put("acked", acked.get());
            out.put("errors", errors);
            break;
        }
        case "join-group": {
            if (member != null)
                throw new IllegalStateException("already a member");
            member = new Member(w[1], w[2], Integer.parseInt(w[3]), w[4]);
            member.awaitConsumed(timeoutS * 1000L, out);
            break;
        }
        case "leave-group":
            if (member != null)
                member.close();
            member = null;
            break;
        case "list-groups": {
            List<Object> list = new ArrayList<>();
            for (GroupListing g : get(admin.listGroups().all())) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("id", g.groupId());
                m.put("type", g.type().map(Object::toString).orElse(null));
                m.put("state", g.groupState().map(Object::toString).orElse(null));
                m.put("protocol", g.protocol());
                list.add(m);
            }
            out.put("groups", list);
            break;
        }
        case "describe-group": {
            ConsumerGroupDescription d = get(admin.describeConsumerGroups(List.of(w[1])).all()).get(w[1]);
            out.put("state", String.valueOf(d.groupState()));
            out.put("type", String.valueOf(d.type()));
            out.put("coordinator", addr(d.coordinator()));
            out.put("coordinator_id", d.coordinator() == null ? null : d.coordinator().id());
            out.put("assignor", d.partitionAssignor());
            List<Object> members = new ArrayList<>();
            for (MemberDescription md : d.members()) {
                Map<String, Object> m = new LinkedHashMap<>();
                m.put("client_id", md.clientId());
                m.put("member_id", md.consumerId());
                m.put("host", md.host());
                List<String> a = new ArrayList<>();
                for (TopicPartition tp : md.assignment().topicPartitions())
                    a.add(tp.toString());
                java.util.Collections.sort(a);
                m.put("assignment", a);
                members.add(m);
            }
            out.put("members", members);
            break;
        }
        case "group-offsets": {
            Map<String, Object> offs = new TreeMap<>();
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e :
                     get(admin.listConsumerGroupOffsets(w[1]).partitionsToOffsetAndMetadata()).entrySet())
                offs.put(e.getKey().toString(), e.getValue() == null ? null : e.getValue().offset());
            out.put("offsets", offs);
            break;
        }
        case "delete-groups":
            get(admin.deleteConsumerGroups(Arrays.asList(w).subList(1, w.length)).all());
            break;
        case "unregister-broker":
            get(admin.unregisterBroker(Integer.parseInt(w[1])).all());
            break;
        case "load-start":
            if (load != null)
                throw new IllegalStateException("a load is running");
            load = new Load(w[1], w[2], Double.parseDouble(w[3]), w[4]);
            break;
        case "load-mark":
            requireLoad().mark();
            break;
        case "load-status":
            requireLoad().status(out);
            break;
        case "load-stop": {
            Load l = requireLoad();
            l.stop(w.length > 1 ? Long.parseLong(w[1]) : 60);
            l.report(out);
            load = null;
            break;
        }
        default:
            throw new IllegalArgumentException("unknown command " + w[0]);
        }
    }

    private Load requireLoad() {
        if (load == null)
            throw new IllegalStateException("no load running");
        return load;
    }

    private Properties producerProps(String clientId) {
        Properties p = props(clientId);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("linger.ms", "5");
        p.put("delivery.timeout.ms", "180000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        p.putAll(base);
        return p;
    }

    private Properties consumerProps(String clientId, String group) {
        Properties p = props(clientId);
        p.put("group.id", group);
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        p.putAll(base);
        return p;
    }

    /* The index i of a record "RUN-i" of this run, or -1. */
    static int indexOf(String value, String prefix) {
        if (value == null || !value.startsWith(prefix))
            return -1;
        try {
            return Integer.parseInt(value.substring(prefix.length()));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /* A cached metric of a client, read from any thread. */
    static Metric metric(Map<MetricName, ? extends Metric> all, String group, String name) {
        for (Map.Entry<MetricName, ? extends Metric> e : all.entrySet())
            if (e.getKey().group().equals(group) && e.getKey().name().equals(name))
                return e.getValue();
        return null;
    }

    static long value(Metric m) {
        if (m == null)
            return -1;
        Object v = m.metricValue();
        return v instanceof Number ? Math.round(((Number) v).doubleValue()) : -1;
    }

    /* A group member in its own thread: consumes N records of a run, commits,
     * then keeps polling (so it stays in the group) until closed. */
    private final class Member implements Runnable {
        final String topic, prefix;
        final int count;
        final KafkaConsumer<String, String> consumer;
        final Thread thread;
        final BitSet seen = new BitSet();
        volatile boolean closing, committed;
        volatile String failure;
        long consumed;

        Member(String group, String topic, int count, String run) {
            this.topic = topic;
            this.count = count;
            this.prefix = run + "-";
            consumer = new KafkaConsumer<>(consumerProps("ferry-session-member", group));
            thread = new Thread(this, "member");
            thread.start();
        }

        public void run() {
            try {
                consumer.subscribe(List.of(topic));
                while (!closing) {
                    for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200))) {
                        synchronized (this) {
                            consumed++;
                            int i = indexOf(r.value(), prefix);
                            if (i >= 0 && i < count)
                                seen.set(i);
                        }
                    }
                    if (!committed && seen.cardinality() >= count) {
                        consumer.commitSync(Duration.ofSeconds(30));
                        committed = true;
                    }
                }
            } catch (Exception e) {
                failure = e.toString();
            } finally {
                consumer.close(CloseOptions.timeout(Duration.ofSeconds(10)));
            }
        }

        void awaitConsumed(long ms, Map<String, Object> out) throws InterruptedException {
            long deadline = System.currentTimeMillis() + ms;
            while (!committed && failure == null && System.currentTimeMillis() < deadline)
                Thread.sleep(50);
            synchronized (this) {
                out.put("consumed", consumed);
                out.put("unique", seen.cardinality());
            }
            if (failure != null)
                throw new IllegalStateException("member failed: " + failure);
            if (!committed)
                throw new IllegalStateException("member consumed " + seen.cardinality() + " of " + count
                                                + " records in " + ms + " ms");
        }

        void close() throws InterruptedException {
            closing = true;
            thread.join(20000);
        }
    }

    /* Ack or record timing of one partition: counts, and the longest gap
     * between successive events, overall and since the last mark. */
    static final class Timing {
        long count, sinceMark, last, maxGap, windowGap;

        void event(long now) {
            if (last > 0) {
                long gap = now - last;
                maxGap = Math.max(maxGap, gap);
                windowGap = Math.max(windowGap, gap);
            }
            last = now;
            count++;
            sinceMark++;
        }

        void mark() {
            sinceMark = 0;
            windowGap = 0;
        }

        Map<String, Object> json(long now) {
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("count", count);
            m.put("since_mark", sinceMark);
            m.put("window_gap_ms", Math.max(windowGap, last > 0 ? now - last : 0));
            m.put("max_gap_ms", maxGap);
            return m;
        }
    }

    /*
     * The load: a producer thread sends record i (key "i", value "RUN-i") at
     * `rate` per second until stopped; a consumer thread in `group` counts
     * what it receives. Both live in this JVM, each with its own connections.
     */
    private final class Load {
        final String topic, prefix;
        final double rate;
        final KafkaProducer<String, String> producer;
        final KafkaConsumer<String, String> consumer;
        final Thread producerThread, consumerThread;
        final Metric pConnCreated, pConnClosed, pRetries, pErrors;
        volatile Metric cConnCreated, cConnClosed;
        volatile List<Long> cConnFinal;
        final BitSet acked = new BitSet(), failed = new BitSet();
        int[] received = new int[1024];
        final Map<Integer, Timing> ackTiming = new TreeMap<>(), recordTiming = new TreeMap<>();
        final List<String> errors = new ArrayList<>();
        long errorCount, sent, consumed, foreign, assignments, revocations, commitFailures;
        volatile boolean stopProducing, stopConsuming;
        volatile long consumeUntil = Long.MAX_VALUE;
        long startedAt = System.currentTimeMillis();

        Load(String topic, String group, double rate, String run) {
            this.topic = topic;
            this.rate = rate;
            this.prefix = run + "-";
            producer = new KafkaProducer<>(producerProps("ferry-session-load-producer"));
            consumer = new KafkaConsumer<>(consumerProps("ferry-session-load-consumer", group));
            pConnCreated = metric(producer.metrics(), "producer-metrics", "connection-creation-total");
            pConnClosed = metric(producer.metrics(), "producer-metrics", "connection-close-total");
            pRetries = metric(producer.metrics(), "producer-metrics", "record-retry-total");
            pErrors = metric(producer.metrics(), "producer-metrics", "record-error-total");
            producerThread = new Thread(this::produce, "load-producer");
            consumerThread = new Thread(this::consume, "load-consumer");
            consumerThread.start();
            producerThread.start();
        }

        synchronized void error(String what) {
            errorCount++;
            if (errors.size() < 20)
                errors.add(what);
        }

        void produce() {
            long t0 = System.nanoTime();
            for (int i = 0; !stopProducing; i++) {
                long due = t0 + (long) (i * 1e9 / rate);
                long wait = due - System.nanoTime();
                if (wait > 0) {
                    try {
                        TimeUnit.NANOSECONDS.sleep(wait);
                    } catch (InterruptedException e) {
                        break;
                    }
                }
                if (stopProducing)
                    break;
                final int idx = i;
                try {
                    producer.send(new ProducerRecord<>(topic, String.valueOf(i), prefix + i), (md, e) -> {
                        long now = System.currentTimeMillis();
                        synchronized (this) {
                            if (e == null) {
                                acked.set(idx);
                                ackTiming.computeIfAbsent(md.partition(), k -> new Timing()).event(now);
                            } else {
                                failed.set(idx);
                                error("delivery of " + idx + ": " + e);
                            }
                        }
                    });
                    synchronized (this) {
                        sent++;
                    }
                } catch (Exception e) {
                    synchronized (this) {
                        failed.set(idx);
                    }
                    error("send of " + idx + ": " + e);
                }
            }
            producer.flush();
        }

        void consume() {
            cConnCreated = metric(consumer.metrics(), "consumer-metrics", "connection-creation-total");
            cConnClosed = metric(consumer.metrics(), "consumer-metrics", "connection-close-total");
            long nextCommit = 0;
            try {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        synchronized (Load.this) {
                            revocations++;
                        }
                        if (!parts.isEmpty())
                            commit(true);
                    }

                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        synchronized (Load.this) {
                            assignments++;
                        }
                    }
                });
                while (System.currentTimeMillis() < consumeUntil) {
                    try {
                        for (ConsumerRecord<String, String> r : consumer.poll(Duration.ofMillis(200)))
                            record(r);
                    } catch (Exception e) {
                        error("poll: " + e);
                        Thread.sleep(200);
                    }
                    if (System.currentTimeMillis() >= nextCommit) {
                        commit(false);
                        nextCommit = System.currentTimeMillis() + 1000;
                    }
                    if (stopConsuming && consumeUntil == Long.MAX_VALUE && allAckedReceived())
                        consumeUntil = System.currentTimeMillis() + 1000;  // linger: duplicates
                }
                commit(true);
            } catch (Exception e) {
                error("consumer: " + e);
            } finally {
                // its own closing connections are not the fault's
                cConnFinal = List.of(value(cConnCreated), value(cConnClosed));
                consumer.close(CloseOptions.timeout(Duration.ofSeconds(10)));
            }
        }

        void commit(boolean sync) {
            try {
                if (sync)
                    consumer.commitSync(Duration.ofSeconds(30));
                else
                    consumer.commitAsync((offsets, e) -> {
                        if (e != null)
                            synchronized (Load.this) {
                                commitFailures++;
                            }
                    });
            } catch (Exception e) {
                synchronized (this) {
                    commitFailures++;
                }
            }
        }

        synchronized void record(ConsumerRecord<String, String> r) {
            consumed++;
            int i = indexOf(r.value(), prefix);
            if (i < 0) {
                foreign++;
                return;
            }
            if (i >= received.length)
                received = Arrays.copyOf(received, Math.max(i + 1, received.length * 2));
            received[i]++;
            recordTiming.computeIfAbsent(r.partition(), k -> new Timing()).event(System.currentTimeMillis());
        }

        synchronized boolean allAckedReceived() {
            for (int i = acked.nextSetBit(0); i >= 0; i = acked.nextSetBit(i + 1))
                if (i >= received.length || received[i] == 0)
                    return false;
            return true;
        }

        synchronized void mark() {
            for (Timing t : ackTiming.values())
                t.mark();
            for (Timing t : recordTiming.values())
                t.mark();
        }

        synchronized void status(Map<String, Object> out) {
            long now = System.currentTimeMillis();
            out.put("sent", sent);
            out.put("acked", acked.cardinality());
            out.put("failed", failed.cardinality());
            out.put("consumed", consumed);
            Map<String, Object> a = new TreeMap<>(), r = new TreeMap<>();
            for (Map.Entry<Integer, Timing> e : ackTiming.entrySet())
                a.put(String.valueOf(e.getKey()), e.getValue().json(now));
            for (Map.Entry<Integer, Timing> e : recordTiming.entrySet())
                r.put(String.valueOf(e.getKey()), e.getValue().json(now));
            out.put("acks", a);
            out.put("records", r);
            out.put("error_count", errorCount);
            out.put("errors", new ArrayList<>(errors));
            out.put("assignments", assignments);
            out.put("revocations", revocations);
            out.put("producer_connections", List.of(value(pConnCreated), value(pConnClosed)));
            out.put("consumer_connections", cConnFinal != null ? cConnFinal
                    : List.of(value(cConnCreated), value(cConnClosed)));
            out.put("producer_retries", value(pRetries));
        }

        void stop(long seconds) throws InterruptedException {
            long deadline = System.currentTimeMillis() + seconds * 1000;
            stopProducing = true;
            producerThread.join(Math.max(1, deadline - System.currentTimeMillis()));
            if (producerThread.isAlive())
                error("producer still flushing at the deadline");
            stopConsuming = true;
            while (consumeUntil == Long.MAX_VALUE && System.currentTimeMillis() < deadline)
                Thread.sleep(50);
            if (consumeUntil == Long.MAX_VALUE) {
                error("consumer had not received every acknowledged record at the deadline");
                consumeUntil = System.currentTimeMillis();
            }
            consumerThread.join(45000);
        }

        /*
         * sent, acked, failed (delivery failed after the producer's
         * retries), consumed, unique (distinct records of the run received),
         * duplicates (received more than once: redeliveries), lost
         * (acknowledged, never received) with a sample, unacked_received
         * (failed but received: written though the producer gave up),
         * per-partition timings, producer retries and errors, connections
         * created/closed of both clients, rebalances, the brokers the
         * clients know (addresses from their metadata).
         */
        synchronized void report(Map<String, Object> out) {
            status(out);
            int unique = 0, dups = 0, unackedReceived = 0;
            List<Integer> lost = new ArrayList<>();
            int lostCount = 0;
            for (int i = 0; i < received.length; i++) {
                if (received[i] > 0) {
                    unique++;
                    dups += received[i] - 1;
                    if (!acked.get(i))
                        unackedReceived++;
                }
            }
            for (int i = acked.nextSetBit(0); i >= 0; i = acked.nextSetBit(i + 1)) {
                if (i >= received.length || received[i] == 0) {
                    lostCount++;
                    if (lost.size() < 50)
                        lost.add(i);
                }
            }
            out.put("unique", unique);
            out.put("duplicates", dups);
            out.put("lost", lostCount);
            out.put("lost_sample", lost);
            out.put("unacked_received", unackedReceived);
            out.put("foreign", foreign);
            out.put("producer_errors", value(pErrors));
            out.put("commit_failures", commitFailures);
            Set<String> brokers = new TreeSet<>();
            try {
                for (PartitionInfo pi : producer.partitionsFor(topic)) {
                    if (addr(pi.leader()) != null)
                        brokers.add(addr(pi.leader()));
                    for (Node n : pi.replicas())
                        if (addr(n) != null)
                            brokers.add(addr(n));
                }
            } catch (Exception e) {
                error("partitionsFor: " + e);
            }
            out.put("brokers", new ArrayList<>(brokers));
            out.put("elapsed_ms", System.currentTimeMillis() - startedAt);
            producer.close(Duration.ofSeconds(10));
        }
    }
}
