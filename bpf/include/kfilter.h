/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernel-side filtering: events no consumer can use are not sent.
 *
 * `harrier run` derives, per syscall, the event-local conditions under which
 * some rule or the state tables can use an event (an open that succeeded,
 * with write flags, of a path under a prefix list; a socket of a family; a
 * connect of a TCP socket, or to a rule's name's address) and adds the user's
 * `kernel_drop` filters (process names, per syscall). What needs only the
 * return value and the process name is decided before the handler writes
 * anything (hr_kf_early: no clock read, no ring room, no copies); the path
 * and flag clauses run once the event is written, and a dropped event is
 * simply not published. Both count it as filtered. User space writes the
 * maps before attaching, and swaps them whole on SIGHUP.
 * Layouts are mirrored in crates/harrier-capture/src/kfilter.rs.
 */
#ifndef HARRIER_KFILTER_H
#define HARRIER_KFILTER_H

#include "guard.h"

#define HR_KF_CLAUSES	4
#define HR_KF_PATH	124	/* path bytes a prefix or exact name may have */

/* One way an event can be kept: every condition set here holds. */
struct hr_kf_clause {
	__u8 used;
	__u8 need_success;	/* ret >= 0 */
	__u8 path;		/* the path is in kf_paths under (nr, clause) */
	__u8 raw_dotdot;	/* the path as passed has ".." (hr_cpu's raw_dotdot) */
	__u8 arg_eq;		/* flags_off names a parameter: keep if it equals flags_mask */
	__u8 arg;		/* with arg_eq: that parameter is syscall argument `arg` */
	__u8 l4;		/* connect: the socket's protocol is this one (0: any) */
	__u8 peer_named;	/* connect: the peer is in kf_peers (a rule's fd.sip.name) */
	__u32 flags_off;	/* record offset of a u32 flags parameter, 0: none */
	__u32 flags_mask;	/* with flags_off: keep if flags & mask (or ==, arg_eq) */
};

/* Per syscall: keep if any used clause holds (no clause used: keep all),
 * unless the process name is dropped for this syscall. */
struct hr_kf {
	__u8 clauses;		/* some clause is used */
	__u8 comm_drop;		/* look (nr, comm) up in kf_comms */
	__u8 fail_drop;		/* every used clause needs success: a failed call is dropped early */
	__u8 untold;		/* close: dropped early if user space never had its fd (untold.h) */
	__u8 args_only;		/* every clause tests only success and arguments: judged early */
	__u8 pad[3];
	struct hr_kf_clause c[HR_KF_CLAUSES];
};

/* LPM key: syscall and clause, then the path. A prefix entry's length covers
 * its bytes; an exact name's covers its NUL too, which the event key has
 * right after the path, so "/etc/shadow" does not match "/etc/shadow-". */
struct hr_kf_path_key {
	__u32 prefixlen;
	__u16 nr;
	__u8 clause;
	__u8 path[HR_KF_PATH + 1];
};

struct hr_kf_comm_key {
	__u32 nr;
	char comm[16];
};

const volatile bool kf_enabled = 0;

#include "untold.h"
#include "kfdirs.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, HR_NR_SLOTS);
	__type(key, __u32);
	__type(value, struct hr_kf);
} kfilter SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 4096);
	__type(key, struct hr_kf_path_key);
	__type(value, __u8);
} kf_paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct hr_kf_comm_key);
	__type(value, __u8);
} kf_comms SEC(".maps");

/* The key being built, with room for the last word copied past its path. */
struct hr_kf_key_room {
	struct hr_kf_path_key k;
	__u8 slack[8];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hr_kf_key_room);
} kf_scratch SEC(".maps");

/* One bit per lead (the path's bytes 1 and 2, 0 past its end) that some
 * kf_paths entry can match (kfilter.rs, `leads`): a path whose bit is clear
 * matches none, and skips the key's copy and the trie's walk (~60 ns of a
 * discarded open here). Written before the entries, cleared after them. */
#define HR_KF_LEAD_WORDS 1024

