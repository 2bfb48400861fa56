/*
 * upgproto — the upgrade channel between a running ferryd (the
 * *predecessor*) and the ferryd it starts from the file it was started from
 * (the *successor*) to take over (docs/design.md §11): message types, their
 * size rules, the frozen handshake structs, and the version rules, pure.
 *
 * Transport: the envelope and fd passing of ipc.h over a SOCK_SEQPACKET
 * socketpair (the successor's end on its fd 3), framed by ipc_recv_frame();
 * this module's upg_decode() checks type and size. Types are their own
 * space (not enum ipc_type): a worker never sees them.
 *
 * Versions. The handshake (OFFER, HELLO) is frozen per UPG_HS_VERSION: a
 * change is a new handshake version, the old one still spoken. Everything
 * after it is negotiated in it, before any socket, state or secret moves:
 * the state record version (supervisor/staterec.h; the newest both sides
 * can, each release reading and writing its own version and the previous
 * one), and the connection record version (ipc.h) that the successor's
 * workers adopt — when the predecessor's workers write another one, their
 * connections close at request boundaries instead of moving.
 */
#ifndef FERRY_SUPERVISOR_UPGPROTO_H
#define FERRY_SUPERVISOR_UPGPROTO_H

#include <stddef.h>
#include <stdint.h>

#include "common/ipc.h"
#include "common/tlskeys.h"

#define UPG_MAGIC "FERRYUPG"    /* 8 bytes, no NUL */
#define UPG_HS_VERSION 1
#define UPG_FD 3                /* the successor's end of the channel */
#define UPG_NAME_MAX 64

enum upg_type {
	UPG_NONE = 0,
	UPG_OFFER,          /* P->S struct upg_offer */
	UPG_HELLO,          /* S->P struct upg_hello */
	UPG_STATE,          /* P->S struct upg_state_hdr; fd: sealed memfd, the record */
	UPG_FDS,            /* P->S struct ipc_listeners {count, first, total}; fds */
	UPG_SECRET,         /* P->S struct upg_secret (one TLS cluster's ticket keys) */
	UPG_SENT,           /* P->S empty: record, fds and secrets are all sent */
	UPG_VALID,          /* S->P empty: the record and configuration are valid */
	UPG_INVALID,        /* S->P JSON {"errors":[...]} */
	UPG_PREPARED,       /* S->P JSON {"clusters":[{"name","generation"}]}: all held */
	UPG_PREPARE_FAILED, /* S->P JSON {"errors":[...]} */
	UPG_COUNTERS,       /* P->S JSON: one cluster's counters by name (staterec.h) */
	UPG_COMMIT,         /* P->S JSON {"hupPending"} */
	UPG_COMMITTED,      /* S->P empty: accepting; the commit point */
	UPG_MAIN,           /* P->S empty: systemd was told MAINPID=<successor> */
	UPG_CONN,           /* P->S struct upg_conn + the worker's record verbatim; fds */
	UPG_CONN_DONE,      /* S->P struct ipc_conn_ack {relay id, enum ipc_adopted} */
	UPG_STOP,           /* S->P empty: the successor stops; end the tail now */
	UPG_BYE,            /* P->S JSON {"handedOver","closed","forced"}: tail done */
	UPG_TYPE_COUNT,
};

const char *upg_type_str(uint32_t t);

/* Frozen for UPG_HS_VERSION 1. Strings are NUL-terminated. */
struct upg_offer {
	char magic[8];
	uint32_t hs_version;
	uint32_t record_min, record_max; /* state record versions P can write */
	uint32_t conn_record;            /* IPC_CONN_RECORD_VERSION of P's workers */
	uint32_t ipc_version;            /* IPC_PROTOCOL_VERSION of P (informational) */
	int32_t pid;
	uint64_t init_timeout_ms;        /* S must answer each phase within this */
	uint32_t log_level, log_json;    /* so S logs like P from its first line */
	char version[64];
	char build_id[48];
};

struct upg_hello {
	char magic[8];
	uint32_t hs_version;
	uint32_t accept;                 /* 1, or 0 with reason */
	uint32_t record;                 /* the record version P is to write */
	uint32_t conn_min, conn_max;     /* connection records S's workers adopt */
	int32_t pid;
	char version[64];
	char build_id[48];
	char reason[256];
};

struct upg_state_hdr {
	uint32_t record;                 /* version of the record in the memfd */
	uint32_t pad;
	uint64_t size;                   /* its bytes */
};

struct upg_secret {
	char cluster[UPG_NAME_MAX];
	struct tlskeys keys;
};

struct upg_conn {
	uint64_t id;                     /* P's relay id, echoed in UPG_CONN_DONE */
	char cluster[UPG_NAME_MAX];
	/* then struct ipc_conn_record + pending bytes, as the old worker sent */
};

#define UPG_JSON_MAX (64u * 1024u)

/* Type and size of a framed message (ipc_recv_frame): 0, or -1 with a
 * reason. Pure. */
int upg_decode(const struct ipc_msg *msg, char *err, size_t errlen);

/* The successor's side of the handshake: can it take over from the
 * predecessor that sent o, reading state records [read_min, read_max] and
 * adopting connection records [conn_min, conn_max]? Fills h (accept,
 * chosen record, or reason) but not its identity (version, build id, pid).
 * Returns h->accept. Pure. */
int upg_compat(const struct upg_offer *o, size_t olen, uint32_t read_min, uint32_t read_max,
	       uint32_t conn_min, uint32_t conn_max, struct upg_hello *h);

/* The predecessor's reading of a HELLO: 0 accepted (record version in
 * [write_min, write_max]), or -1 with the reason (the successor's own, or a
 * malformed answer). Pure. */
int upg_hello_check(const struct upg_hello *h, size_t hlen, uint32_t write_min,
		    uint32_t write_max, char *err, size_t errlen);

/* Will connections written as record version v move to a successor that
 * announced [conn_min, conn_max]? Pure. */
int upg_conn_movable(const struct upg_hello *h, uint32_t v);

#endif
