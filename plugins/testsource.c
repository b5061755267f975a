// Harrier's own plugin for Falco's plugin API (see README.md): a small event source with
// fields, and the ways a plugin can misbehave, on request.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RC_SUCCESS 0
#define RC_FAILURE 1
#define RC_TIMEOUT (-1)
#define RC_EOF 2
#define FT_U64 8
#define FT_STR 9
#define FT_BOOL 25
#define EVENT_TYPE 322
#define HEADER 26
#define PAYLOAD_AT 38
#define MAX_PAYLOAD 96
#define BATCH 64

#pragma pack(push, 1)
struct event {
	uint64_t ts, tid;
	uint32_t len;
	uint16_t type;
	uint32_t nparams;
};
#pragma pack(pop)

struct event_input {
	const struct event *evt;
	uint64_t num;
	const char *source;
};

struct field {
	const void *res;
	uint64_t res_len;
	uint32_t id;
	const char *name, *arg_key;
	uint64_t arg_index;
	uint32_t arg_present, ftype, flist;
};

struct extract_input {
	void *owner;
	const char *(*owner_error)(void *);
	uint32_t num_fields;
	struct field *fields;
};

struct state {
	char error[256];
	// Values handed back by extract_fields: valid until the next call.
	uint64_t u64;
	uint32_t boolean;
	const char *strs[2];
	char str[MAX_PAYLOAD];
	int malformed;
	uint64_t sent;
	char info[64];
};

struct instance {
	uint64_t count, next;
	int hang, stream;
	unsigned char buf[BATCH][PAYLOAD_AT + MAX_PAYLOAD];
	struct event *evts[BATCH];
};

const char *plugin_get_required_api_version(void) { return "3.0.0"; }
const char *plugin_get_name(void) { return "testsource"; }
const char *plugin_get_description(void) { return "Harrier's test event source"; }
const char *plugin_get_contact(void) { return "the Harrier project"; }
const char *plugin_get_version(void) { return "0.1.0"; }
uint32_t plugin_get_id(void) { return 999; }
const char *plugin_get_event_source(void) { return "harrier_test"; }
const char *plugin_get_extract_event_sources(void) { return "[\"harrier_test\"]"; }

const char *plugin_get_fields(void)
{
	return "["
	       "{\"type\":\"uint64\",\"name\":\"test.n\",\"desc\":\"The event's number, from 1\"},"
	       "{\"type\":\"string\",\"name\":\"test.msg\",\"desc\":\"The event's message\"},"
	       "{\"type\":\"string\",\"name\":\"test.parity\",\"isList\":true,\"desc\":\"even or odd, and all\"},"
	       "{\"type\":\"string\",\"name\":\"test.arg\",\"arg\":{\"isRequired\":true,\"isKey\":true},\"desc\":\"The key, echoed\"},"
	       "{\"type\":\"bool\",\"name\":\"test.big\",\"desc\":\"Whether the number is over 5\"}"
	       "]";
}

void *plugin_init(const void *input, int32_t *rc)
{
	const char *config = *(const char *const *)input;
	if (config && strstr(config, "fail_init")) {
		*rc = RC_FAILURE;
		return NULL;
	}
	struct state *s = calloc(1, sizeof(*s));
	*rc = s ? RC_SUCCESS : RC_FAILURE;
	return s;
}

void plugin_destroy(void *s) { free(s); }
const char *plugin_get_last_error(void *s) { return s ? ((struct state *)s)->error : "asked to fail at init"; }

void *plugin_open(void *sp, const char *params, int32_t *rc)
{
	struct state *s = sp;
	struct instance *in = calloc(1, sizeof(*in));
	if (!in) {
		*rc = RC_FAILURE;
		return NULL;
	}
	const char *c = params ? strstr(params, "count=") : NULL;
	in->count = c ? strtoull(c + 6, NULL, 10) : 10;
	in->hang = params && strstr(params, "hang");
	in->stream = params && strstr(params, "stream");
	s->malformed = params && strstr(params, "malformed");
	for (int i = 0; i < BATCH; i++)
		in->evts[i] = (struct event *)in->buf[i];
	*rc = RC_SUCCESS;
	return in;
}

