/*
 * test_upgrade — the upgrade's two machines (supervisor/upgrade.h), pair by
 * pair, and the channel's version rules and size checks
 * (supervisor/upgproto.h).
 *
 * Properties of the tables: every event from outside (a failure, a
 * deadline, the other side gone, a stop) is allowed in every state it can
 * arrive in; before the commit point every failure rolls back (and only
 * then: nothing after the commit rolls back); the successor never accepts
 * before COMMIT and gives up (ABORT) on anything before it; terminal
 * states do nothing.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "common/ipc.h"
#include "supervisor/upgproto.h"
#include "supervisor/upgrade.h"

/* ---- predecessor ----------------------------------------------------------- */

static const enum upg_oevent o_outside[] = { UPG_OE_FAILED, UPG_OE_HURRY };

Test(upgrade, out_every_pair)
{
	for (int s = 0; s < UPG_O_COUNT; s++) {
		cr_assert_str_neq(upg_ostate_str(s), "unknown");
		for (int e = 0; e < UPG_OE_COUNT; e++) {
			struct upg_ostep st = upg_out_step(s, e);
			cr_assert_str_neq(upg_oevent_str(e), "unknown");
			if (!st.allowed) {
				cr_assert_eq(st.next, (enum upg_ostate)s);
				cr_assert_eq(st.actions, 0);
				continue;
			}
			cr_assert_lt(st.next, UPG_O_COUNT);
			for (unsigned b = 0; b < UPG_OA_COUNT; b++)
				if (st.actions & (1u << b))
					cr_assert_str_neq(upg_oaction_str(1u << b), "unknown");
			cr_assert_eq(st.actions >> UPG_OA_COUNT, 0);
			/* a rollback ends rolled back, and only a state before
			 * the commit point rolls back */
			if (st.actions & (UPG_OA_ROLLBACK | UPG_OA_REJECT)) {
				cr_assert_eq(st.next, UPG_O_ROLLED_BACK, "%s/%s", upg_ostate_str(s),
				    upg_oevent_str(e));
				cr_assert(upg_ostate_precommit(s));
			}
			if (st.next == UPG_O_ROLLED_BACK && s != UPG_O_ROLLED_BACK)
				cr_assert(st.actions & UPG_OA_ROLLBACK);
		}
		/* failures and stops can come in any state */
		for (size_t i = 0; i < sizeof o_outside / sizeof o_outside[0]; i++)
			cr_assert(upg_out_step(s, o_outside[i]).allowed, "%s/%s", upg_ostate_str(s),
			    upg_oevent_str(o_outside[i]));
	}
	cr_assert_str_eq(upg_ostate_str(UPG_O_COUNT), "unknown");
	cr_assert_not(upg_out_step(UPG_O_COUNT, 0).allowed);
	cr_assert_not(upg_out_step(0, UPG_OE_COUNT).allowed);
}

Test(upgrade, out_precommit_failures_roll_back)
{
	const enum upg_ostate pre[] = { UPG_O_SPAWNING, UPG_O_TRANSFER, UPG_O_PREPARING,
		UPG_O_COMMITTING };
	for (size_t i = 0; i < 4; i++) {
		cr_assert(upg_ostate_precommit(pre[i]));
		struct upg_ostep st = upg_out_step(pre[i], UPG_OE_FAILED);
		cr_assert_eq(st.next, UPG_O_ROLLED_BACK);
		cr_assert(st.actions & UPG_OA_ROLLBACK);
		cr_assert_not(st.actions & UPG_OA_REJECT);
		st = upg_out_step(pre[i], UPG_OE_DEADLINE);
		cr_assert_eq(st.next, UPG_O_ROLLED_BACK);
		st = upg_out_step(pre[i], UPG_OE_REFUSED);
		cr_assert(st.actions & UPG_OA_REJECT);
		/* a stop during the upgrade: roll back, then stop as always */
		cr_assert(upg_out_step(pre[i], UPG_OE_HURRY).actions & UPG_OA_ROLLBACK);
	}
	/* after the commit nothing rolls back */
	for (int e = 0; e < UPG_OE_COUNT; e++) {
		struct upg_ostep st = upg_out_step(UPG_O_HANDING_OVER, e);
		cr_assert_not(st.actions & (UPG_OA_ROLLBACK | UPG_OA_REJECT));
		cr_assert_neq(st.next, UPG_O_ROLLED_BACK);
	}
	cr_assert_not(upg_ostate_precommit(UPG_O_HANDING_OVER));
	cr_assert_not(upg_ostate_precommit(UPG_O_IDLE));
}

