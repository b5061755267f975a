/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Event assembly: a plan's paths walked (fw_path) and the record written
 * into this CPU's ring (fw_emit). Global functions, verified once each.
 */
#ifndef HARRIER_FSWATCH_EVENT_H
#define HARRIER_FSWATCH_EVENT_H

#include "doorbell.h"

/* hr_aring_reserve counts drops by the capture engine's reasons. */
_Static_assert(FW_DROP_RING_FULL == HR_DROP_RING_FULL && FW_DROP_NO_RING == HR_DROP_NO_RING,
	       "fswatch's drop reasons must match harrier.h's");

/*
 * Path b of the plan: an optional recorded name, then the walk from
 * plan.dentry[b]. `check`: the watch check alone (pl->watched, watched_b),
 * no path: run first, so that events outside the watched paths build none.
 * A global function: verified once, not per call site.
 */
__noinline int fw_path(__u32 b, __u32 check)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct fw_cpu *c = fw_cpu_get();
	struct fw_mount_pick mp = { 0, 0 };
	struct fw_pending *p;
	struct fw_plan *pl;
	struct dentry *d;
	__u32 shift, depth = 0;
	__s32 pos = FW_PATH_MAX, ns;

	if (!c)
		return 0;
	b &= 1;
	pl = &c->plan;
	shift = b ? FW_F_SOURCE_SHIFT : 0;
	d = (struct dentry *)pl->dentry[b];
	ns = pl->name_slot[b];
	if (ns >= 0) {
		struct fw_slot *s;

		p = bpf_task_storage_get(&pending, t, 0, 0);
		if (!p)
			return 0;
		s = &p->slots[ns & (FW_SLOTS - 1)];
		if (!check)
			pos = fw_put_name(c, b, s->name, s->name_len);
		depth = 1;
		/* The entry itself may be what is watched. */
		if (fw_is_watched(s->dev, s->ino))
			pl->watched = 1;
		if (!b && !check) {
			pl->dev = s->dev;
			pl->ino = s->ino;
		}
	}
	if (check && pl->watched)
		return 0;	/* decided: the other path need not be looked at */
	if (pl->mnt[b]) {
		mp.mnt = (struct mount *)pl->mnt[b];
		mp.flags = pl->mnt_flags[b];
	} else if (d) {
		/* Picked once: the second pass reuses it. */
		mp = fw_mount_for(c, t, d, pl);
		pl->mnt[b] = (__u64)mp.mnt;
		pl->mnt_flags[b] = mp.flags;
	}
	if (check && vcache)
		fw_check_cached(c, d, mp.mnt, t, depth);
	else if (!check && vcache && resolution != FW_RES_FRAGS)
		pos = fw_walk_names_cached(c, b, d, mp.mnt, t, pos, depth);
	else if (!check && vcache)
		pos = fw_walk_frags_cached(c, b, d, mp.mnt, t, pos, depth);
	else
		pos = fw_walk(c, b, d, mp.mnt, t, pos, depth, check);
	pl->watched |= c->walk.watched;
	if (check)
		return 0;
	pl->watched_b[b] = c->walk.watched;
	pl->pkey[b] = c->walk.pkey;
	pl->pos[b] = pos;
	pl->flags |= (c->walk.flags | mp.flags | pl->extra[b]) << shift;
	if (!b) {
		struct mount *m = mp.mnt; /* a local: BPF_CORE_READ would relocate mp.mnt too */

		pl->mnt_id = m ? BPF_CORE_READ(m, mnt_id) : 0;
		if (ns < 0 && d) {
			pl->dev = BPF_CORE_READ(d, d_sb, s_dev);
			pl->ino = BPF_CORE_READ(d, d_inode, i_ino);
		}
	}
	return 0;
}

static __always_inline __u32 fw_copy_path(struct fw_cpu *c, __u8 *ev, __u64 off, __u32 b, __s32 pos)
{
	__u64 n, at = off;

	if (pos < 0 || pos > FW_PATH_MAX)
		return 0;
	n = (FW_PATH_MAX - pos) & (2 * FW_PATH_MAX - 1);
	hr_clamp(n, FW_PATH_MAX);
	hr_clamp(at, FW_FIXED_END + 2 + FW_PATH_MAX);
	*(__u16 *)(ev + at) = n;
	bpf_probe_read_kernel(ev + at + 2, n, FW_BUF(c, b) + (pos & (FW_PATH_MAX - 1)));
	return 2 + n;
}

/*
 * single-fragment: path b as a record in this CPU's path ring, and a
 * reference to it (offset, seq) into the event. The path ring is written in
 * turn like the event ring (a record never starts past aring_last, so never
 * wraps) but overwrites what the reader has not read: the reader then sees
 * another seq and flags the path unresolved.
 */
