/*
 * upgproto — the upgrade channel's messages and version rules; see
 * upgproto.h.
 */
#include "supervisor/upgproto.h"

#include <stdio.h>
#include <string.h>

static const char *const upg_names[UPG_TYPE_COUNT] = {
	[UPG_NONE] = "none", [UPG_OFFER] = "offer", [UPG_HELLO] = "hello",
	[UPG_STATE] = "state", [UPG_FDS] = "fds", [UPG_SECRET] = "secret",
	[UPG_SENT] = "sent", [UPG_VALID] = "valid", [UPG_INVALID] = "invalid",
	[UPG_PREPARED] = "prepared", [UPG_PREPARE_FAILED] = "prepare-failed",
	[UPG_COUNTERS] = "counters", [UPG_COMMIT] = "commit", [UPG_COMMITTED] = "committed",
	[UPG_MAIN] = "main", [UPG_CONN] = "conn", [UPG_CONN_DONE] = "conn-done",
	[UPG_STOP] = "stop", [UPG_BYE] = "bye",
};

const char *
upg_type_str(uint32_t t)
{
	return t < UPG_TYPE_COUNT ? upg_names[t] : "unknown";
}

/* Which messages may carry fds, and how many at most. */
static size_t
upg_max_fds(uint32_t t)
{
	switch (t) {
	case UPG_STATE:
		return 1;
	case UPG_FDS:
		return IPC_MAX_FDS;
	case UPG_CONN:
		return 2;
	default:
		return 0;
	}
}

int
upg_decode(const struct ipc_msg *msg, char *err, size_t errlen)
{
	uint32_t t = msg->hdr.type, len = msg->hdr.len;
	int ok;
	switch (t) {
	case UPG_OFFER:
		/* a newer handshake may be longer: refused by upg_compat, with
		 * a reason, not here */
		ok = len >= 12 && len <= 4096;
		break;
	case UPG_HELLO:
		ok = len >= 12 && len <= 4096;
		break;
	case UPG_STATE:
		ok = len == sizeof(struct upg_state_hdr) && msg->nfds == 1;
		break;
	case UPG_FDS:
		ok = len == sizeof(struct ipc_listeners) && msg->nfds >= 1;
		break;
	case UPG_SECRET:
		ok = len == sizeof(struct upg_secret);
		break;
	case UPG_CONN:
		ok = len >= sizeof(struct upg_conn) + sizeof(struct ipc_conn_record) &&
		     len <= sizeof(struct upg_conn) + IPC_CONN_RECORD_MAX && msg->nfds >= 1;
		break;
	case UPG_CONN_DONE:
		ok = len == sizeof(struct ipc_conn_ack);
		break;
	case UPG_INVALID:
	case UPG_PREPARED:
	case UPG_PREPARE_FAILED:
	case UPG_COUNTERS:
	case UPG_COMMIT:
	case UPG_BYE:
		ok = len >= 2 && len <= UPG_JSON_MAX;
		break;
	case UPG_SENT:
	case UPG_VALID:
	case UPG_COMMITTED:
	case UPG_MAIN:
	case UPG_STOP:
		ok = len == 0;
		break;
	default:
		snprintf(err, errlen, "upgrade channel: unknown message type %u", t);
		return -1;
	}
	if (ok && msg->nfds > upg_max_fds(t))
		ok = 0;
	if (!ok) {
		snprintf(err, errlen, "upgrade channel: %s: bad size %u with %zu descriptors",
		    upg_type_str(t), len, msg->nfds);
		return -1;
	}
	return 0;
}

int
upg_compat(const struct upg_offer *o, size_t olen, uint32_t read_min, uint32_t read_max,
	   uint32_t conn_min, uint32_t conn_max, struct upg_hello *h)
{
	memcpy(h->magic, UPG_MAGIC, sizeof h->magic);
	h->hs_version = UPG_HS_VERSION;
	h->accept = 0;
	h->record = 0;
	h->conn_min = conn_min;
	h->conn_max = conn_max;
	if (olen < 12 || memcmp(o->magic, UPG_MAGIC, sizeof o->magic) != 0) {
		snprintf(h->reason, sizeof h->reason, "the running ferryd did not offer an upgrade "
		    "handshake this ferryd knows");
		return 0;
	}
	if (o->hs_version != UPG_HS_VERSION || olen != sizeof *o) {
		snprintf(h->reason, sizeof h->reason, "upgrade handshake version %u (%zu bytes) "
		    "offered, this ferryd speaks version %u", o->hs_version, olen, UPG_HS_VERSION);
		return 0;
	}
	uint32_t lo = o->record_min > read_min ? o->record_min : read_min;
	uint32_t hi = o->record_max < read_max ? o->record_max : read_max;
	if (o->record_min > o->record_max || lo > hi) {
		snprintf(h->reason, sizeof h->reason, "state record versions %u..%u offered, this "
		    "ferryd reads %u..%u", o->record_min, o->record_max, read_min, read_max);
		return 0;
	}
	h->record = hi;
	h->accept = 1;
	h->reason[0] = 0;
	return 1;
}

int
upg_hello_check(const struct upg_hello *h, size_t hlen, uint32_t write_min, uint32_t write_max,
		char *err, size_t errlen)
{
	if (hlen < 12 || memcmp(h->magic, UPG_MAGIC, sizeof h->magic) != 0) {
		snprintf(err, errlen, "the new ferryd answered the upgrade offer with something "
		    "else");
		return -1;
	}
	if (h->hs_version != UPG_HS_VERSION || hlen != sizeof *h) {
		snprintf(err, errlen, "the new ferryd answered with upgrade handshake version %u "
		    "(%zu bytes), this ferryd speaks version %u", h->hs_version, hlen,
		    UPG_HS_VERSION);
		return -1;
	}
	if (!h->accept) {
		snprintf(err, errlen, "the new ferryd refused: %.*s", (int)sizeof h->reason - 1,
		    h->reason[sizeof h->reason - 1] == 0 ? h->reason : "(no reason)");
		return -1;
	}
	if (h->record < write_min || h->record > write_max) {
		snprintf(err, errlen, "the new ferryd chose state record version %u, this ferryd "
		    "writes %u..%u", h->record, write_min, write_max);
		return -1;
	}
	return 0;
}

int
upg_conn_movable(const struct upg_hello *h, uint32_t v)
{
	return h->conn_min <= v && v <= h->conn_max;
}
