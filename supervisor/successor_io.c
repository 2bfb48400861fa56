/*
 * successor_io — the start of an upgrade's successor, `ferryd --successor`
 * (docs/design.md §11): the handshake and the state received synchronously
 * (there is nothing else to do yet, and every read has the predecessor's
 * init_timeout as its deadline), the record, every socket (a socket,
 * listening, at the address the record and the configuration name) and
 * the configuration validated as `ferryd -t` does (parse, TLS files, admin
 * credentials), then ferryd built around it (sup_io_init,
 * sup_upgrade_restore) and its loop run; from there the channel is one more
 * event source of upgrade_io.c. Part of the I/O layer (sup_io_priv.h).
 */
#include "supervisor/sup_io.h"
#include "supervisor/sup_io_priv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/buildinfo.h"
#include "common/fault.h"
#include "common/log.h"
#include "common/tlsmat.h"
#include "supervisor/admincreds.h"
#include "supervisor/staterec.h"
#include "supervisor/upgproto.h"

#define UPG_OFFER_WAIT_MS 30000   /* OFFER comes first, within this */

/* Receive one message of the channel within deadline (mono ms), checked
 * by upg_decode. 1, 0 EOF, -1 error or timeout (err). */
static int
upg_recv_sync(int fd, uint8_t *buf, struct ipc_msg *msg, uint64_t deadline, char *err,
	      size_t errlen)
{
	for (;;) {
		uint64_t now = clock_mono_ms();
		if (now >= deadline) {
			snprintf(err, errlen, "the running ferryd sent nothing more in time");
			return -1;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int r = poll(&p, 1, (int)(deadline - now));
		if (r == -1 && errno == EINTR)
			continue;
		if (r <= 0)
			continue;
		r = ipc_recv_frame(fd, buf, UPG_BUF, msg, err, errlen);
		if (r == -1 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r == 1 && upg_decode(msg, err, errlen) == -1) {
			ipc_close_fds(msg);
			return -1;
		}
		if (r == -1 && !err[0])
			snprintf(err, errlen, "%s", strerror(errno));
		return r;
	}
}

/* "A-B" of a fault point into [lo, hi]. */
static void
upg_fault_range(const char *name, uint32_t *lo, uint32_t *hi)
{
	const char *v = fault_value(name);
	unsigned a, b;
	if (v && sscanf(v, "%u-%u", &a, &b) == 2) {
		*lo = a;
		*hi = b;
	}
}

/* Is fd a listening stream socket bound to what the record says? */
static int
upg_check_fd(int fd, const struct staterec_fd *f, char *err, size_t errlen)
{
	struct stat st;
	int listening = 0;
	socklen_t l = sizeof listening;
	if (fstat(fd, &st) == -1 || !S_ISSOCK(st.st_mode) ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l) == -1 || !listening) {
		snprintf(err, errlen, "descriptor for %s is not a listening socket",
		    f->kind == STATEREC_FD_CONTROL ? f->path : f->addr.host);
		return -1;
	}
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == -1) {
		snprintf(err, errlen, "getsockname: %s", strerror(errno));
		return -1;
	}
	if (f->kind == STATEREC_FD_CONTROL) {
		const struct sockaddr_un *un = (const struct sockaddr_un *)&ss;
		if (ss.ss_family != AF_UNIX || strncmp(un->sun_path, f->path, sizeof un->sun_path)) {
			snprintf(err, errlen, "the control socket passed is not %s", f->path);
			return -1;
		}
		return 0;
	}
	/* the record's host is the configuration's literal: compared as an
	 * address, so "::" and "0:0::0" are one */
	unsigned char want[16];
	bool same = false;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
		same = inet_pton(AF_INET, f->addr.host, want) == 1 &&
		    memcmp(&in->sin_addr, want, 4) == 0 && ntohs(in->sin_port) == f->addr.port;
	} else if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
		same = inet_pton(AF_INET6, f->addr.host, want) == 1 &&
		    memcmp(&in6->sin6_addr, want, 16) == 0 && ntohs(in6->sin6_port) == f->addr.port;
	}
	if (!same) {
		snprintf(err, errlen, "the socket passed for %s:%u is bound to another address",
		    f->addr.host, f->addr.port);
		return -1;
	}
	return 0;
}

