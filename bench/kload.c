/*
 * kload — Kafka load generator for scripts/bench, on librdkafka's public API.
 *
 *   kload -b BROKERS -t TOPIC [-C] [-s SIZE] [-d SECS] [-w WARMUP_SECS]
 *         [-r MSGS_PER_SEC] [-n PRODUCERS] [-R FROMPORT:TOPORT,...] [-p PID,...]
 *         [-X key=val]...
 *
 * Produce mode (default): 1 KiB messages (-s), acks=1, linger.ms=5, no key
 * (spread over all partitions). Without -r it produces as fast as the
 * client can (saturation); with -r it paces to that many messages per
 * second and measures latency. Consume mode (-C): assigns every partition
 * of TOPIC from the beginning and re-reads the retained log in a loop
 * (seek to the beginning at each partition EOF), so a small log gives an
 * unbounded fetch stream.
 *
 * After -w seconds of warm-up (connections, metadata) it measures for -d
 * seconds and prints one line of key=value pairs:
 *
 *   mode msgs bytes secs mbps (MB = 10^6 bytes of payload) errors
 *   rtt_p50_us rtt_p99_us rtt_p99_max_us rtt_windows  (librdkafka broker rtt:
 *       request sent -> response received, per statistics window and broker;
 *       median of p50s, median and max of p99s)
 *   dr_p50_us dr_p99_us     (-r only: delivery latency from the *intended*
 *       send time, so a stalled path is not hidden by coordinated omission)
 *   cpu_ms                  utime+stime of the -p PIDs during the window
 *   self_cpu_ms             this process during the window
 *
 * -n N (saturating produce only) runs N producer instances in this process,
 * instance i producing only to partition i mod (the topic's partitions): N
 * producer connections to the brokers (plus each instance's bootstrap
 * connection, idle after the first metadata), driven round-robin by one
 * thread. The figures are the sum over the instances.
 *
 * -R rewrites the port of every broker connection librdkafka makes
 * (connect_cb): how the HAProxy baseline keeps the client on the proxy
 * although HAProxy cannot rewrite the broker addresses in Metadata.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_REMAP 64
#define MAX_PIDS 64
#define MAX_WIN 4096
#define MAX_INST 64

static struct { uint16_t from, to; } remap[MAX_REMAP];
static int n_remap;
static int pids[MAX_PIDS];
static int n_pids;

/* measurement state */
static int measuring;           /* 0 warm-up, 1 window, 2 after */
static uint64_t t0_ns;          /* start of the window */
static uint64_t m_msgs, m_bytes, m_errors, all_errors;
static uint32_t *lat_us;        /* delivery latencies in the window (-r) */
static size_t n_lat, cap_lat;
static double win_p50[MAX_WIN], win_p99[MAX_WIN];
static int n_win;

static uint64_t
now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
die(const char *fmt, const char *arg)
{
	fprintf(stderr, "kload: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	exit(1);
}

/* utime+stime of the -p processes, in ms (ticks of sysconf(_SC_CLK_TCK)). */
static double
pids_cpu_ms(void)
{
	double total = 0;
	long hz = sysconf(_SC_CLK_TCK);
	for (int i = 0; i < n_pids; i++) {
		char path[64], buf[1024];
		snprintf(path, sizeof path, "/proc/%d/stat", pids[i]);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		buf[n] = 0;
		char *p = strrchr(buf, ')');  /* comm may hold spaces */
		if (!p)
			continue;
		unsigned long ut = 0, st = 0;
		/* after ") ": state(3) ... utime is field 14, stime 15 */
		if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			&st) == 2)
			total += (double)(ut + st) * 1000.0 / (double)hz;
	}
	return total;
}