struct hr_kf_leads {
	__u64 w[HR_KF_LEAD_WORDS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hr_kf_leads);
} kf_leads SEC(".maps");

/* The addresses of the names rules compare a server's address with
 * (fd.sip.name = x): IPv6, or IPv4 mapped (::ffff:a.b.c.d). User space
 * writes them after each of its lookups (harrier_rules::dns). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct in6_addr);
	__type(value, __u8);
} kf_peers SEC(".maps");

/* How many addresses kf_peers holds: with none (no rule's name resolved, as
 * off Kubernetes), a connect's peer needs no hash lookup. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} kf_peers_n SEC(".maps");

/* The event's path at record offset path_off (u16 length + bytes) as an LPM
 * key, or NULL: no path, or none an entry can match (its lead). */
static __always_inline struct hr_kf_path_key *hr_kf_path_key(struct hr_em *em, __u32 nr, __u32 path_off)
{
	__u32 zero = 0, n, len;
	struct hr_kf_key_room *room;
	struct hr_kf_leads *leads;
	struct hr_kf_path_key *k;
	__u32 lead;
	__u64 o = path_off;
	__u8 *at;

	/* No path, no lookup: the scratch's line stays out of the cache. */
	if (!path_off || !(room = bpf_map_lookup_elem(&kf_scratch, &zero)))
		return 0;
	k = &room->k;
	/* The record is map memory: plain loads, word by word (two helper
	 * calls fewer per open); the bytes past the path are not in the key's
	 * prefix. hr_var_begin's bound on o keeps the words in the record's room. */
	hr_clamp(o, HR_VAR_LIMIT);
	at = em->ev + o;
	len = *(__u16 *)at;
	if (len == HR_VAR_ABSENT)
		return 0;
	lead = (len > 1 ? (__u32)at[3] << 8 : 0) | (len > 2 ? at[4] : 0);
	leads = bpf_map_lookup_elem(&kf_leads, &zero);
	if (!leads || !((leads->w[(lead >> 6) & (HR_KF_LEAD_WORDS - 1)] >> (lead & 63)) & 1))
		return 0;
	n = len < HR_KF_PATH ? len : HR_KF_PATH;
#pragma unroll
	for (int i = 0; i < 16; i++) {
		if (i * 8 >= n)
			break;
		*(__u64 *)(k->path + i * 8) = *(__u64 *)(at + 2 + i * 8);
	}
	/* A path longer than any entry matches prefixes only. */
	if (len <= HR_KF_PATH)
		k->path[n & 127] = 0, n++;
	k->prefixlen = 8 * (3 + n);
	k->nr = nr;
	return k;
}

static __always_inline bool hr_kf_clause_holds(struct hr_em *em, const struct hr_kf_clause *cl,
					       struct hr_kf_path_key *k, __u32 i, const __u32 fixed)
{
	__u32 flags = 0;

	if (!cl->used)
		return false;
	if (cl->need_success && em->ret < 0)
		return false;
	if (cl->raw_dotdot && !em->cpu->raw_dotdot)
		return false;
	if (cl->flags_off) {
		/* A variable record is map memory: a plain load (a helper call fewer
		 * per open); a fixed one may be a ring buffer's, only its size long. */
		if (fixed)
			bpf_probe_read_kernel(&flags, 4, em->ev + (cl->flags_off & 255));
		else
			flags = *(__u32 *)(em->ev + (cl->flags_off & 255));
		if (cl->arg_eq ? flags != cl->flags_mask : !(flags & cl->flags_mask))
			return false;
	}
	/* A failed call resolved no path: only the rules can say, so keep it. */
	if (cl->path && em->ret >= 0) {
		if (!k)
			return false;
		k->clause = i;
		if (!bpf_map_lookup_elem(&kf_paths, k))
			return false;
	}
	return true;
}

/* True: no clause of kf holds, each judged from the return value and the
 * syscall's arguments alone (kf->args_only). */