static __always_inline __u32 fw_put_frag(struct fw_cpu *c, __u8 *ev, __u64 off, __u32 b, __s32 pos)
{
	__u32 cpu = bpf_get_smp_processor_id();
	struct hr_aring *r = bpf_map_lookup_elem(&frags, &cpu);
	__u64 n, at = off, seq = 0, head, roff = 0;
	__u8 *rec;

	if (pos < 0 || pos > FW_PATH_MAX)
		return 0;
	n = (FW_PATH_MAX - pos) & (2 * FW_PATH_MAX - 1);
	hr_clamp(n, FW_PATH_MAX);
	hr_clamp(at, FW_FIXED_END + 2 + FW_PATH_MAX);	/* the first path may be inline (dirrefs.h) */
	if (r) {
		seq = ++c->frag_seq;
		head = r->head;
		roff = head & aring_mask;
		if (roff > aring_last) {
			head += aring_mask + 1 - roff;
			roff = 0;
		}
		rec = r->data + roff;
		*(volatile __u64 *)rec = 0;
		asm volatile("" ::: "memory");
		*(__u32 *)(rec + 8) = n;
		bpf_probe_read_kernel(rec + FW_FRAG_HDR, n, FW_BUF(c, b) + (pos & (FW_PATH_MAX - 1)));
		asm volatile("" ::: "memory");
		*(volatile __u64 *)rec = seq;
		head += (FW_FRAG_HDR + n + 7) & ~7ULL;
		r->head = head;
		/* The reader sets this ring's tail to where its drains got (never
		 * waited for: only the doorbell reads it). */
		fw_ring_bell(r, head);
	}
	/* seq 0 (no path ring): the reader flags the path. */
	*(__u16 *)(ev + at) = FW_FRAG_REF;
	*(__u32 *)(ev + at + 2) = roff;
	__builtin_memcpy(ev + at + 6, &seq, 8);
	return 2 + FW_FRAG_REF;
}

/* fragments: the key of path b's directory, then "/" + its leaf's name. */
static __always_inline __u32 fw_put_fref(struct fw_cpu *c, __u8 *ev, __u64 off, __u32 b, __s32 pos)
{
	__u64 n, at = off;

	if (pos < 0 || pos > FW_PATH_MAX)
		return 0;
	n = (FW_PATH_MAX - pos) & (2 * FW_PATH_MAX - 1);
	hr_clamp(n, FW_NAME_MAX);
	hr_clamp(at, FW_FIXED_END + 2 + FW_FKEY + FW_NAME_MAX);
	*(__u16 *)(ev + at) = FW_FKEY + n;
	__builtin_memcpy(ev + at + 2, &c->plan.pkey[b & 1], FW_FKEY);
	bpf_probe_read_kernel(ev + at + 2 + FW_FKEY, n, FW_BUF(c, b) + (pos & (FW_PATH_MAX - 1)));
	return 2 + FW_FKEY + n;
}

static __always_inline __u32 fw_put_path(struct fw_cpu *c, __u8 *ev, __u64 off, __u32 b, __s32 pos)
{
	if (resolution == FW_RES_FRAGS)
		return fw_put_fref(c, ev, off, b, pos);
	/* Both forms inline, in single-fragment mode too: no path ring record. */
	if (c->plan.how[b & 1] == FW_HOW_DREF)
		return fw_put_dref(c, ev, off, b, pos);
	if (c->plan.how[b & 1] == FW_HOW_TEACH)
		return fw_put_teach(c, ev, off, b, pos);
	if (resolution == FW_RES_SINGLE)
		return fw_put_frag(c, ev, off, b, pos);
	return fw_copy_path(c, ev, off, b, pos);
}

/* Writes the plan's event into this CPU's ring. Global: verified once. */
__noinline int fw_emit(__u32 kind, __u32 nr, __s64 ret)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct fw_cpu *c = fw_cpu_get();
	struct hr_aring *r;
	struct fw_fixed *fx;
	struct fw_plan *pl;
	struct hr_hdr *h;
	__u64 start, len;
	__u8 *ev;

	if (!c)
		return 0;
	pl = &c->plan;
	c->stats.events++;
	if (pl->flags & FW_F_UNRESOLVED)
		c->stats.unresolved++;
	ev = hr_aring_reserve(&arings, bpf_get_smp_processor_id(), aring_mask, aring_last, FW_EVENT_MAX,
			      c->stats.drops, &r, &start);
	if (!ev)
		return 0;
	h = (struct hr_hdr *)ev;
	fx = (struct fw_fixed *)(ev + sizeof(*h));
	h->ts = bpf_ktime_get_ns();
	h->tid = t->pid;
	h->type = kind;
	fx->ret = ret;
	fx->pid = t->tgid;
	fx->uid = BPF_CORE_READ(t, cred, uid.val);
	fx->gid = BPF_CORE_READ(t, cred, gid.val);
	fx->flags = pl->flags;
	fx->dev = pl->dev;
	fx->mnt_id = pl->mnt_id;
	fx->ino = pl->ino;
	bpf_get_current_comm(fx->comm, sizeof(fx->comm));
	fx->nr = nr;
	fx->pad = 0;
	len = FW_FIXED_END;
	len += fw_put_path(c, ev, len, 0, pl->pos[0]);
	len += fw_put_path(c, ev, len, 1, pl->pos[1]);
	h->len = len;
	hr_aring_commit(r, start, len);
	fw_ring_bell(r, start + ((len + 7) & ~7ULL));
	return 0;
}

#endif