void plugin_close(void *s, void *in) { (void)s; free(in); }

const char *plugin_list_open_params(void *s, int32_t *rc)
{
	(void)s;
	*rc = RC_SUCCESS;
	return "[{\"value\":\"count=10\",\"desc\":\"ten events\"}]";
}

int32_t plugin_next_batch(void *sp, void *ip, uint32_t *n, struct event ***evts)
{
	struct state *s = sp;
	struct instance *in = ip;
	while (in->hang)
		pause();
	if (in->stream)
		usleep(10000);
	else if (in->next >= in->count)
		return RC_EOF;
	uint32_t k = 0;
	for (; k < (in->stream ? 1 : BATCH) && (in->stream || in->next < in->count); k++) {
		uint64_t num = ++in->next;
		struct event *e = in->evts[k];
		char *payload = (char *)e + PAYLOAD_AT;
		int len = snprintf(payload, MAX_PAYLOAD, "event %llu", (unsigned long long)num);
		e->ts = 1700000000000000000ull + num * 1000;
		e->tid = (uint64_t)-1;
		e->len = PAYLOAD_AT + len;
		e->type = EVENT_TYPE;
		e->nparams = 2;
		uint32_t lens[2] = {4, (uint32_t)len};
		uint32_t id = 999;
		memcpy((char *)e + HEADER, lens, 8);
		memcpy((char *)e + HEADER + 8, &id, 4);
	}
	s->sent += k;
	*n = k;
	*evts = in->evts;
	return RC_SUCCESS;
}

static uint64_t number_of(const struct event *e)
{
	const char *p = (const char *)e + PAYLOAD_AT;
	return strtoull(p + 6, NULL, 10);
}

const char *plugin_event_to_string(void *sp, const struct event_input *ev)
{
	struct state *s = sp;
	snprintf(s->info, sizeof(s->info), "n=%llu", (unsigned long long)number_of(ev->evt));
	return s->info;
}

int32_t plugin_extract_fields(void *sp, const struct event_input *ev, const struct extract_input *in)
{
	struct state *s = sp;
	for (uint32_t i = 0; i < in->num_fields; i++) {
		struct field *f = &in->fields[i];
		uint64_t n = number_of(ev->evt);
		f->res_len = 1;
		switch (f->id) {
		case 0:
			s->u64 = n;
			f->res = &s->u64;
			if (s->malformed)
				f->res_len = 1ull << 40;
			break;
		case 1:
			snprintf(s->str, sizeof(s->str), "%.*s", (int)(ev->evt->len - PAYLOAD_AT),
			         (const char *)ev->evt + PAYLOAD_AT);
			s->strs[0] = s->str;
			f->res = s->malformed ? NULL : s->strs;
			break;
		case 2:
			s->strs[0] = n % 2 ? "odd" : "even";
			s->strs[1] = "all";
			f->res = s->strs;
			f->res_len = 2;
			break;
		case 3:
			if (!f->arg_present) {
				snprintf(s->error, sizeof(s->error), "test.arg needs a key");
				return RC_FAILURE;
			}
			s->strs[0] = f->arg_key;
			f->res = s->strs;
			break;
		case 4:
			s->boolean = n > 5;
			f->res = &s->boolean;
			break;
		default:
			snprintf(s->error, sizeof(s->error), "no field %u", f->id);
			return RC_FAILURE;
		}
	}
	return RC_SUCCESS;
}

struct metric {
	const char *name;
	uint32_t type;
	uint64_t value;
	uint32_t value_type;
};

const struct metric *plugin_get_metrics(void *sp, uint32_t *n)
{
	static struct metric m;
	struct state *s = sp;
	m = (struct metric){"events_sent", 0, s->sent, 2};
	*n = 1;
	return &m;
}
