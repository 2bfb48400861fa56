/*
 * mock_cluster — hosts librdkafka's mock Kafka cluster for ferry's tests.
 *
 *   mock_cluster [-b N] [-t topic:partitions[:rf]]...
 *
 * Starts an N-broker mock cluster (broker ids 1..N, each listening on an
 * ephemeral 127.0.0.1 port), creates the given topics, then prints exactly
 * one line
 *
 *   BOOTSTRAP=127.0.0.1:p1,127.0.0.1:p2,...
 *
 * to stdout (flushed) and reads commands from stdin, one per line, each
 * answered with "OK" or "ERR reason":
 *
 *   down ID                      broker ID stops answering (connections closed)
 *   up ID                        broker ID is back
 *   leader TOPIC PARTITION ID    move a partition's leader (-1: no leader)
 *   rtt ID MS                    add MS of round-trip time to broker ID
 *   topic NAME PARTITIONS [RF]   create a topic
 *   bootstrap                    print the BOOTSTRAP= line again
 *   quit                         exit
 *
 * EOF on stdin, SIGTERM or SIGINT destroy the cluster and exit 0.
 * Test helper only: never installed.
 */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#define MAX_TOPICS 64
#define LINE_MAX_LEN 1024

struct topic_spec {
	char *name;
	int partitions;
	int rf; /* 0: default min(brokers, 3) */
};

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mock_cluster [-b BROKERS] [-t topic:partitions[:rf]]...\n");
}

/* Parses a decimal int in [min,max]; returns 0 on success. */
static int parse_int(const char *s, long min, long max, int *out)
{
	char *end;
	long v;

	if (!s || !*s)
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -1;
	*out = (int)v;
	return 0;
}

static int parse_topic_spec(char *arg, struct topic_spec *t)
{
	char *colon = strchr(arg, ':');
	char *colon2;

	if (!colon || colon == arg)
		return -1;
	*colon = '\0';
	colon2 = strchr(colon + 1, ':');
	if (colon2)
		*colon2 = '\0';
	t->name = arg;
	if (parse_int(colon + 1, 1, 100000, &t->partitions))
		return -1;
	t->rf = 0;
	if (colon2 && parse_int(colon2 + 1, 1, 1000, &t->rf))
		return -1;
	return 0;
}

static int create_topic(rd_kafka_mock_cluster_t *mc, int brokers, const char *name,
                        int partitions, int rf, char *err, size_t errlen)
{
	rd_kafka_resp_err_t e;

	if (rf == 0)
		rf = brokers < 3 ? brokers : 3;
	if (rf > brokers) {
		snprintf(err, errlen, "replication factor %d exceeds %d brokers", rf, brokers);
		return -1;
	}
	e = rd_kafka_mock_topic_create(mc, name, partitions, rf);
	if (e) {
		snprintf(err, errlen, "%s", rd_kafka_err2str(e));
		return -1;
	}
	return 0;
}