/* The record's state from the memfd: sealed, of the size said, read. */
static char *
upg_read_record(int fd, const struct upg_state_hdr *h, char *err, size_t errlen)
{
	int seals = fcntl(fd, F_GET_SEALS);
	int want = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
	struct stat st;
	if (seals == -1 || (seals & want) != want) {
		snprintf(err, errlen, "the state record is not sealed");
		return NULL;
	}
	if (fstat(fd, &st) == -1 || (uint64_t)st.st_size != h->size ||
	    h->size > STATEREC_MAX_BYTES) {
		snprintf(err, errlen, "the state record is not %llu bytes (or too large)",
		    (unsigned long long)h->size);
		return NULL;
	}
	char *text = malloc(h->size + 1);
	if (!text) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	size_t off = 0;
	while (off < h->size) {
		ssize_t n = pread(fd, text + off, h->size - off, (off_t)off);
		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			snprintf(err, errlen, "reading the state record: %s", n ? strerror(errno) :
			    "short");
			free(text);
			return NULL;
		}
		off += (size_t)n;
	}
	text[h->size] = 0;
	return text;
}

/* Send {"errors":[...]} (INVALID or PREPARE_FAILED) and log them. */
static void
upg_refuse(int fd, uint32_t type, char **errs, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; i < n; i++) {
		json_t *m = json_string(errs[i]);
		json_array_append_new(a, m ? m : json_string("(not valid UTF-8)"));
		log_error("upgrade refused by the new ferryd", "error=\"%s\"", errs[i]);
	}
	json_t *o = json_pack("{s:o}", "errors", a);
	char *t = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (t && strlen(t) > UPG_JSON_MAX)
		t[0] = 0;
	if (t && t[0])
		ipc_send(fd, (enum ipc_type)type, 0, t, strlen(t), NULL, 0);
	free(t);
}

struct upg_received {
	struct staterec rec;
	bool have_rec;
	int *fds;
	size_t nfds, total;
	struct upg_secret *secrets;   /* guarded memory */
	size_t n_secrets, cap_secrets;
};

static void
upg_received_free(struct upg_received *r)
{
	for (size_t i = 0; i < r->nfds; i++)
		if (r->fds[i] >= 0)
			close(r->fds[i]);
	free(r->fds);
	if (r->secrets)
		sodium_free(r->secrets);
	if (r->have_rec)
		staterec_free(&r->rec);
	memset(r, 0, sizeof *r);
}

/* STATE, FDS..., SECRET..., SENT. 0, or -1 with err. */
static int
upg_receive(int fd, uint8_t *buf, uint32_t record, uint64_t deadline, struct upg_received *r,
	    char *err, size_t errlen)
{
	for (;;) {
		struct ipc_msg msg;
		int rc = upg_recv_sync(fd, buf, &msg, deadline, err, errlen);
		if (rc != 1) {
			if (rc == 0)
				snprintf(err, errlen, "the running ferryd closed the upgrade channel");
			return -1;
		}
		switch (msg.hdr.type) {
		case UPG_STATE: {
			struct upg_state_hdr h;
			memcpy(&h, msg.payload, sizeof h);
			char *text = r->have_rec || h.record != record ? NULL :
			    upg_read_record(msg.fds[0], &h, err, errlen);
			ipc_close_fds(&msg);
			if (!text) {
				if (!err[0] || h.record != record)
					snprintf(err, errlen, "state record version %u, %u was agreed",
					    h.record, record);
				return -1;
			}
			rc = staterec_decode(text, h.size, record, &r->rec, err, errlen);
			free(text);
			if (rc == -1)
				return -1;
			r->have_rec = true;
			break;
		}
		case UPG_FDS: {
			struct ipc_listeners li;
			memcpy(&li, msg.payload, sizeof li);
			size_t n = msg.nfds;
			ipc_msg_take_fds(&msg);
			if (!r->fds && li.total <= 65536)
				r->fds = calloc(li.total ? li.total : 1, sizeof *r->fds), r->total = li.total;
			if (!r->fds || li.first != r->nfds || li.count != n || li.total != r->total ||
			    r->nfds + n > r->total) {
				for (size_t i = 0; i < n; i++)
					close(msg.fds[i]);
				snprintf(err, errlen, "listening sockets %u..%u of %u out of order",
				    li.first, li.first + li.count, li.total);
				return -1;
			}
			memcpy(r->fds + r->nfds, msg.fds, n * sizeof *r->fds);
			r->nfds += n;
			break;
		}
		case UPG_SECRET:
			if (r->n_secrets == r->cap_secrets) {
				size_t cap = r->cap_secrets ? 2 * r->cap_secrets : 8;
				struct upg_secret *ns = sodium_malloc(cap * sizeof *ns);
				if (!ns) {
					snprintf(err, errlen, "out of memory");
					return -1;
				}
				if (r->secrets) {
					memcpy(ns, r->secrets, r->n_secrets * sizeof *ns);
					sodium_free(r->secrets);
				}
				r->secrets = ns;
				r->cap_secrets = cap;
			}
			memcpy(&r->secrets[r->n_secrets++], msg.payload, sizeof *r->secrets);
			sodium_memzero(msg.payload, msg.hdr.len);
			break;
		case UPG_SENT:
			if (!r->have_rec || r->nfds != r->total) {
				snprintf(err, errlen, "the state arrived incomplete");
				return -1;
			}
			return 0;
		default:
			ipc_close_fds(&msg);
			snprintf(err, errlen, "unexpected %s while receiving the state",
			    upg_type_str(msg.hdr.type));
			return -1;
		}
	}
}

