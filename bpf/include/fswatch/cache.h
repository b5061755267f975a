/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The verdict cache: per directory (mount's unique id, dev, inode), whether
 * it or an ancestor up to the task's root is watched, so that the watch
 * check of an event stops at the leaf's directory instead of climbing to the
 * root. Only an "unwatched" verdict can lose an event (a "watched" one only
 * sends the event to the walk with names, which checks again), so every way
 * a directory's ancestors can change must make its entry invalid:
 *
 * - hr_tree_gen, a generation every entry must match, is bumped when a directory
 *   is renamed or removed (inval.h: a directory's ctime change outside the
 *   syscalls known to leave the tree's shape alone; a rename whose moved
 *   entry is not proven a file), and by --follow;
 * - hr_tree_busy counts rename/rmdir syscalls between their first ctime change
 *   (before the kernel's d_move) and their exit: while one is in flight the
 *   cache is neither read nor written, so no walk of the old tree survives it;
 * - the entry holds the mount namespace's event counter (bumped by the kernel
 *   on every mount, umount, move and pivot_root in it) and the task's root
 *   (chroot): either differing is a miss;
 * - the key holds the mount's never-reused id (mnt_id_unique, 6.8+; before,
 *   hr_mnt_uid) and the inode number, which only a removal (that bumps the
 *   generation) frees;
 * - directories of file systems whose directories can move behind the
 *   kernel's back (not in hr_local_fs: NFS, FUSE...) are never cached.
 */
#ifndef HARRIER_FSWATCH_CACHE_H
#define HARRIER_FSWATCH_CACHE_H

#define FW_VCACHE_MAX 16384	/* directories per CPU (LRU) */

/* Per CPU: no cache line shared between CPUs; user space sets the size (1: off). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_PERCPU_HASH);
	__uint(max_entries, FW_VCACHE_MAX);
	__type(key, struct hr_dkey);
	__type(value, struct hr_dvalid);
} verdicts SEC(".maps");

/*
 * The watch check (no names) of d in mount m, through the cache: the leaf
 * itself, then its directory's entry; on a miss, the climb (fw_walk), whose
 * verdict is stored for the directory if nothing can have changed the tree
 * meanwhile. Sets c->walk.watched like a check-only fw_walk.
 */
static __always_inline void fw_check_cached(struct fw_cpu *c, struct dentry *d0, struct mount *m0,
					    struct task_struct *t, __u32 depth)
{
	struct fw_walk *w = &c->walk;
	struct hr_dkey k = {};
	struct hr_dvalid e, *v;
	struct dentry *d, *dir;
	struct mount *m;
	__u64 gen, busy, watched;

	if (!d0 || !m0)
		goto climb;
	d = HR_CAST(d0, struct dentry);
	m = HR_CAST(m0, struct mount);
	dir = d;
	if (depth == 0) {
		/* The leaf may be watched itself; files are not cached. */
		if (fw_is_watched(HR_RD(d, d_sb, s_dev), HR_RD(d, d_inode, i_ino))) {
			w->watched = 1;
			return;
		}
		/* A mount's root or the task's root: their parent is elsewhere. */
		dir = HR_RD(d, d_parent);
		if (d == HR_RD(m, mnt.mnt_root) || dir == d || d == t->fs->root.dentry)
			goto climb;
	}
	k.mnt_uid = hr_mnt_uid(m);
	if (!k.mnt_uid)
		goto climb;
	k.ino = HR_RD(dir, d_inode, i_ino);
	k.dev = HR_RD(dir, d_sb, s_dev);
	/* The generation before busy (inval.h writes them the other way round). */
	gen = *(volatile __u64 *)&hr_tree_gen;
	asm volatile("" ::: "memory");
	busy = *(volatile __s64 *)&hr_tree_busy;
	hr_dvalid_now(&e, m, t, gen);
	if (!busy) {
		struct fw_rval *r;

		v = bpf_map_lookup_elem(&verdicts, &k);
		if (v && hr_dvalid_same(v, &e)) {
			watched = v->watched;
			asm volatile("" ::: "memory");
			/* Still ours: an eviction by another CPU zeroes this CPU's copy. */
			if (*(volatile __u64 *)&v->gen == gen) {
				c->stats.cache_hits++;
				w->watched = watched;
				return;
			}
		}
		/* A directory the reader holds has its verdict there too: trees
		 * wider than this CPU's verdicts still need no climb. */
		r = fw_rdir(&k, &e);
		if (r) {
			c->stats.cache_hits++;
			w->watched = r->watched;
			return;
		}
	}
	c->stats.cache_misses++;
	fw_walk(c, 0, d0, m0, t, FW_PATH_MAX, depth, 1);
	if (!busy && w->cacheable && (w->watched || w->at_root)) {
		e.watched = w->watched;
		bpf_map_update_elem(&verdicts, &k, &e, BPF_ANY);
	}
	return;
climb:
	c->stats.cache_misses++;
	fw_walk(c, 0, d0, m0, t, FW_PATH_MAX, depth, 1);
}

/* What the cached walks (the path cache below, fragments' chain cache in
 * chain.h) know before their lookup: the leaf's directory and its key, and
 * the generation and busy count read in that order (inval.h writes them the
 * other way round). */
struct fw_dir_probe {
	struct hr_dkey k;
	struct dentry *dir;
	struct mount *m;
	__u64 gen, busy, leaf_watched;
};

/*
 * Starts the walk of path b from d (in mount m0) and takes the leaf's own
 * step (its name, its watch check). 0: the walk is over already (a mount's
 * or the task's root, no mount, nothing above), its result in *done; 1: p
 * describes the leaf's directory for a cache lookup.
 */
