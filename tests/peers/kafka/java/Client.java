/*
 * The Java reference client (org.apache.kafka:kafka-clients, the broker's
 * version) as a test peer: produces or consumes a counted set of records and
 * prints one JSON line with what happened. Same arguments and output as the
 * Go and Python peers (see tests/peers/kafka/README.md):
 *
 *   --bootstrap B --topic T --count N --mode produce|consume|metadata
 *   [--run-id R] [--acks all|1|0] [--idempotent true|false] [--group G]
 *   [--group-protocol classic|consumer] [--timeout SECONDS] [--linger-ms MS]
 *   [--security-protocol P] [--sasl-mechanism M --sasl-user U --sasl-password W]
 *   [--ca FILE] [--cert FILE --key FILE] [--no-verify-name] [--prop k=v]...
 *
 * Record i has key "i" and value "R-i". A consumer counts the values of its
 * run (R-0 .. R-(N-1)): consumed, unique, duplicates, missing, foreign.
 * Compiled once by scripts/install-kafka into the cache.
 */

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public class Client {
    // package-private: Scenarios.java extends this peer with more modes
    final Map<String, String> opt = new HashMap<>();
    final List<String> props = new ArrayList<>();
    final List<String> errors = new ArrayList<>();
    final AtomicLong errorCount = new AtomicLong();
    final Set<String> brokers = new TreeSet<>();
    final Map<String, Object> result = new java.util.LinkedHashMap<>();

    public static void main(String[] args) throws Exception {
        Client c = new Client();
        int rc = c.run(args);
        System.out.flush();
        System.exit(rc);
    }

    String get(String k, String dflt) {
        return opt.getOrDefault(k, dflt);
    }

    synchronized void error(String what) {
        errorCount.incrementAndGet();
        if (errors.size() < 20)
            errors.add(what);
    }

    /* Options that take no value. */
    boolean flag(String k) {
        return k.equals("no-verify-name");
    }

    void dispatch(String mode) throws Exception {
        switch (mode) {
        case "produce": produce(); break;
        case "consume": consume(); break;
        case "metadata": metadata(); break;
        default: throw new IllegalArgumentException("unknown mode " + mode);
        }
    }

    int run(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--"))
                throw new IllegalArgumentException("unexpected argument " + a);
            String k = a.substring(2);
            if (flag(k)) {
                opt.put(k, "true");
                continue;
            }
            if (i + 1 >= args.length)
                throw new IllegalArgumentException(a + " needs a value");
            if (k.equals("prop"))
                props.add(args[++i]);
            else
                opt.put(k, args[++i]);
        }
        String mode = get("mode", "produce");
        long t0 = System.nanoTime();
        result.put("client", "java");
        result.put("lib_version", clientVersion());
        result.put("mode", mode);
        result.put("topic", get("topic", null));
        try {
            dispatch(mode);
        } catch (Exception e) {
            error("fatal: " + e);
        }
        result.put("brokers", new ArrayList<>(brokers));
        result.put("errors", errors);
        result.put("error_count", errorCount.get());
        result.put("elapsed_ms", (System.nanoTime() - t0) / 1_000_000);
        System.out.println(toJson(result));
        return errorCount.get() == 0 ? 0 : 1;
    }

    /* The version kafka-clients reports about itself (its jar's resource). */
    static String clientVersion() {
        Properties v = new Properties();
        try (var in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null)
                v.load(in);
        } catch (java.io.IOException e) {
            return "unknown";
        }
        return v.getProperty("version", "unknown");
    }

    Properties common() throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", get("bootstrap", "localhost:9092"));
        p.put("client.id", get("client-id", "ferry-java-peer"));
        String proto = get("security-protocol", "PLAINTEXT");
        p.put("security.protocol", proto);
        if (proto.startsWith("SASL")) {
            String mech = get("sasl-mechanism", "PLAIN");
            String module = mech.equals("PLAIN") ? "org.apache.kafka.common.security.plain.PlainLoginModule"
                                                 : "org.apache.kafka.common.security.scram.ScramLoginModule";
            p.put("sasl.mechanism", mech);
            p.put("sasl.jaas.config", module + " required username=\"" + get("sasl-user", "") +
                  "\" password=\"" + get("sasl-password", "") + "\";");
        }
        if (opt.containsKey("ca")) {
            p.put("ssl.truststore.type", "PEM");
            p.put("ssl.truststore.location", get("ca", null));
        }
        if (opt.containsKey("cert")) {
            p.put("ssl.keystore.type", "PEM");
            p.put("ssl.keystore.certificate.chain", Files.readString(Path.of(get("cert", null))));
            p.put("ssl.keystore.key", Files.readString(Path.of(get("key", null))));
        }
        if (opt.containsKey("no-verify-name"))
            p.put("ssl.endpoint.identification.algorithm", "");
        for (String kv : props) {
            int eq = kv.indexOf('=');
            p.put(kv.substring(0, eq), kv.substring(eq + 1));
        }
        return p;
    }

    void sawNodes(Collection<PartitionInfo> parts) {
        if (parts == null)
            return;
        for (PartitionInfo pi : parts) {
            sawNode(pi.leader());
            for (Node n : pi.replicas())
                sawNode(n);
        }
    }

    void sawNode(Node n) {
        if (n != null && !n.isEmpty())
            brokers.add(n.host() + ":" + n.port());
    }

    private void produce() throws Exception {
        String topic = get("topic", null), run = get("run-id", "r");
        int count = Integer.parseInt(get("count", "100"));
        Properties p = common();
        p.put("acks", get("acks", "all"));
        p.put("enable.idempotence", get("idempotent", "true"));
        p.put("linger.ms", "5");
        p.put("delivery.timeout.ms", String.valueOf(Long.parseLong(get("timeout", "60")) * 1000));
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        AtomicLong acked = new AtomicLong();
        long produced = 0;
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < count; i++) {
                prod.send(new ProducerRecord<>(topic, String.valueOf(i), run + "-" + i), (md, e) -> {
                    if (e == null)
                        acked.incrementAndGet();
                    else
                        error("delivery: " + e);
                });
                produced++;
            }
            prod.flush();
            sawNodes(prod.partitionsFor(topic));
        }
        result.put("produced", produced);
        result.put("acked", acked.get());
    }

    private void consume() throws Exception {
        String topic = get("topic", null), run = get("run-id", "r");
        int count = Integer.parseInt(get("count", "100"));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(get("timeout", "60")));
        long linger = Long.parseLong(get("linger-ms", "1000"));
        Properties p = common();
        p.put("group.id", get("group", "ferry-java-peer"));
        p.put("group.protocol", get("group-protocol", "classic"));
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        long consumed = 0, foreign = 0;
        boolean[] seen = new boolean[count];
        int unique = 0;
        long committed = 0;
        String prefix = run + "-";
        try (KafkaConsumer<String, String> cons = new KafkaConsumer<>(p)) {
            cons.subscribe(List.of(topic));
            long lingerUntil = Long.MAX_VALUE;
            while (System.nanoTime() < Math.min(deadline, lingerUntil)) {
                ConsumerRecords<String, String> recs = cons.poll(Duration.ofMillis(200));
                for (ConsumerRecord<String, String> r : recs) {
                    consumed++;
                    int i = recordIndex(r.value(), prefix);
                    if (i < 0 || i >= count) {
                        foreign++;
                    } else if (!seen[i]) {
                        seen[i] = true;
                        unique++;
                    }
                }
                if (unique == count && lingerUntil == Long.MAX_VALUE)
                    lingerUntil = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(linger);
            }
            if (unique < count)
                error("timed out with " + unique + " of " + count + " records");
            try {
                cons.commitSync(Duration.ofSeconds(30));
                Map<TopicPartition, OffsetAndMetadata> c = cons.committed(cons.assignment(), Duration.ofSeconds(30));
                for (OffsetAndMetadata om : c.values())
                    if (om != null)
                        committed += om.offset();
                result.put("committed", committed);
            } catch (Exception e) {
                error("commit: " + e);
            }
            sawNodes(cons.partitionsFor(topic));
        }
        result.put("consumed", consumed);
        result.put("unique", unique);
        result.put("duplicates", consumed - foreign - unique);
        result.put("missing", count - unique);
        result.put("foreign", foreign);
    }

    /* i of a value "PREFIXi", or -1. */
    static int recordIndex(String value, String prefix) {
        if (value == null || !value.startsWith(prefix))
            return -1;
        try {
            return Integer.parseInt(value.substring(prefix.length()));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    private void metadata() throws Exception {
        try (Admin admin = Admin.create(common())) {
            DescribeClusterResult d = admin.describeCluster();
            for (Node n : d.nodes().get(30, TimeUnit.SECONDS))
                sawNode(n);
            result.put("cluster_id", d.clusterId().get(30, TimeUnit.SECONDS));
            Node ctl = d.controller().get(30, TimeUnit.SECONDS);
            result.put("controller", ctl == null || ctl.isEmpty() ? null : ctl.host() + ":" + ctl.port());
        }
    }

    // ---- a small JSON writer: strings, numbers, booleans, null, lists, maps ----
    static String toJson(Object o) {
        StringBuilder b = new StringBuilder();
        json(b, o);
        return b.toString();
    }

    private static void json(StringBuilder b, Object o) {
        if (o == null) {
            b.append("null");
        } else if (o instanceof Number || o instanceof Boolean) {
            b.append(o);
        } else if (o instanceof Map) {
            b.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                if (!first)
                    b.append(',');
                first = false;
                json(b, String.valueOf(e.getKey()));
                b.append(':');
                json(b, e.getValue());
            }
            b.append('}');
        } else if (o instanceof Collection) {
            b.append('[');
            boolean first = true;
            for (Object x : (Collection<?>) o) {
                if (!first)
                    b.append(',');
                first = false;
                json(b, x);
            }
            b.append(']');
        } else {
            String s = o.toString();
            b.append('"');
            for (char ch : s.toCharArray()) {
                if (ch == '"' || ch == '\\')
                    b.append('\\').append(ch);
                else if (ch < 0x20)
                    b.append(String.format("\\u%04x", (int) ch));
                else
                    b.append(ch);
            }
            b.append('"');
        }
    }

}