static double
self_cpu_ms(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

static int
connect_remap(int fd, const struct sockaddr *addr, int len, const char *id, void *opaque)
{
	struct sockaddr_in sin;
	(void)id;
	(void)opaque;
	if (addr->sa_family == AF_INET && (size_t)len >= sizeof sin) {
		memcpy(&sin, addr, sizeof sin);
		for (int i = 0; i < n_remap; i++)
			if (ntohs(sin.sin_port) == remap[i].from) {
				sin.sin_port = htons(remap[i].to);
				addr = (const struct sockaddr *)&sin;
				len = sizeof sin;
				break;
			}
	}
	/* librdkafka wants 0 for "connecting" (its own callback maps EINPROGRESS to 0) */
	return connect(fd, addr, (socklen_t)len) == -1 && errno != EINPROGRESS ? errno : 0;
}

/* Statistics: per-broker rtt window of every real broker with traffic. */
static int
stats_cb(rd_kafka_t *rk, char *json, size_t len, void *opaque)
{
	(void)rk;
	(void)opaque;
	if (measuring != 1)
		return 0;
	json_error_t e;
	json_t *root = json_loadb(json, len, 0, &e);
	if (!root)
		return 0;
	json_t *brokers = json_object_get(root, "brokers");
	const char *name;
	json_t *b;
	json_object_foreach(brokers, name, b) {
		if (json_integer_value(json_object_get(b, "nodeid")) < 0)
			continue;
		json_t *rtt = json_object_get(b, "rtt");
		if (json_integer_value(json_object_get(rtt, "cnt")) < 10 || n_win >= MAX_WIN)
			continue;
		win_p50[n_win] = (double)json_integer_value(json_object_get(rtt, "p50"));
		win_p99[n_win] = (double)json_integer_value(json_object_get(rtt, "p99"));
		n_win++;
	}
	json_decref(root);
	return 0;
}

static void
dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	(void)rk;
	(void)opaque;
	if (m->err) {
		all_errors++;
		if (measuring == 1)
			m_errors++;
		return;
	}
	if (measuring != 1)
		return;
	m_msgs++;
	m_bytes += m->len;
	if (lat_us) {
		uint64_t intended = (uint64_t)(uintptr_t)m->_private;
		if (intended < t0_ns)
			return;  /* produced during warm-up */
		if (n_lat == cap_lat) {
			cap_lat = cap_lat ? cap_lat * 2 : 65536;
			lat_us = realloc(lat_us, cap_lat * sizeof *lat_us);
			if (!lat_us)
				die("%s", "out of memory");
		}
		lat_us[n_lat++] = (uint32_t)((now_ns() - intended) / 1000);
	}
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int
cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	if (n == 0)
		return -1;
	qsort(v, (size_t)n, sizeof *v, cmp_dbl);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void
conf_set(rd_kafka_conf_t *c, const char *k, const char *v)
{
	char err[512];
	if (rd_kafka_conf_set(c, k, v, err, sizeof err) != RD_KAFKA_CONF_OK)
		die("%s", err);
}

static volatile sig_atomic_t stop;
static void
on_sig(int s)
{
	(void)s;
	stop = 1;
}

/* -n: n producers from conf (each a copy), instance i on partition i % np;
 * produces as fast as they take it until the window is over. The caller
 * destroys nothing: the handles are flushed and destroyed here. */
static void
produce_many(rd_kafka_conf_t *conf, int n, const char *topic, size_t size, uint64_t warm_end,
	     uint64_t win_end, double *cpu0, double *self0, double *cpu1, double *self1,
	     uint64_t *t1_ns)
{
	rd_kafka_t *rk[MAX_INST];
	rd_kafka_topic_t *rkt[MAX_INST];
	char err[512];
	for (int i = 0; i < n; i++) {
		rd_kafka_conf_t *c = i == n - 1 ? conf : rd_kafka_conf_dup(conf);
		if (!(rk[i] = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err)))
			die("%s", err);
		rkt[i] = rd_kafka_topic_new(rk[i], topic, NULL);
	}
	const struct rd_kafka_metadata *md;
	rd_kafka_resp_err_t e = rd_kafka_metadata(rk[0], 0, rkt[0], &md, 10000);
	if (e || md->topic_cnt != 1 || md->topics[0].partition_cnt == 0)
		die("metadata for the topic: %s", e ? rd_kafka_err2str(e) : "no partitions");
	int np = md->topics[0].partition_cnt;
	rd_kafka_metadata_destroy(md);
	char *payload = malloc(size);
	if (!payload)
		die("%s", "out of memory");
	memset(payload, 'x', size);
	while (!stop && measuring < 2) {
		uint64_t t = now_ns();
		if (measuring == 0 && t >= warm_end) {
			measuring = 1;
			t0_ns = now_ns();
			*cpu0 = pids_cpu_ms();
			*self0 = self_cpu_ms();
		} else if (measuring == 1 && t >= win_end) {
			measuring = 2;
			*t1_ns = now_ns();
			*cpu1 = pids_cpu_ms();
			*self1 = self_cpu_ms();
			break;
		}
		int blocked = 0;
		for (int i = 0; i < n; i++) {
			for (int k = 0; k < 1000; k++) {
				if (rd_kafka_produce(rkt[i], i % np, 0, payload, size, NULL, 0,
					(void *)(uintptr_t)now_ns()) == -1) {
					if (rd_kafka_last_error() != RD_KAFKA_RESP_ERR__QUEUE_FULL)
						die("produce: %s",
						    rd_kafka_err2str(rd_kafka_last_error()));
					blocked++;
					break;
				}
			}
			rd_kafka_poll(rk[i], 0);
		}
		if (blocked == n) {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
	}
	for (int i = 0; i < n; i++) {
		rd_kafka_flush(rk[i], 10000);
		rd_kafka_topic_destroy(rkt[i]);
		rd_kafka_destroy(rk[i]);
	}
	free(payload);
}

int
main(int argc, char **argv)
{
	const char *brokers = NULL, *topic = NULL;
	int consume = 0, opt, n_inst = 1;
	size_t size = 1024;
	double dur = 5, warm = 1, rate = 0;
	char *xs[64];
	int n_xs = 0;

	while ((opt = getopt(argc, argv, "b:t:Cs:d:w:r:n:R:p:X:")) != -1) {
		switch (opt) {
		case 'b': brokers = optarg; break;
		case 't': topic = optarg; break;
		case 'C': consume = 1; break;
		case 's': size = strtoul(optarg, NULL, 10); break;
		case 'd': dur = atof(optarg); break;
		case 'w': warm = atof(optarg); break;
		case 'r': rate = atof(optarg); break;
		case 'n': n_inst = atoi(optarg); break;
		case 'R':
			for (char *s = strtok(optarg, ","); s && n_remap < MAX_REMAP; s = strtok(NULL, ",")) {
				unsigned a, b;
				if (sscanf(s, "%u:%u", &a, &b) != 2)
					die("bad -R entry '%s' (want FROMPORT:TOPORT)", s);
				remap[n_remap].from = (uint16_t)a;
				remap[n_remap++].to = (uint16_t)b;
			}
			break;
		case 'p':
			for (char *s = strtok(optarg, ","); s && n_pids < MAX_PIDS; s = strtok(NULL, ","))
				pids[n_pids++] = atoi(s);
			break;
		case 'X':
			if (n_xs < 64)
				xs[n_xs++] = optarg;
			break;
		default:
			fprintf(stderr, "usage: kload -b BROKERS -t TOPIC [-C] [-s SIZE] [-d SECS] "
					"[-w SECS] [-r MSG/S] [-n N] [-R FROM:TO,...] [-p PID,...] [-X k=v]...\n");
			return 2;
		}
	}
	if (!brokers || !topic || size == 0 || dur <= 0)
		die("%s", "need -b and -t (see the usage at the top of kload.c)");
	if (n_inst < 1 || n_inst > MAX_INST || (n_inst > 1 && (consume || rate > 0)))
		die("%s", "-n wants 1..64 and only saturating produce (no -C, no -r)");
	signal(SIGINT, on_sig);
	signal(SIGTERM, on_sig);

	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	conf_set(conf, "bootstrap.servers", brokers);
	conf_set(conf, "statistics.interval.ms", "500");
	conf_set(conf, "log_level", "3");
	if (consume) {
		char gid[64];
		snprintf(gid, sizeof gid, "kload-%d", (int)getpid());
		conf_set(conf, "group.id", gid);
		conf_set(conf, "enable.auto.commit", "false");
		conf_set(conf, "enable.partition.eof", "true");
		conf_set(conf, "auto.offset.reset", "earliest");
		/* the log is re-read in a loop: no pause at its end */
		conf_set(conf, "fetch.wait.max.ms", "1");
		conf_set(conf, "fetch.error.backoff.ms", "1");
	} else {
		conf_set(conf, "acks", "1");
		conf_set(conf, "linger.ms", "5");
		conf_set(conf, "batch.size", "1000000");
		conf_set(conf, "queue.buffering.max.messages", "200000");
		conf_set(conf, "compression.codec", "none");
		rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
	}
	for (int i = 0; i < n_xs; i++) {
		char *eq = strchr(xs[i], '=');
		if (!eq)
			die("-X wants key=value, got '%s'", xs[i]);
		*eq = 0;
		conf_set(conf, xs[i], eq + 1);
	}
	rd_kafka_conf_set_stats_cb(conf, stats_cb);
	if (n_remap)
		rd_kafka_conf_set_connect_cb(conf, connect_remap);

	uint64_t start = now_ns();
	uint64_t warm_end = start + (uint64_t)(warm * 1e9);
	uint64_t win_end = warm_end + (uint64_t)(dur * 1e9);
	double cpu0 = 0, self0 = 0, cpu1 = 0, self1 = 0;
	uint64_t t1_ns = 0;
	rd_kafka_t *rk = NULL;
	if (n_inst > 1) {
		produce_many(conf, n_inst, topic, size, warm_end, win_end, &cpu0, &self0, &cpu1,
		    &self1, &t1_ns);
		goto report;
	}

	char err[512];
	rk = rd_kafka_new(consume ? RD_KAFKA_CONSUMER : RD_KAFKA_PRODUCER, conf, err,
	    sizeof err);
	if (!rk)
		die("%s", err);
	if (consume)
		rd_kafka_poll_set_consumer(rk);  /* stats arrive through consumer_poll */

	if (rate > 0 && !consume)
		lat_us = calloc(1, 1), cap_lat = 0; /* enabled; grown on first use */

#define WINDOW_CHECK(t)                                                             \
	do {                                                                        \
		if (measuring == 0 && (t) >= warm_end) {                            \
			measuring = 1;                                              \
			t0_ns = now_ns();                                           \
			cpu0 = pids_cpu_ms();                                       \
			self0 = self_cpu_ms();                                      \
		} else if (measuring == 1 && (t) >= win_end) {                      \
			measuring = 2;                                              \
			t1_ns = now_ns();                                           \
			cpu1 = pids_cpu_ms();                                       \
			self1 = self_cpu_ms();                                      \
		}                                                                   \
	} while (0)

	if (!consume) {
		char *payload = malloc(size);
		memset(payload, 'x', size);
		rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
		uint64_t sent = 0;
		while (!stop && measuring < 2) {
			uint64_t t = now_ns();
			WINDOW_CHECK(t);
			if (measuring == 2)
				break;
			uint64_t due = rate > 0 ? (uint64_t)((double)(t - start) / 1e9 * rate) + 1
						: sent + 10000;
			int blocked = 0;
			while (sent < due) {
				/* intended send time: the schedule, not when we got to it */
				uint64_t intended = rate > 0 ? start + (uint64_t)((double)sent * 1e9 / rate)
							     : now_ns();
				if (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, 0, payload, size, NULL, 0,
					(void *)(uintptr_t)intended) == -1) {
					if (rd_kafka_last_error() == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
						blocked = 1;
						break;
					}
					die("produce: %s", rd_kafka_err2str(rd_kafka_last_error()));
				}
				sent++;
			}
			rd_kafka_poll(rk, blocked ? 1 : 0);
			if (rate > 0 && !blocked) {
				struct timespec ts = { 0, 500000 };
				nanosleep(&ts, NULL);
			}
		}
		rd_kafka_flush(rk, 10000);
		rd_kafka_topic_destroy(rkt);
		free(payload);
	} else {
		const struct rd_kafka_metadata *md;
		rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
		rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
		if (e || md->topic_cnt != 1 || md->topics[0].partition_cnt == 0)
			die("metadata for the topic: %s", e ? rd_kafka_err2str(e) : "no partitions");
		int np = md->topics[0].partition_cnt;
		rd_kafka_metadata_destroy(md);
		rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(np);
		for (int i = 0; i < np; i++)
			rd_kafka_topic_partition_list_add(tp, topic, i)->offset = RD_KAFKA_OFFSET_BEGINNING;
		if ((e = rd_kafka_assign(rk, tp)))
			die("assign: %s", rd_kafka_err2str(e));
		rd_kafka_topic_partition_list_destroy(tp);
		while (!stop && measuring < 2) {
			rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
			WINDOW_CHECK(now_ns());
			if (!m)
				continue;
			if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
				rd_kafka_seek(m->rkt, m->partition, RD_KAFKA_OFFSET_BEGINNING, 0);
			} else if (m->err) {
				all_errors++;
				if (measuring == 1)
					m_errors++;
				if (m_errors < 5)
					fprintf(stderr, "kload: consume: %s\n", rd_kafka_message_errstr(m));
			} else if (measuring == 1) {
				m_msgs++;
				m_bytes += m->len;
			}
			rd_kafka_message_destroy(m);
		}
		rd_kafka_consumer_close(rk);
		rd_kafka_topic_destroy(rkt);
	}
	rd_kafka_destroy(rk);