static __always_inline int fw_dir_probe(struct fw_cpu *c, __u32 b, struct dentry *d0, struct mount *m0,
					struct task_struct *t, __s32 pos, __u32 depth,
					struct fw_dir_probe *p, __s32 *done)
{
	struct fw_walk *w = &c->walk;
	struct dentry *d;
	struct mount *m;

	if (!fw_walk_init(c, b, d0, m0, t, pos, depth, 0)) {
		*done = pos;
		return 0;
	}
	if (!m0) {
		*done = fw_walk_run(c);
		return 0;
	}
	/* Locals, not p's fields, in HR_RD: BPF_CORE_READ would relocate
	 * those too, against a kernel that has no struct fw_dir_probe. */
	d = HR_CAST(d0, struct dentry);
	m = HR_CAST(m0, struct mount);
	p->m = m;
	if (depth == 0) {
		/* A mount's root or the task's root: their parent is elsewhere. */
		if (d == HR_RD(m, mnt.mnt_root) || HR_RD(d, d_parent) == d || (__u64)d0 == w->root_dentry) {
			*done = fw_walk_run(c);
			return 0;
		}
		fw_walk_step(0, 0);	/* the leaf's name; fragments: pkey, its directory */
		if (!w->dentry) {
			*done = w->pos;
			return 0;
		}
	}
	d = HR_CAST(w->dentry, struct dentry);
	p->dir = d;
	p->leaf_watched = w->watched;
	p->k.mnt_uid = hr_mnt_uid(m);
	p->k.ino = HR_RD(d, d_inode, i_ino);
	p->k.dev = HR_RD(d, d_sb, s_dev);
	p->gen = *(volatile __u64 *)&hr_tree_gen;
	asm volatile("" ::: "memory");
	p->busy = *(volatile __s64 *)&hr_tree_busy;
	return 1;
}

/* Whether the walk that missed may store the directory's entry: nothing can
 * have changed meanwhile, it reached the root, and the verdict is the
 * directory's own (not the leaf's). */
static __always_inline bool fw_dir_storable(const struct fw_walk *w, const struct fw_dir_probe *p)
{
	return p->k.mnt_uid && !p->busy && !p->leaf_watched && w->cacheable && w->at_root &&
	       !(w->flags & ~FW_F_DELETED);
}

/*
 * The walk with names of d (in mount m) into path buffer b, through the path
 * cache: the leaf's own step (its name and watch check), then its
 * directory's cached path; on a miss, the walk to the root, whose directory
 * part is then cached if nothing can have changed the tree meanwhile.
 * Returns the start of the path, like fw_walk.
 */
static __always_inline __s32 fw_walk_names_cached(struct fw_cpu *c, __u32 b, struct dentry *d0,
						  struct mount *m0, struct task_struct *t, __s32 pos,
						  __u32 depth)
{
	struct fw_walk *w = &c->walk;
	struct fw_dir_probe p = {};
	struct hr_dcval *v;
	__u64 gen, watched;
	__s32 at, start, done;
	__u32 len;
	__u64 n;

	if (!fw_dir_probe(c, b, d0, m0, t, pos, depth, &p, &done))
		return done;
	gen = p.gen;
	hr_dvalid_now(&c->pval.v, p.m, t, gen);
	if (!p.busy && p.k.mnt_uid) {
		/* The reader has the directory's path: the event refers to it. */
		if (fw_dref_hit(c, b, &p.k, &c->pval.v, &watched)) {
			w->watched |= watched;
			w->dentry = 0;
			return w->pos;
		}
		v = bpf_map_lookup_elem(&dirpaths, &p.k);
		if (v && hr_dvalid_same(&v->v, &c->pval.v)) {
			len = v->len;
			at = w->pos - (__s32)len;
			if (len > 0 && len < HR_DC_MAX && at >= 0) {
				n = len;
				hr_clamp(n, HR_DC_MAX - 1);
				bpf_probe_read_kernel(FW_BUF(c, w->buf) + (at & (FW_PATH_MAX - 1)), n, v->path);
				watched = v->v.watched;
				asm volatile("" ::: "memory");
				if (*(volatile __u64 *)&v->v.gen == gen) {
					c->stats.path_hits++;
					/* The reader was taught at the store; again now
					 * and then in case that event was lost or not
					 * kept (not per event: a reader that is behind
					 * would get bigger records in a burst). */
					if (--v->teach_in == 0) {
						v->teach_in = FW_TEACH_EVERY;
						fw_teach_set(c, b, &p.k, &c->pval.v, len, watched);
					}
					w->pos = at;
					w->watched |= watched;
					w->dentry = 0;
					return at;
				}
			}
		}
	}
	c->stats.path_misses++;
	start = w->pos;
	fw_walk_run(c);
	if (fw_dir_storable(w, &p)) {
		at = w->pos;
		len = start - at;
		if (len > 0 && len < HR_DC_MAX && at >= 0) {
			c->pval.len = len;
			c->pval.v.watched = w->watched;
			c->pval.teach_in = FW_TEACH_EVERY;
			n = len;
			hr_clamp(n, HR_DC_MAX - 1);
			bpf_probe_read_kernel(c->pval.path, n, FW_BUF(c, w->buf) + (at & (FW_PATH_MAX - 1)));
			bpf_map_update_elem(&dirpaths, &p.k, &c->pval, BPF_ANY);
			fw_teach_set(c, b, &p.k, &c->pval.v, len, w->watched);
		}
	}
	return w->pos;
}

#endif