Test(upgrade, out_happy_path)
{
	const enum upg_oevent path[] = { UPG_OE_START, UPG_OE_HELLO, UPG_OE_VALID,
		UPG_OE_PREPARED, UPG_OE_COMMITTED, UPG_OE_TAIL_DONE };
	const enum upg_ostate want[] = { UPG_O_SPAWNING, UPG_O_TRANSFER, UPG_O_PREPARING,
		UPG_O_COMMITTING, UPG_O_HANDING_OVER, UPG_O_DONE };
	const unsigned acts[] = { UPG_OA_SPAWN, UPG_OA_SEND_STATE, UPG_OA_ARM_PREPARE,
		UPG_OA_SEND_COMMIT, UPG_OA_COMMIT, UPG_OA_BYE };
	enum upg_ostate s = UPG_O_IDLE;
	for (size_t i = 0; i < sizeof path / sizeof path[0]; i++) {
		struct upg_ostep st = upg_out_step(s, path[i]);
		cr_assert(st.allowed);
		cr_assert_eq(st.next, want[i]);
		cr_assert(st.actions & acts[i]);
		s = st.next;
	}
	/* events the machine makes itself are not allowed out of turn */
	cr_assert_not(upg_out_step(UPG_O_IDLE, UPG_OE_COMMITTED).allowed);
	cr_assert_not(upg_out_step(UPG_O_SPAWNING, UPG_OE_COMMITTED).allowed);
	cr_assert_not(upg_out_step(UPG_O_HANDING_OVER, UPG_OE_START).allowed);
	/* the other side gone after the commit: connections in transit end unknown */
	cr_assert(upg_out_step(UPG_O_HANDING_OVER, UPG_OE_PEER_GONE).actions & UPG_OA_PEER_GONE);
}

/* ---- successor -------------------------------------------------------------- */

Test(upgrade, in_every_pair)
{
	for (int s = 0; s < UPG_I_COUNT; s++) {
		cr_assert_str_neq(upg_istate_str(s), "unknown");
		for (int e = 0; e < UPG_IE_COUNT; e++) {
			struct upg_istep st = upg_in_step(s, e);
			cr_assert_str_neq(upg_ievent_str(e), "unknown");
			if (!st.allowed) {
				cr_assert_eq(st.next, (enum upg_istate)s);
				continue;
			}
			for (unsigned b = 0; b < UPG_IA_COUNT; b++)
				if (st.actions & (1u << b))
					cr_assert_str_neq(upg_iaction_str(1u << b), "unknown");
			cr_assert_eq(st.actions >> UPG_IA_COUNT, 0);
			/* workers accept only at COMMIT */
			if (st.actions & UPG_IA_COMMIT)
				cr_assert(s == UPG_I_PREPARED && e == UPG_IE_COMMIT);
			/* giving up happens only before the commit */
			if (st.actions & UPG_IA_ABORT)
				cr_assert_lt(s, UPG_I_COMMITTED);
			if (st.next == UPG_I_ABORTED && s != UPG_I_ABORTED)
				cr_assert(st.actions & (UPG_IA_ABORT | UPG_IA_REFUSE | UPG_IA_INVALID));
		}
		/* the other side gone, a deadline, a stop: in every state */
		cr_assert(upg_in_step(s, UPG_IE_PEER_GONE).allowed, "%s", upg_istate_str(s));
		cr_assert(upg_in_step(s, UPG_IE_DEADLINE).allowed, "%s", upg_istate_str(s));
		cr_assert(upg_in_step(s, UPG_IE_STOP).allowed, "%s", upg_istate_str(s));
	}
	/* before the commit, any of them aborts */
	for (int s = UPG_I_HELLO; s < UPG_I_COMMITTED; s++) {
		cr_assert_eq(upg_in_step(s, UPG_IE_PEER_GONE).next, UPG_I_ABORTED);
		cr_assert_eq(upg_in_step(s, UPG_IE_DEADLINE).next, UPG_I_ABORTED);
		cr_assert_eq(upg_in_step(s, UPG_IE_STOP).next, UPG_I_ABORTED);
	}
	/* after it, the predecessor gone means serving alone, with its counters */
	cr_assert_eq(upg_in_step(UPG_I_TAIL, UPG_IE_PEER_GONE).next, UPG_I_SERVING);
	cr_assert(upg_in_step(UPG_I_TAIL, UPG_IE_PEER_GONE).actions & UPG_IA_FOLD);
	cr_assert(upg_in_step(UPG_I_COMMITTED, UPG_IE_PEER_GONE).actions & UPG_IA_FOLD);
	cr_assert(upg_in_step(UPG_I_TAIL, UPG_IE_STOP).actions & UPG_IA_SEND_STOP);
	cr_assert_str_eq(upg_iaction_str(3), "unknown");
}

