/*
 * main — ferryd's command line. `--worker` hands over to the worker's entry
 * point and nothing more, `--successor` to an upgrade's new supervisor
 * (upgrade_io.c); everything else is the supervisor: `-t` validates a
 * config file, `-c FILE` runs in the foreground.
 */
#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/buildinfo.h"
#include "common/config.h"
#include "common/file.h"
#include "common/tlsmat.h"
#include "common/log.h"
#include "supervisor/admincreds.h"
#include "supervisor/sup_io.h"
#include "worker/worker.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: ferryd -c FILE        run the supervisor in the foreground\n"
	    "       ferryd -t -c FILE     validate FILE (exit 0 valid, 1 invalid)\n"
	    "       ferryd --version\n");
}

int
main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--worker") == 0)
			return worker_main(argc, argv);
		/* started by a running ferryd to take over from it (docs/design.md §11) */
		if (strcmp(argv[i], "--successor") == 0)
			return upgrade_successor_main(argc, argv);
	}
	/* the file an upgrade executes: the one we were started from, as given
	 * (before anything could change the directory) */
	char exec_path[4096], xerr[256];
	bool have_exec = buildinfo_exec_path(exec_path, sizeof exec_path, xerr, sizeof xerr) == 0;

	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "test", no_argument, NULL, 't' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ 0, 0, 0, 0 },
	};
	const char *path = NULL;
	int test = 0, c;
	while ((c = getopt_long(argc, argv, "c:th", opts, NULL)) != -1) {
		switch (c) {
		case 'c': path = optarg; break;
		case 't': test = 1; break;
		case 'V':
			printf("ferryd %s (build %s)\n", buildinfo_version(), buildinfo_id());
			return 0;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!path || optind != argc) {
		usage(stderr);
		return 2;
	}

	char err[512];
	size_t len = 0;
	char *text = file_read_all(path, CFG_MAX_FILE_BYTES, &len, err, sizeof err);
	if (!text) {
		fprintf(stderr, "%s\n", err);
		return 1;
	}
	struct cfg cfg;
	struct cfg_errors errs;
	cfg_errors_init(&errs);
	/* then the files the config names (TLS material): read and checked
	 * here, as by every reload, before anything serves */
	if (cfg_parse_string(path, text, len, &cfg, &errs) == -1 ||
	    tlsmat_read(&cfg, &errs) == -1) {
		cfg_free(&cfg);
		for (size_t i = 0; i < errs.n; i++)
			fprintf(stderr, "%s\n", errs.msg[i]);
		fprintf(stderr, "ferryd: %s: %zu error%s, configuration rejected\n", path, errs.n,
		    errs.n == 1 ? "" : "s");
		cfg_errors_free(&errs);
		free(text);
		return 1;
	}
	cfg_errors_free(&errs);
	if (test) {
		/* the admin API's credentials (token file, HTTPS files), as read
		 * at start and by every reload */
		cfg_errors_init(&errs);
		if (admincreds_check_cfg(&cfg, &errs) == -1) {
			fprintf(stderr, "%s\nferryd: %s: configuration rejected\n", errs.msg[0], path);
			cfg_errors_free(&errs);
			cfg_free(&cfg);
			free(text);
			return 1;
		}
		cfg_errors_free(&errs);
		printf("ferryd: %s: configuration ok (%zu cluster%s)\n", path, cfg.n_clusters,
		    cfg.n_clusters == 1 ? "" : "s");
		cfg_free(&cfg);
		free(text);
		return 0;
	}

	log_init("supervisor", NULL, (enum log_level)cfg.log_level, cfg.log_format == CFG_LOG_JSON);
	/* Workers re-execute this very binary (fresh address space), even if
	 * the file on disk was replaced meanwhile. */
	if (!have_exec)
		log_warn("upgrades disabled", "error=\"%s\"", xerr);
	int rc = sup_run(&cfg, path, text, len, "/proc/self/exe", have_exec ? exec_path : NULL);
	free(text);
	return rc;
}