static __always_inline bool hr_kf_args_unused(struct hr_kf *kf, struct task_struct *t, __s64 ret)
{
	struct pt_regs *regs = hr_regs_of(t);

	for (__u32 i = 0; i < HR_KF_CLAUSES; i++) {
		struct hr_kf_clause *cl = &kf->c[i];

		if (!cl->used || (cl->need_success && ret < 0))
			continue;
		if (cl->arg_eq && (__u32)hr_reg_arg(regs, cl->arg) != cl->flags_mask)
			continue;
		return false;
	}
	return true;
}

/* True: drop this event of syscall nr (by task t) before anything is
 * written: its process name is dropped, it failed and only successes are
 * kept, no clause holds of one judged by its arguments (socket's domain),
 * or it closed an fd user space was never told of. */
static __always_inline bool hr_kf_early(struct task_struct *t, __u32 nr, __s64 ret)
{
	struct hr_kf *kf;

	if (!kf_enabled || nr >= HR_NR_SLOTS || !(kf = bpf_map_lookup_elem(&kfilter, &nr)))
		return false;
	if (ret < 0 && kf->fail_drop)
		return true;
	if (kf->comm_drop) {
		struct hr_kf_comm_key ck = { .nr = nr };

		bpf_get_current_comm(ck.comm, sizeof(ck.comm));
		if (bpf_map_lookup_elem(&kf_comms, &ck))
			return true;
	}
	/* Only socket's clauses are judged by arguments, only close has the
	 * untold flag (kfilter.rs); nr is a constant here, so the other
	 * handlers carry neither's code for the verifier to walk. */
	if (nr == 41 && kf->args_only)
		return hr_kf_args_unused(kf, t, ret);
	return nr == 3 && kf->untold && ret == 0 && hr_untold_closed(t, hr_regs_of(t)->di);
}

/* True: no rule or state table can use this event of syscall nr (path_off:
 * its kernel-resolved path, 0 if it has none). Runs once it is written. */
static __always_inline bool hr_kf_unused(struct hr_em *em, __u32 nr, __u32 path_off, const __u32 fixed)
{
	struct hr_kf_path_key *k = 0;
	struct hr_kf *kf;
	bool any_path = false;

	if (!kf_enabled || !(kf = bpf_map_lookup_elem(&kfilter, &nr)))
		return false;
	if (!kf->clauses)
		return false;
	for (__u32 i = 0; i < HR_KF_CLAUSES; i++)
		any_path |= kf->c[i].path;
	if (any_path && em->ret >= 0)
		k = hr_kf_path_key(em, nr, path_off);
	for (__u32 i = 0; i < HR_KF_CLAUSES; i++)
		if (hr_kf_clause_holds(em, &kf->c[i], k, i, fixed))
			return false;
	return true;
}

/* True: do not send this event (fixed: a fixed-size record's size, 0:
 * variable). An event no rule can use cannot break an enforced rule either
 * (the filter is derived from every loaded rule): the guard runs only on
 * what is kept, so the opens no rule looks at cost it nothing. */
static __always_inline bool hr_kf_drop(struct hr_em *em, __u32 nr, __u32 path_off, const __u32 fixed)
{
	bool unused;

	hr_step(em->cpu, HR_STEP_FIELDS);
	/* Kept back already where the walk met a directory (kfdirs.h). */
	unused = em->kf_unused || hr_kf_unused(em, nr, path_off, fixed);
	if (!unused)
		hr_guard(em, nr, path_off, fixed);
	hr_step(em->cpu, HR_STEP_FILTER);
	return unused;
}

/* Instead of hr_submit*: the event stays unpublished (its ring room is
 * reused), counted as produced and filtered. */
static __always_inline int hr_discard(struct hr_em *em, const __u32 nr, const bool fixed)
{
	struct hr_cpu *c = em->cpu;

	hr_untold_kept_back(em->task, nr, em->ret);
	if (!fixed)
		c->stats.events++;
	c->stats.filtered++;
	if (fixed && shared_rings)
		bpf_ringbuf_discard(em->ev, BPF_RB_NO_WAKEUP);
	hr_step_end(c, HR_STEP_SUBMIT);
	return 0;
}

#endif