Test(upgrade, in_happy_path)
{
	const enum upg_ievent path[] = { UPG_IE_OFFER_OK, UPG_IE_RECEIVED, UPG_IE_ALL_HELD,
		UPG_IE_COUNTERS, UPG_IE_COMMIT, UPG_IE_MAIN, UPG_IE_COUNTERS, UPG_IE_BYE };
	enum upg_istate s = UPG_I_HELLO;
	for (size_t i = 0; i < sizeof path / sizeof path[0]; i++) {
		struct upg_istep st = upg_in_step(s, path[i]);
		cr_assert(st.allowed, "%s/%s", upg_istate_str(s), upg_ievent_str(path[i]));
		s = st.next;
	}
	cr_assert_eq(s, UPG_I_SERVING);
	cr_assert_eq(upg_in_step(UPG_I_HELLO, UPG_IE_OFFER_BAD).actions, UPG_IA_REFUSE);
	cr_assert_not(upg_in_step(UPG_I_PREPARING, UPG_IE_COMMIT).allowed);
}

/* ---- the channel's versions and sizes -------------------------------------------- */

static struct upg_offer
offer(uint32_t rmin, uint32_t rmax)
{
	struct upg_offer o;
	memset(&o, 0, sizeof o);
	memcpy(o.magic, UPG_MAGIC, 8);
	o.hs_version = UPG_HS_VERSION;
	o.record_min = rmin;
	o.record_max = rmax;
	return o;
}

Test(upgrade, compat)
{
	struct upg_hello h;
	struct upg_offer o = offer(1, 3);
	/* the newest both sides can */
	cr_assert(upg_compat(&o, sizeof o, 2, 5, 1, 1, &h));
	cr_assert_eq(h.record, 3);
	cr_assert_eq(h.conn_min, 1);
	cr_assert_eq(upg_hello_check(&h, sizeof h, 1, 3, (char[64]){ 0 }, 64), 0);
	/* a downgrade by one: the older reads the previous version */
	o = offer(1, 2);
	cr_assert(upg_compat(&o, sizeof o, 1, 1, 1, 1, &h));
	cr_assert_eq(h.record, 1);
	/* no common version: refused with both ranges in the reason */
	o = offer(1, 1);
	cr_assert_not(upg_compat(&o, sizeof o, 5, 6, 1, 1, &h));
	cr_assert(strstr(h.reason, "state record versions 1..1 offered, this ferryd reads 5..6"),
	    "%s", h.reason);
	char err[400];
	cr_assert_eq(upg_hello_check(&h, sizeof h, 1, 1, err, sizeof err), -1);
	cr_assert(strstr(err, "refused: state record versions"), "%s", err);
	/* another handshake version, or not a handshake at all */
	o = offer(1, 1);
	o.hs_version = 2;
	cr_assert_not(upg_compat(&o, sizeof o, 1, 1, 1, 1, &h));
	cr_assert(strstr(h.reason, "handshake version 2"), "%s", h.reason);
	o = offer(1, 1);
	cr_assert_not(upg_compat(&o, sizeof o + 8, 1, 1, 1, 1, &h));
	memcpy(o.magic, "NOTFERRY", 8);
	cr_assert_not(upg_compat(&o, sizeof o, 1, 1, 1, 1, &h));
	/* an answer naming a version it was not offered */
	o = offer(1, 1);
	cr_assert(upg_compat(&o, sizeof o, 1, 1, 1, 1, &h));
	h.record = 9;
	cr_assert_eq(upg_hello_check(&h, sizeof h, 1, 1, err, sizeof err), -1);
	cr_assert_eq(upg_hello_check(&h, 20, 1, 1, err, sizeof err), -1);
	/* connections move only when the successor's workers adopt the record */
	h.conn_min = 1;
	h.conn_max = 2;
	cr_assert(upg_conn_movable(&h, 2));
	cr_assert_not(upg_conn_movable(&h, 3));
}

