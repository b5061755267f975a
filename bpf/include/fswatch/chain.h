/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * fragments mode's chain cache: per directory (the verdict cache's key),
 * "a walk from here found every fragment of the chain up to the root in
 * `fragments` as it would write it", and the directory's verdict. A hit puts
 * the directory's key in the event and skips the climb, so a watched event
 * no longer costs more with depth. An entry is valid while nothing that
 * decides what the walk would write changed:
 *
 * - the verdict cache's rules (cache.h): the generation hr_tree_gen (a directory
 *   renamed, moved or removed anywhere), the mount namespace's event
 *   counter, the task's root, local file systems only, never while a rename
 *   or rmdir is in flight (hr_tree_busy);
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
	struct hr_dvalid v;
	__u64 writes;	/* fw_frag_writes when the walk began */
};

/* Per CPU, like the verdicts; user space sets the size (1: off). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, FW_VCACHE_MAX);
	__type(key, struct hr_dkey);
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
	struct fw_dir_probe p = {};
	struct fw_chain e, *v;
	__u64 writes, watched;
	__s32 done;

	if (!fw_dir_probe(c, b, d0, m0, t, pos, depth, &p, &done))
		return done;
	/* Before the walk, so the walk's own writes make its entry a miss once. */
	writes = *(volatile __u64 *)&fw_frag_writes;
	hr_dvalid_now(&e.v, p.m, t, p.gen);
	e.writes = writes;
	if (!p.busy && p.k.mnt_uid) {
		v = bpf_map_lookup_elem(&fchains, &p.k);
		if (v && hr_dvalid_same(&v->v, &e.v) && v->writes == writes) {
			watched = v->v.watched;
			asm volatile("" ::: "memory");
			/* Still ours: an eviction by another CPU zeroes this CPU's copy. */
			if (*(volatile __u64 *)&v->v.gen == p.gen) {
				c->stats.path_hits++;
				/* A walk from the directory itself: its key is the event's. */
				if (!w->pkey_set) {
					fw_key_of(&c->fkey, p.dir, p.m, true);
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
	if (fw_dir_storable(w, &p)) {
		e.v.watched = w->watched;
		bpf_map_update_elem(&fchains, &p.k, &e, BPF_ANY);
	}
	return w->pos;
}

#endif
