/*
 * ReloadLoad — the client load of scripts/bench's field reload runs
 * (bench/field.sh): a Kafka producer paced at a fixed rate and a consumer
 * group member, both through the proxy under test, while the bench reloads
 * or restarts that proxy.
 *
 *   java -cp KAFKA_CLIENTS_JARS:DIR ReloadLoad --bootstrap HOST:PORT --topic T
 *        --group G [--rate 20000] [--size 1024] [--duration 26] [--event-at 11]
 *        [--window 10] [--acks all]
 *
 * The producer sends record i at its intended time start + i/rate (it keeps
 * to that schedule when send() blocks, so a stall is not hidden: each
 * record's latency runs from its intended send time to its acknowledgement,
 * coordinated omission corrected). The consumer subscribes to the same
 * topic in group G from its end and counts what it receives and its
 * rebalances. At --event-at seconds it prints "EVENT <epoch ms>" (the bench
 * reloads the proxy then) and takes the clients' connection metrics.
 *
 * At the end (--duration seconds) it prints one JSON line:
 *   before / during: the records whose intended send time falls in
 *     [event - window, event) / [event, event + window): count, acknowledged,
 *     failed, latency p50/p99/p99.9/max in ms (µs resolution);
 *   producer / consumer: connection-close-total and connection-creation-total
 *     of the Java client's own metrics, at the event and at the end (their
 *     difference: connections the proxy closed and the client reopened);
 *   errors: failed sends by exception class, the first message;
 *   consumer records, assignments, revocations, poll errors.
 *
 * Defaults of the Java client otherwise (acks=all: the idempotent producer).
 */
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ReloadLoad {
    private static String bootstrap, topic, group, acks = "all";
    private static int rate = 20000, size = 1024;
    private static double duration = 26, eventAt = 11, window = 10;

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length)
                usage("missing value of " + a);
            String v = args[++i];
            switch (a) {
                case "--bootstrap" -> bootstrap = v;
                case "--topic" -> topic = v;
                case "--group" -> group = v;
                case "--rate" -> rate = Integer.parseInt(v);
                case "--size" -> size = Integer.parseInt(v);
                case "--duration" -> duration = Double.parseDouble(v);
                case "--event-at" -> eventAt = Double.parseDouble(v);
                case "--window" -> window = Double.parseDouble(v);
                case "--acks" -> acks = v;
                default -> usage("unknown option " + a);
            }
        }
        if (bootstrap == null || topic == null || group == null)
            usage("--bootstrap, --topic and --group are required");
        if (rate <= 0 || size < 0 || eventAt < window || duration <= eventAt + window)
            usage("want rate > 0 and window <= event-at < event-at + window < duration");
        System.exit(run());
    }

    private static void usage(String why) {
        System.err.println("ReloadLoad: " + why);
        System.err.println("usage: ReloadLoad --bootstrap HOST:PORT --topic T --group G [--rate N] [--size B]"
                + " [--duration S] [--event-at S] [--window S] [--acks all|1]");
        System.exit(2);
    }

    private static double metric(Map<MetricName, ? extends Metric> ms, String group, String name) {
        double sum = 0;
        for (var e : ms.entrySet()) {
            MetricName n = e.getKey();
            if (n.group().equals(group) && n.name().equals(name) && n.tags().size() <= 1) {
                Object v = e.getValue().metricValue();
                if (v instanceof Number x)
                    sum += x.doubleValue();
            }
        }
        return sum;
    }

    private static int run() throws Exception {
        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("acks", acks);
        pp.put("client.id", "reload-producer");
        pp.put("key.serializer", ByteArraySerializer.class.getName());
        pp.put("value.serializer", ByteArraySerializer.class.getName());
        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("client.id", "reload-consumer");
        cp.put("auto.offset.reset", "latest");
        cp.put("key.deserializer", ByteArrayDeserializer.class.getName());
        cp.put("value.deserializer", ByteArrayDeserializer.class.getName());

        int total = (int) Math.ceil(duration * rate);
        long[] latUs = new long[total];          // -1: not acknowledged
        boolean[] failed = new boolean[total];
        Arrays.fill(latUs, -1);
        Map<String, Integer> errors = new ConcurrentHashMap<>();
        String[] firstError = { null };
        AtomicLong acked = new AtomicLong(), nfailed = new AtomicLong();

        // the consumer, in its own thread
        AtomicLong consumed = new AtomicLong(), assigned = new AtomicLong(), revoked = new AtomicLong(),
                pollErrors = new AtomicLong();
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(cp);
        double[] cAtEvent = new double[2];
        Thread ct = new Thread(() -> {
            try {
                consumer.subscribe(List.of(topic), new ConsumerRebalanceListener() {
                    public void onPartitionsRevoked(Collection<TopicPartition> p) { revoked.incrementAndGet(); }
                    public void onPartitionsAssigned(Collection<TopicPartition> p) { assigned.incrementAndGet(); }
                });
                while (!Thread.currentThread().isInterrupted()) {
                    try {
                        consumed.addAndGet(consumer.poll(Duration.ofMillis(100)).count());
                    } catch (WakeupException e) {
                        break;
                    } catch (RuntimeException e) {
                        pollErrors.incrementAndGet();
                    }
                }
            } finally {
                consumer.close();
            }
        }, "consumer");
        ct.start();

        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(pp);
        byte[] value = new byte[size];
        for (int i = 0; i < size; i++)
            value[i] = (byte) ('a' + i % 26);
        long startNs = System.nanoTime();
        long startMs = System.currentTimeMillis();
        long eventNs = startNs + (long) (eventAt * 1e9);
        boolean evented = false;
        double[] pAtEvent = new double[2];
        for (int i = 0; i < total; i++) {
            long due = startNs + (long) (i * 1e9 / rate);
            long now = System.nanoTime();
            if (!evented && now >= eventNs) {
                evented = true;
                var pm = producer.metrics();
                pAtEvent[0] = metric(pm, "producer-metrics", "connection-close-total");
                pAtEvent[1] = metric(pm, "producer-metrics", "connection-creation-total");
                var cm = consumer.metrics();
                cAtEvent[0] = metric(cm, "consumer-metrics", "connection-close-total");
                cAtEvent[1] = metric(cm, "consumer-metrics", "connection-creation-total");
                System.out.println("EVENT " + (startMs + (eventNs - startNs) / 1_000_000));
                System.out.flush();
            }
            if (due > now)
                LockSupport.parkNanos(due - now);
            final int idx = i;
            final long dueNs = due;
            try {
                producer.send(new ProducerRecord<>(topic, null, value), (md, e) -> {
                    if (e == null) {
                        latUs[idx] = (System.nanoTime() - dueNs) / 1000;
                        acked.incrementAndGet();
                    } else {
                        failed[idx] = true;
                        nfailed.incrementAndGet();
                        errors.merge(e.getClass().getSimpleName(), 1, Integer::sum);
                        synchronized (firstError) {
                            if (firstError[0] == null)
                                firstError[0] = String.valueOf(e.getMessage());
                        }
                    }
                });
            } catch (RuntimeException e) {
                failed[idx] = true;
                nfailed.incrementAndGet();
                errors.merge(e.getClass().getSimpleName(), 1, Integer::sum);
            }
        }
        producer.flush();
        var pm = producer.metrics();
        double pClose = metric(pm, "producer-metrics", "connection-close-total");
        double pCreate = metric(pm, "producer-metrics", "connection-creation-total");
        var cm = consumer.metrics();
        double cClose = metric(cm, "consumer-metrics", "connection-close-total");
        double cCreate = metric(cm, "consumer-metrics", "connection-creation-total");
        producer.close(Duration.ofSeconds(10));
        consumer.wakeup();
        ct.join(10_000);

        int evIdx = (int) (eventAt * rate), w = (int) (window * rate);
        StringBuilder out = new StringBuilder("{");
        out.append("\"sent\":").append(total).append(",\"acked\":").append(acked.get())
                .append(",\"failed\":").append(nfailed.get());
        out.append(",\"before\":").append(window(latUs, failed, evIdx - w, evIdx));
        out.append(",\"during\":").append(window(latUs, failed, evIdx, evIdx + w));
        out.append(",\"after\":").append(window(latUs, failed, evIdx + w, total));
        out.append(",\"producer\":{\"close_at_event\":").append((long) pAtEvent[0])
                .append(",\"close_end\":").append((long) pClose)
                .append(",\"create_at_event\":").append((long) pAtEvent[1])
                .append(",\"create_end\":").append((long) pCreate).append("}");
        out.append(",\"consumer\":{\"close_at_event\":").append((long) cAtEvent[0])
                .append(",\"close_end\":").append((long) cClose)
                .append(",\"create_at_event\":").append((long) cAtEvent[1])
                .append(",\"create_end\":").append((long) cCreate)
                .append(",\"records\":").append(consumed.get())
                .append(",\"assigned\":").append(assigned.get())
                .append(",\"revoked\":").append(revoked.get())
                .append(",\"poll_errors\":").append(pollErrors.get()).append("}");
        out.append(",\"errors\":{");
        String sep = "";
        for (var e : new TreeMap<>(errors).entrySet()) {
            out.append(sep).append('"').append(e.getKey()).append("\":").append(e.getValue());
            sep = ",";
        }
        out.append("},\"first_error\":").append(jstr(firstError[0])).append("}");
        System.out.println(out);
        return 0;
    }

    /* latency summary of the records [from, to): ms with µs resolution */
    private static String window(long[] latUs, boolean[] failed, int from, int to) {
        from = Math.max(0, from);
        to = Math.min(latUs.length, to);
        List<Long> l = new ArrayList<>();
        int nfail = 0, lost = 0;
        for (int i = from; i < to; i++) {
            if (latUs[i] >= 0)
                l.add(latUs[i]);
            else if (failed[i])
                nfail++;
            else
                lost++;
        }
        long[] a = l.stream().mapToLong(Long::longValue).sorted().toArray();
        return String.format(java.util.Locale.ROOT,
                "{\"records\":%d,\"acked\":%d,\"failed\":%d,\"unanswered\":%d,\"p50_ms\":%.3f,\"p99_ms\":%.3f,"
                        + "\"p999_ms\":%.3f,\"max_ms\":%.3f}",
                to - from, a.length, nfail, lost, pct(a, 0.5), pct(a, 0.99), pct(a, 0.999),
                a.length > 0 ? a[a.length - 1] / 1000.0 : -1.0);
    }

    private static double pct(long[] sorted, double q) {
        if (sorted.length == 0)
            return -1;
        int i = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))] / 1000.0;
    }

    private static String jstr(String s) {
        if (s == null)
            return "null";
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\')
                b.append('\\').append(c);
            else if (c < 0x20)
                b.append(String.format("\\u%04x", (int) c));
            else
                b.append(c);
        }
        return b.append('"').toString();
    }
}