report:
	if (measuring < 2)
		die("%s", "interrupted before the end of the window");

	double secs = (double)(t1_ns - t0_ns) / 1e9;
	double p99s[MAX_WIN];
	memcpy(p99s, win_p99, sizeof p99s);
	double p99max = -1;
	for (int i = 0; i < n_win; i++)
		if (p99s[i] > p99max)
			p99max = p99s[i];
	printf("mode=%s msgs=%" PRIu64 " bytes=%" PRIu64 " secs=%.3f mbps=%.1f errors=%" PRIu64
	       " all_errors=%" PRIu64 " rtt_p50_us=%.0f rtt_p99_us=%.0f rtt_p99_max_us=%.0f rtt_windows=%d",
	    consume ? "consume" : rate > 0 ? "rate" : "saturate", m_msgs, m_bytes, secs,
	    (double)m_bytes / 1e6 / secs, m_errors, all_errors, median(win_p50, n_win),
	    median(p99s, n_win), p99max, n_win);
	if (lat_us && n_lat) {
		qsort(lat_us, n_lat, sizeof *lat_us, cmp_u32);
		printf(" dr_p50_us=%u dr_p99_us=%u", lat_us[n_lat / 2], lat_us[n_lat * 99 / 100]);
	}
	printf(" cpu_ms=%.0f self_cpu_ms=%.0f\n", cpu1 - cpu0, self1 - self0);
	return 0;
}
