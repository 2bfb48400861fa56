/*
 * api_policy — prints ferry's Kafka API version policy as the codec holds
 * it, one JSON object per line for every API key the codec knows (0 to
 * KC_API_KEY_MAX_KNOWN) and one for the keys above it:
 *
 *   {"key": 0, "name": "Produce", "policy": "cap", "min": 0, "max": 13,
 *    "why": "...", "held": null, "flexible_from": 9}
 *
 * policy is "cap" (versions min..max let through), "refused" (dropped from
 * ApiVersions, requests refused) or "forward" (the broker's range as it
 * is); flexible_from is the first version the codec reads with the
 * flexible (KIP-482) header, -1 for none.  The real-Kafka suite compares it
 * with what a broker advertises and with the broker's message schemas.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "worker/kafka/apiversions.h"
#include "worker/kafka/codec.h"

#define FLEX_SCAN	64	/* versions scanned for the first flexible one */

static int
flexible_from(int16_t key)
{
	int16_t v;

	for (v = 0; v < FLEX_SCAN; v++)
		if (kc_is_flexible(key, v))
			return v;
	return -1;
}

static const struct kc_api_policy *
row_of(const struct kc_api_policy *p, size_t n, int16_t key)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i].key == key)
			return &p[i];
	return NULL;
}

static int
emit(json_t *o)
{
	char *s = json_dumps(o, JSON_COMPACT);
	int rc = s != NULL && puts(s) >= 0 ? 0 : -1;

	free(s);
	json_decref(o);
	return rc;
}

int
main(void)
{
	const struct kc_api_policy *p, *r;
	size_t n;
	int16_t key;
	json_t *o;

	p = kc_api_policy(&n);
	for (key = 0; key <= KC_API_KEY_MAX_KNOWN; key++) {
		r = row_of(p, n, key);
		o = json_pack("{s:i, s:s, s:i}", "key", key, "name", kc_api_name(key),
		    "flexible_from", flexible_from(key));
		if (o == NULL)
			return 1;
		if (r == NULL)
			json_object_set_new(o, "policy", json_string("forward"));
		else {
			json_object_set_new(o, "policy", json_string(r->kind == KC_POLICY_CAP ?
			    "cap" : "refused"));
			json_object_set_new(o, "why", json_string(r->why));
			json_object_set_new(o, "held", r->held != NULL ? json_string(r->held) :
			    json_null());
			if (r->kind == KC_POLICY_CAP) {
				json_object_set_new(o, "min", json_integer(r->min));
				json_object_set_new(o, "max", json_integer(r->max));
			}
		}
		if (emit(o) != 0)
			return 1;
	}
	o = json_pack("{s:i, s:s, s:s, s:n}", "key_from", KC_API_KEY_MAX_KNOWN + 1,
	    "policy", "refused", "name", "newer than the codec", "why");
	if (o == NULL || emit(o) != 0)
		return 1;
	return fflush(stdout) == 0 ? 0 : 1;
}
