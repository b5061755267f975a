/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The reader's directory cache (ringbuf and single-fragment modes): the
 * user-space cache that tells the kernel where to stop. An event whose
 * directory path the path cache (cache.h) could store also teaches it to the
 * reader (FW_PATH_TEACH: the path inline, with the directory's key and the
 * state it was valid in). The reader keeps it in a slot and writes
 * key → (state, slot, version) into `rdirs`. From then on, while the state
 * is the same, an event in that directory carries (slot, version) and the
 * leaf's name instead of the whole path: ~20 bytes instead of the path's
 * hundreds at depth 60, and no copy of the cached path in the kernel.
 *
 * Correctness is the path cache's: the same key, the same generation and
 * mount namespace checks, never while a rename or rmdir is in flight. The
 * version makes a reference to a slot the reader has since given to another
 * directory unresolvable (flagged), never wrong.
 */
#ifndef HARRIER_FSWATCH_DIRREFS_H
#define HARRIER_FSWATCH_DIRREFS_H

/* A path cache hit teaches the reader once in this many (cache.h). */
#define FW_TEACH_EVERY 64

_Static_assert(sizeof(struct fw_teach) == FW_TEACH, "FW_TEACH must match struct fw_teach");

/* Written by the reader only. BPF_F_NO_PREALLOC: a replaced element is freed
 * after an RCU grace period, so a lookup's value cannot turn into another
 * key's under it (preallocated hash elements are reused at once). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, 1);	/* user space sets it */
	__type(key, struct fw_rkey);
	__type(value, struct fw_rval);
} rdirs SEC(".maps");

static __always_inline void fw_rkey_of(struct fw_rkey *rk, const struct hr_dkey *k, const struct hr_dvalid *now)
{
	rk->mnt_uid = k->mnt_uid;
	rk->ino = k->ino;
	rk->dev = k->dev;
	rk->pad = 0;
	rk->root_uid = now->root_uid;
	rk->root_ino = now->root_ino;
}

/* The reader's entry for directory k if it holds its path as it is now
 * (`now`: hr_dvalid_now's generation, namespace counter and root). */
static __always_inline struct fw_rval *fw_rdir(const struct hr_dkey *k, const struct hr_dvalid *now)
{
	struct fw_rkey rk;
	struct fw_rval *v;

	if (!rcache)
		return 0;
	fw_rkey_of(&rk, k, now);
	v = bpf_map_lookup_elem(&rdirs, &rk);
	if (!v || v->gen != now->gen || v->ns_event != now->ns_event)
		return 0;
	return v;
}

/* Whether the reader holds path b's directory (key k) as it is now; if so
 * the plan refers to it and *watched is its verdict. */
static __always_inline bool fw_dref_hit(struct fw_cpu *c, __u32 b, const struct hr_dkey *k,
					const struct hr_dvalid *now, __u64 *watched)
{
	struct fw_rval *v = fw_rdir(k, now);

	if (!v)
		return false;
	b &= 1;
	c->plan.how[b] = FW_HOW_DREF;
	c->plan.dref[b][0] = v->slot;
	c->plan.dref[b][1] = v->ver;
	*watched = v->watched;
	c->stats.dir_refs++;
	return true;
}

/* Path b's first dir_len bytes are directory k's path, valid in state `now`:
 * the event teaches it. */
static __always_inline void fw_teach_set(struct fw_cpu *c, __u32 b, const struct hr_dkey *k,
					 const struct hr_dvalid *now, __u32 dir_len, __u64 watched)
{
	struct fw_teach *t;

	if (!rcache)
		return;
	b &= 1;
	t = &c->plan.teach[b];
	fw_rkey_of(&t->key, k, now);
	t->gen = now->gen;
	t->ns_event = now->ns_event;
	t->dir_len = dir_len;
	t->watched = watched;
	c->plan.how[b] = FW_HOW_TEACH;
}

/* The leaf ("/" + name) after a reference to the reader's slot. */
static __always_inline __u32 fw_put_dref(struct fw_cpu *c, __u8 *ev, __u64 off, __u32 b, __s32 pos)
{
	__u64 n, at = off;

	if (pos < 0 || pos > FW_PATH_MAX)
		return 0;
	b &= 1;
	n = (FW_PATH_MAX - pos) & (2 * FW_PATH_MAX - 1);
	hr_clamp(n, FW_NAME_MAX);
	hr_clamp(at, FW_FIXED_END + 2 + FW_PATH_MAX);
	*(__u16 *)(ev + at) = FW_PATH_DREF | (FW_DREF + n);
	*(__u32 *)(ev + at + 2) = c->plan.dref[b][0];
	*(__u32 *)(ev + at + 6) = c->plan.dref[b][1];
	bpf_probe_read_kernel(ev + at + 2 + FW_DREF, n, FW_BUF(c, b) + (pos & (FW_PATH_MAX - 1)));
	return 2 + FW_DREF + n;
}

/* The whole path inline after what teaches its directory. A taught
 * directory's path is shorter than HR_DC_MAX, so the record stays within
 * FW_EVENT_MAX. */
static __always_inline __u32 fw_put_teach(struct fw_cpu *c, __u8 *ev, __u64 off, __u32 b, __s32 pos)
{
	__u64 n, at = off;

	if (pos < 0 || pos > FW_PATH_MAX)
		return 0;
	b &= 1;
	n = (FW_PATH_MAX - pos) & (2 * FW_PATH_MAX - 1);
	hr_clamp(n, HR_DC_MAX + FW_NAME_MAX);
	hr_clamp(at, FW_FIXED_END + 2 + FW_PATH_MAX);
	*(__u16 *)(ev + at) = FW_PATH_TEACH | (FW_TEACH + n);
	__builtin_memcpy(ev + at + 2, &c->plan.teach[b], FW_TEACH);
	bpf_probe_read_kernel(ev + at + 2 + FW_TEACH, n, FW_BUF(c, b) + (pos & (FW_PATH_MAX - 1)));
	return 2 + FW_TEACH + n;
}

#endif