/* Record, sockets and configuration agree, and the configuration is valid
 * as `ferryd -t` says. Every problem goes into errs (at most n). */
static size_t
upg_validate(struct upg_received *r, struct cfg *cfg, bool *cfg_ok, char **errs, size_t n)
{
	size_t k = 0;
	char err[512];
	struct staterec *rec = &r->rec;
	*cfg_ok = false;
	if (rec->n_fds != r->nfds) {
		snprintf(err, sizeof err, "the record names %zu sockets, %zu arrived", rec->n_fds,
		    r->nfds);
		errs[k++] = strdup(err);
		return k;
	}
	for (size_t i = 0; i < r->nfds && k < n; i++)
		if (upg_check_fd(r->fds[i], &rec->fds[i], err, sizeof err) == -1)
			errs[k++] = strdup(err);
	struct cfg_errors ce;
	cfg_errors_init(&ce);
	if (cfg_parse_string(rec->config_path, rec->config_text, rec->config_len, cfg, &ce) == 0 &&
	    tlsmat_read(cfg, &ce) == 0 && admincreds_check_cfg(cfg, &ce) == 0)
		*cfg_ok = true;
	for (size_t i = 0; i < ce.n && k < n; i++)
		errs[k++] = strdup(ce.msg[i]);
	cfg_errors_free(&ce);
	if (!*cfg_ok)
		return k;
	/* the admin API's sockets are the configuration's */
	bool control = false, admin = false;
	for (size_t i = 0; i < rec->n_fds; i++) {
		const struct staterec_fd *f = &rec->fds[i];
		if (f->kind == STATEREC_FD_CONTROL) {
			control = true;
			if (strcmp(f->path, cfg->control_socket) != 0 && k < n) {
				snprintf(err, sizeof err, "the control socket passed is %s, the "
				    "configuration says %s", f->path, cfg->control_socket);
				errs[k++] = strdup(err);
			}
		} else if (f->kind == STATEREC_FD_ADMIN) {
			admin = true;
		}
	}
	if ((!control || admin != cfg->admin_enabled) && k < n)
		errs[k++] = strdup("the admin API's sockets passed are not the configuration's");
	return k;
}