__attribute__((format(printf, 1, 2))) static void reply_err(const char *fmt, ...)
{
	va_list ap;

	fputs("ERR ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fputc('\n', stdout);
	fflush(stdout);
}

static void reply_result(rd_kafka_resp_err_t e)
{
	if (e)
		printf("ERR %s\n", rd_kafka_err2str(e));
	else
		puts("OK");
	fflush(stdout);
}

/*
 * Executes one command line; returns 1 when the program should quit.
 */
static int run_command(rd_kafka_mock_cluster_t *mc, int brokers, char *line)
{
	char *argv[8];
	int argc = 0;
	char *save = NULL;
	char *tok;
	int id, part, ms;

	for (tok = strtok_r(line, " \t\r\n", &save); tok && argc < 8;
	     tok = strtok_r(NULL, " \t\r\n", &save))
		argv[argc++] = tok;
	if (argc == 0)
		return 0; /* blank line: ignore silently */

	if (!strcmp(argv[0], "quit")) {
		puts("OK");
		fflush(stdout);
		return 1;
	} else if (!strcmp(argv[0], "down") || !strcmp(argv[0], "up")) {
		if (argc != 2 || parse_int(argv[1], 1, brokers, &id)) {
			reply_err("usage: %s ID (1..N)", argv[0]);
			return 0;
		}
		reply_result(argv[0][0] == 'd' ? rd_kafka_mock_broker_set_down(mc, id)
		                               : rd_kafka_mock_broker_set_up(mc, id));
	} else if (!strcmp(argv[0], "leader")) {
		if (argc != 4 || parse_int(argv[2], 0, INT_MAX, &part) ||
		    parse_int(argv[3], -1, brokers, &id) || id == 0) {
			reply_err("usage: %s TOPIC PARTITION ID", argv[0]);
			return 0;
		}
		reply_result(rd_kafka_mock_partition_set_leader(mc, argv[1], part, id));
	} else if (!strcmp(argv[0], "rtt")) {
		if (argc != 3 || parse_int(argv[1], 1, brokers, &id) ||
		    parse_int(argv[2], 0, 600000, &ms)) {
			reply_err("usage: %s ID MS", argv[0]);
			return 0;
		}
		reply_result(rd_kafka_mock_broker_set_rtt(mc, id, ms));
	} else if (!strcmp(argv[0], "topic")) {
		char err[256];
		int rf = 0;

		if (argc < 3 || argc > 4 || parse_int(argv[2], 1, 100000, &part) ||
		    (argc == 4 && parse_int(argv[3], 1, 1000, &rf))) {
			reply_err("usage: %s NAME PARTITIONS [RF]", argv[0]);
			return 0;
		}
		if (create_topic(mc, brokers, argv[1], part, rf, err, sizeof(err)))
			reply_err("%s", err);
		else
			reply_result(RD_KAFKA_RESP_ERR_NO_ERROR);
	} else if (!strcmp(argv[0], "bootstrap")) {
		printf("BOOTSTRAP=%s\n", rd_kafka_mock_cluster_bootstraps(mc));
		fflush(stdout);
	} else {
		reply_err("unknown command '%s'", argv[0]);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct topic_spec topics[MAX_TOPICS];
	int n_topics = 0;
	int brokers = 3;
	int opt;
	char errstr[512];
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	rd_kafka_mock_cluster_t *mc;
	struct sigaction sa;
	char line[LINE_MAX_LEN];
	size_t len = 0;
	int quit = 0;

	while ((opt = getopt(argc, argv, "b:t:h")) != -1) {
		switch (opt) {
		case 'b':
			if (parse_int(optarg, 1, 64, &brokers)) {
				fprintf(stderr, "mock_cluster: -b wants 1..64, got '%s'\n", optarg);
				return 2;
			}
			break;
		case 't':
			if (n_topics == MAX_TOPICS) {
				fprintf(stderr, "mock_cluster: too many -t (max %d)\n", MAX_TOPICS);
				return 2;
			}
			if (parse_topic_spec(optarg, &topics[n_topics])) {
				fprintf(stderr, "mock_cluster: -t wants topic:partitions[:rf]\n");
				return 2;
			}
			n_topics++;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0; /* no SA_RESTART: let poll() return EINTR */
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	/* The handle only hosts the mock cluster; it never talks to a broker. */
	conf = rd_kafka_conf_new();
	if (rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr)) !=
	    RD_KAFKA_CONF_OK) {
		fprintf(stderr, "mock_cluster: %s\n", errstr);
		return 1;
	}
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!rk) {
		fprintf(stderr, "mock_cluster: rd_kafka_new: %s\n", errstr);
		return 1;
	}
	mc = rd_kafka_mock_cluster_new(rk, brokers);
	if (!mc) {
		fprintf(stderr, "mock_cluster: cannot create a %d-broker mock cluster\n", brokers);
		rd_kafka_destroy(rk);
		return 1;
	}
	for (int i = 0; i < n_topics; i++) {
		if (create_topic(mc, brokers, topics[i].name, topics[i].partitions, topics[i].rf,
		                 errstr, sizeof(errstr))) {
			fprintf(stderr, "mock_cluster: topic %s: %s\n", topics[i].name, errstr);
			rd_kafka_mock_cluster_destroy(mc);
			rd_kafka_destroy(rk);
			return 1;
		}
	}

	printf("BOOTSTRAP=%s\n", rd_kafka_mock_cluster_bootstraps(mc));
	fflush(stdout);

	/* Read stdin with poll() so that a signal is noticed promptly. */
	while (!stop_requested && !quit) {
		struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
		ssize_t n;
		char *nl;

		int pr = poll(&pfd, 1, 500);
		if (pr < 0) {
			if (errno == EINTR)
				continue;
			perror("mock_cluster: poll");
			break;
		}
		if (pr == 0)
			continue;
		n = read(STDIN_FILENO, line + len, sizeof(line) - 1 - len);
		if (n < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			perror("mock_cluster: read");
			break;
		}
		if (n == 0)
			break; /* EOF */
		len += (size_t)n;
		line[len] = '\0';
		while (!quit && (nl = strchr(line, '\n')) != NULL) {
			size_t used = (size_t)(nl - line) + 1;

			*nl = '\0';
			quit = run_command(mc, brokers, line);
			memmove(line, line + used, len - used + 1);
			len -= used;
		}
		if (len == sizeof(line) - 1) {
			reply_err("%s", "line too long");
			len = 0;
		}
	}

	rd_kafka_mock_cluster_destroy(mc);
	rd_kafka_destroy(rk);
	return 0;
}