static int
decode(uint32_t type, uint32_t len, size_t nfds)
{
	struct ipc_msg m;
	memset(&m, 0, sizeof m);
	m.hdr.type = type;
	m.hdr.len = len;
	m.nfds = nfds;
	char err[128];
	return upg_decode(&m, err, sizeof err);
}

Test(upgrade, decode_sizes)
{
	cr_assert_eq(decode(UPG_OFFER, sizeof(struct upg_offer), 0), 0);
	cr_assert_eq(decode(UPG_OFFER, 8, 0), -1);
	cr_assert_eq(decode(UPG_OFFER, sizeof(struct upg_offer), 1), -1, "no fds with an offer");
	cr_assert_eq(decode(UPG_STATE, sizeof(struct upg_state_hdr), 1), 0);
	cr_assert_eq(decode(UPG_STATE, sizeof(struct upg_state_hdr), 0), -1);
	cr_assert_eq(decode(UPG_FDS, sizeof(struct ipc_listeners), 64), 0);
	cr_assert_eq(decode(UPG_FDS, sizeof(struct ipc_listeners), 0), -1);
	cr_assert_eq(decode(UPG_SECRET, sizeof(struct upg_secret), 0), 0);
	cr_assert_eq(decode(UPG_SECRET, sizeof(struct upg_secret) - 1, 0), -1);
	size_t conn = sizeof(struct upg_conn) + sizeof(struct ipc_conn_record);
	cr_assert_eq(decode(UPG_CONN, conn, 1), 0);
	cr_assert_eq(decode(UPG_CONN, conn, 2), 0);
	cr_assert_eq(decode(UPG_CONN, conn, 3), -1);
	/* the largest record (version 2: with its client part) fits, one byte more not */
	cr_assert_eq(decode(UPG_CONN, sizeof(struct upg_conn) + IPC_CONN_RECORD_MAX, 1), 0);
	cr_assert_eq(decode(UPG_CONN, sizeof(struct upg_conn) + IPC_CONN_RECORD_MAX + 1, 1), -1);
	cr_assert_eq(decode(UPG_CONN_DONE, sizeof(struct ipc_conn_ack), 0), 0);
	cr_assert_eq(decode(UPG_COMMIT, 20, 0), 0);
	cr_assert_eq(decode(UPG_COMMIT, UPG_JSON_MAX + 1, 0), -1);
	cr_assert_eq(decode(UPG_MAIN, 0, 0), 0);
	cr_assert_eq(decode(UPG_MAIN, 1, 0), -1);
	cr_assert_eq(decode(UPG_TYPE_COUNT, 0, 0), -1);
	cr_assert_eq(decode(0, 0, 0), -1);
	cr_assert_str_eq(upg_type_str(UPG_BYE), "bye");
	cr_assert_str_eq(upg_type_str(999), "unknown");
}
