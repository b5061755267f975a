/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * fragments mode's chain cache: per directory (the verdict cache's key),
 * "a walk from here found every fragment of the chain up to the root in
 * `fragments` as it would write it", and the directory's verdict. A hit puts
 * the directory's key in the event and skips the climb, so a watched event
 * no longer costs more with depth. An entry is valid while nothing that
 * decides what the walk would write changed:
 *
 * - the verdict cache's rules (cache.h): the generation fw_gen (a directory
 *   renamed, moved or removed anywhere), the mount namespace's event
 *   counter, the task's root, local file systems only, never while a rename
 *   or rmdir is in flight (fw_busy);
 * - fw_frag_writes (walk.h): no `fragments` entry written since. An LRU
 *   eviction happens only on an insert, so no fragment of the chain can have
 *   gone either; and a walk that writes a chain differently (a task in a
 *   chroot writes its root as a top fragment) invalidates every other.
 *   Read before the walk, so the walk's own writes make the entry it stores
 *   a miss once: the next walk writes nothing and stores a lasting one.
 */
#ifndef HARRIER_FSWATCH_CHAIN_H
#define HARRIER_FSWATCH_CHAIN_H

struct fw_chain {
	struct fw_verdict v;
	__u64 writes;	/* fw_frag_writes when the walk began */
};

/* Per CPU, like the verdicts; user space sets the size (1: off). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, FW_VCACHE_MAX);
	__type(key, struct fw_vkey);
	__type(value, struct fw_chain);
} fchains SEC(".maps");

/*
 * The walk with names of d (in mount m) in fragments mode, through the chain
 * cache: the leaf's own step (its name into the event, its directory's key
 * as the event's), then the directory's entry; on a miss, the climb, which
 * writes the fragments, and the entry is stored if nothing can have changed
 * meanwhile. Returns the start of the path (the leaf's name), like fw_walk.
 */
static __always_inline __s32 fw_walk_frags_cached(struct fw_cpu *c, __u32 b, struct dentry *d0,
						  struct mount *m0, struct task_struct *t, __s32 pos,
						  __u32 depth)
{
	struct fw_walk *w = &c->walk;
	struct fw_vkey k = {};
	struct fw_chain e, *v;
	struct dentry *d, *dir;
	struct mount *m;
	__u64 gen, busy, writes, watched, leaf_watched;

	if (!fw_walk_init(c, b, d0, m0, t, pos, depth, 0))
		return pos;
	if (!m0)
		return fw_walk_run(c);
	d = bpf_core_cast(d0, struct dentry);
	m = bpf_core_cast(m0, struct mount);
	if (depth == 0) {
		/* A mount's root or the task's root: their parent is elsewhere. */
		if (d == m->mnt.mnt_root || d->d_parent == d || (__u64)d0 == w->root_dentry)
			return fw_walk_run(c);
		fw_walk_step(0, 0);	/* the leaf's name; pkey: its directory */
		if (!w->dentry)
			return w->pos;
	}
	dir = bpf_core_cast((void *)w->dentry, struct dentry);
	leaf_watched = w->watched;
	k.mnt_uid = fw_mnt_uid(m);
	k.ino = dir->d_inode->i_ino;
	k.dev = dir->d_sb->s_dev;
	/* The generation before busy (fw_vc_dir_changed writes them the other
	 * way round); the write count before the walk. */
	gen = *(volatile __u64 *)&fw_gen;
	writes = *(volatile __u64 *)&fw_frag_writes;
	asm volatile("" ::: "memory");
	busy = *(volatile __s64 *)&fw_busy;
	fw_vc_expect(&e.v, m, t, gen);
	e.writes = writes;
	if (!busy && k.mnt_uid) {
		v = bpf_map_lookup_elem(&fchains, &k);
		if (v && v->v.gen == gen && v->writes == writes && v->v.ns_event == e.v.ns_event &&
		    v->v.root_uid == e.v.root_uid && v->v.root_ino == e.v.root_ino) {
			watched = v->v.watched;
			asm volatile("" ::: "memory");
			/* Still ours: an eviction by another CPU zeroes this CPU's copy. */
			if (*(volatile __u64 *)&v->v.gen == gen) {
				c->stats.path_hits++;
				/* A walk from the directory itself: its key is the event's. */
				if (!w->pkey_set) {
					fw_key_of(&c->fkey, dir, m, true);
					fw_set_pkey(w, &c->fkey);
				}
				w->watched |= watched;
				w->dentry = 0;
				return w->pos;
			}
		}
	}
	c->stats.path_misses++;
	fw_walk_run(c);
	/* The directory's own verdict only: not when the leaf decided it. */
	if (k.mnt_uid && !busy && !leaf_watched && w->cacheable && w->at_root &&
	    !(w->flags & ~FW_F_DELETED)) {
		e.v.watched = w->watched;
		bpf_map_update_elem(&fchains, &k, &e, BPF_ANY);
	}
	return w->pos;
}

#endif