int
upgrade_successor_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "successor", no_argument, NULL, 'S' },
		{ "ppid", required_argument, NULL, 'p' },
		{ 0, 0, 0, 0 },
	};
	pid_t ppid = 0;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'p')
			ppid = (pid_t)strtol(optarg, NULL, 10);
		else if (c != 'S')
			break;
	}
	/* dies with the running ferryd until it commits */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (ppid <= 0 || getppid() != ppid || fcntl(UPG_FD, F_GETFD) == -1) {
		fprintf(stderr, "ferryd --successor is started by a running ferryd (ferryctl "
		    "upgrade, SIGUSR2)\n");
		return 2;
	}
	fcntl(UPG_FD, F_SETFD, FD_CLOEXEC);
	signal(SIGPIPE, SIG_IGN);
	log_init("supervisor", NULL, LOG_INFO, false);
	if (sodium_init() < 0)
		return 1;
	uint8_t *buf = sodium_malloc(UPG_BUF);
	if (!buf)
		return 1;
	upgrade_io_fault_stop("hello");

	/* the handshake: refused before anything moves */
	struct ipc_msg msg;
	char err[512] = "";
	int rc = upg_recv_sync(UPG_FD, buf, &msg, clock_mono_ms() + UPG_OFFER_WAIT_MS, err,
	    sizeof err);
	if (rc != 1 || msg.hdr.type != UPG_OFFER) {
		if (rc == 1)
			ipc_close_fds(&msg);
		log_error("upgrade: no offer from the running ferryd", "error=\"%s\"",
		    rc == 1 ? "another message came first" : err);
		sodium_free(buf);
		return 1;
	}
	struct upg_offer o;
	size_t olen = msg.hdr.len;
	memset(&o, 0, sizeof o);
	memcpy(&o, msg.payload, olen < sizeof o ? olen : sizeof o);
	o.version[sizeof o.version - 1] = 0;
	o.build_id[sizeof o.build_id - 1] = 0;
	if (olen == sizeof o)
		log_init("supervisor", NULL, o.log_level <= LOG_ERROR ? (enum log_level)o.log_level :
		    LOG_INFO, o.log_json != 0);
	uint32_t rmin = STATEREC_MIN, rmax = STATEREC_MAX;
	uint32_t cmin = IPC_CONN_RECORD_VERSION, cmax = IPC_CONN_RECORD_VERSION;
	upg_fault_range("record-versions", &rmin, &rmax);
	upg_fault_range("conn-records", &cmin, &cmax);
	struct upg_hello h;
	memset(&h, 0, sizeof h);
	upg_compat(&o, olen, rmin, rmax, cmin, cmax, &h);
	h.pid = (int32_t)getpid();
	snprintf(h.version, sizeof h.version, "%s", buildinfo_version());
	snprintf(h.build_id, sizeof h.build_id, "%s", buildinfo_id());
	if (ipc_send(UPG_FD, (enum ipc_type)UPG_HELLO, 0, &h, sizeof h, NULL, 0) == -1 || !h.accept) {
		if (!h.accept)
			log_error("upgrade refused: this ferryd cannot take over", "reason=\"%s\" "
			    "from_version=%s", h.reason, o.version);
		sodium_free(buf);
		return h.accept ? 1 : WORKER_EXIT_CONFIG;
	}
	log_info("upgrade: taking over from the running ferryd", "from_pid=%d from_version=%s "
	    "from_build=%s version=%s build=%s record=%u", (int)o.pid, o.version, o.build_id,
	    buildinfo_version(), buildinfo_id(), h.record);
	upgrade_io_fault_stop("receiving");

	struct upg_received r;
	memset(&r, 0, sizeof r);
	uint64_t deadline = clock_mono_ms() + (o.init_timeout_ms ? o.init_timeout_ms : 10000);
	if (upg_receive(UPG_FD, buf, h.record, deadline, &r, err, sizeof err) == -1) {
		char *e[1] = { err };
		upg_refuse(UPG_FD, UPG_INVALID, e, 1);
		upg_received_free(&r);
		sodium_free(buf);
		return 1;
	}
	struct cfg cfg;
	memset(&cfg, 0, sizeof cfg);
	char *errs[32];
	bool cfg_ok;
	size_t ne = upg_validate(&r, &cfg, &cfg_ok, errs, 32);
	if (ne) {
		upg_refuse(UPG_FD, UPG_INVALID, errs, ne);
		for (size_t i = 0; i < ne; i++)
			free(errs[i]);
		cfg_free(&cfg);
		upg_received_free(&r);
		sodium_free(buf);
		return 1;
	}
	ipc_send(UPG_FD, (enum ipc_type)UPG_VALID, 0, NULL, 0, NULL, 0);
	upgrade_io_fault_stop("preparing");

	/* ferryd, around the predecessor's state */
	struct sup_io *io = sup_io_new();
	if (!io) {
		cfg_free(&cfg);
		upg_received_free(&r);
		sodium_free(buf);
		return 1;
	}
	struct sup *s = io->s;
	if (sup_io_init(io, &cfg, r.rec.config_path, r.rec.config_text, r.rec.config_len,
	    "/proc/self/exe", r.rec.notify_socket) == -1) {
		upg_received_free(&r);
		sodium_free(buf);
		return sup_io_finish(io, 1);
	}
	io->notified_ready = true;    /* READY=1 once we are the main process */
	ev_timer_stop(io->loop, &io->tickets); /* ... and the rotation then */
	struct upg_io *u = upgrade_io_get(io);
	if (!u) {
		upg_received_free(&r);
		sodium_free(buf);
		return sup_io_finish(io, 1);
	}
	sodium_free(u->buf);
	u->buf = buf;
	upgrade_io_watch(u, UPG_FD);
	u->rotation_next_mono = r.rec.ticket_rotation_next_mono;
	for (size_t i = 0; i < r.nfds; i++) {
		if (r.rec.fds[i].kind == STATEREC_FD_CONTROL) {
			u->inherit.control_fd = r.fds[i];
			u->inherit.control_dev = (dev_t)r.rec.fds[i].dev;
			u->inherit.control_ino = (ino_t)r.rec.fds[i].ino;
			r.fds[i] = -1;
		} else if (r.rec.fds[i].kind == STATEREC_FD_ADMIN) {
			u->inherit.tcp_fd = r.fds[i];
			r.fds[i] = -1;
		}
	}
	log_info("ferryd starting (upgrade)", "version=%s build=%s clusters=%zu config=%s "
	    "config_version=%s", buildinfo_version(), buildinfo_id(), s->cfg.n_clusters,
	    s->config_path, s->config_version);
	sup_io_clock(s);
	if (sup_upgrade_restore(s, &r.rec, r.fds, r.nfds, r.secrets, r.n_secrets, err,
	    sizeof err) == -1) {
		char *e[1] = { err };
		upg_refuse(UPG_FD, UPG_PREPARE_FAILED, e, 1);
		upg_received_free(&r);
		return sup_io_finish(io, 1);
	}
	upg_received_free(&r);  /* wipes the keys; closes nothing it took */
	return sup_io_run(io);
}
