/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The dentry walk: from a dentry up to the task's root, crossing mounts,
 * writing the path backwards into a per-CPU buffer and checking each
 * ancestor against the watched (dev, inode) set. A check-only walk reads
 * no names and stops at the first watched inode: the filter that runs
 * before any path is built.
 */
#ifndef HARRIER_FSWATCH_WALK_H
#define HARRIER_FSWATCH_WALK_H

/* (dev, ino) is watched: the summary bit first (one load), the map only on a hit. */
static __always_inline bool fw_is_watched(__u32 dev, __u64 ino)
{
	__u32 b = fw_watch_bit(dev, ino);
	struct fw_key k = { .dev = dev, .ino = ino };

	if (!(watch_bits[(b >> 6) & (FW_WATCH_BITS / 64 - 1)] & (1ULL << (b & 63))))
		return false;
	return bpf_map_lookup_elem(&watched, &k) != 0;
}

/* The walk reads the kernel's objects with plain loads through
 * bpf_core_cast (the verifier makes them fault-safe): a helper call per
 * field would cost more than the rest of a step (6.1 has no cast: HR_CAST). */
static __always_inline void fw_check_watch(struct fw_walk *w, struct dentry *d)
{
	if (w->watched || (!recursive && w->depth > 1))
		return;
	if (fw_is_watched(HR_RD(d, d_sb, s_dev), HR_RD(d, d_inode, i_ino)))
		w->watched = 1;
}

#define FW_FRAGS_ON (resolution == FW_RES_FRAGS)

static __always_inline void fw_key_of(struct fw_fkey *k, struct dentry *d, struct mount *m, bool has_mnt)
{
	k->dev = HR_RD(d, d_sb, s_dev);
	k->mnt_id = has_mnt ? HR_RD(m, mnt_id) : 0;
	k->ino = HR_RD(d, d_inode, i_ino);
}

/* fragments: bumped after every insert or rewrite of a `fragments` entry
 * (and so after every LRU eviction, which only an insert makes), before the
 * event that needs it is published. The reader empties its cache of entries
 * when it moved (fragmap.rs); the chain cache (chain.h) trusts no chain across
 * it. In .bss: user space reads it through the skeleton's mapping. */
__u64 fw_frag_writes = 0;

/* fragments: c->fkey → (c->frag.parent, name), written only if the map does
 * not say so already: `changed` moves only when the directory did. */
static __always_inline void fw_frag_put(struct fw_cpu *c, const unsigned char *name, __u32 len)
{
	struct fw_frag *v = &c->frag, *old;
	bool same;

	len &= FW_NAME_MAX - 1;
	for (int i = 0; i < FW_NAME_MAX / 8; i++)
		((__u64 *)v->name)[i] = 0;
	if (len)
		bpf_probe_read_kernel(v->name, len, name);
	v->len = len;
	v->pad = 0;
	old = bpf_map_lookup_elem(&fragments, &c->fkey);
	if (old) {
		same = old->len == len && old->parent.dev == v->parent.dev &&
		       old->parent.mnt_id == v->parent.mnt_id && old->parent.ino == v->parent.ino;
		for (int i = 0; i < FW_NAME_MAX / 8 && same; i++)
			if (((__u64 *)old->name)[i] != ((__u64 *)v->name)[i])
				same = false;
		if (same)
			return;
	}
	v->changed = bpf_ktime_get_ns();
	bpf_map_update_elem(&fragments, &c->fkey, v, BPF_ANY);
	/* After the update (a reader that sees the count sees the entry);
	 * a locked add: ordered before the event's publication. */
	__sync_fetch_and_add(&fw_frag_writes, 1);
}

/* fragments: the leaf's directory is `k` (0: none above). */
static __always_inline void fw_set_pkey(struct fw_walk *w, struct fw_fkey *k)
{
	w->pkey = *k;
	w->pkey_set = 1;
	w->inline_left = 0;
}

/* The frame of a walk's fragment at a place with no name of its own (the
 * top, a mount's root): the leaf's directory if the leaf went inline, else
 * an empty fragment. */
static __always_inline void fw_frag_top(struct fw_cpu *c, struct fw_walk *w)
{
	if (w->inline_left)
		fw_set_pkey(w, &c->frag.parent);
	else
		fw_frag_put(c, 0, 0);
}

/* A disconnected dentry's name (it is its own parent): memfd: or not; "/"
 * is the root of a file system reached through the wrong mount. */
static __always_inline bool fw_own_root_is_slash(struct fw_walk *w, __u64 name, __u32 len)
{
	char pfx[6] = {};

	w->flags |= FW_F_DISCONNECTED;
	bpf_probe_read_kernel(pfx, sizeof(pfx), (void *)name);
	if (len >= 6 && pfx[0] == 'm' && pfx[1] == 'e' && pfx[2] == 'm' && pfx[3] == 'f' && pfx[4] == 'd' &&
	    pfx[5] == ':')
		w->flags |= FW_F_MEMFD;
	return len == 1 && pfx[0] == '/';
}

/* One step up (tree/walk.h's, as capture's): a name, or a hop from a
 * mount's root to its mountpoint; with the watch check and fragments. */
static long fw_walk_step(__u32 i, void *ctx)
{
	struct fw_cpu *c = fw_cpu_get();
	__u64 cur, dd, mm, parent = 0, name;
	struct dentry *d;
	struct fw_walk *w;
	enum hr_up up;
	__u32 len;
	__s32 pos;
	bool frags;

	if (!c)
		return 1;
	w = &c->walk;
	if (!w->dentry || (w->check && (w->watched || (!recursive && w->depth > 1))))
		return 1;
	cur = dd = w->dentry;
	mm = w->mnt;
	d = HR_CAST(cur, struct dentry);
	frags = FW_FRAGS_ON && !w->check;
	if (frags) {
		fw_key_of(&c->fkey, d, HR_CAST(mm, struct mount), mm != 0);
		/* A walk from the parent (a recorded name went first): this is it. */
		if (!w->pkey_set && !w->inline_left)
			fw_set_pkey(w, &c->fkey);
		__builtin_memset(&c->frag.parent, 0, sizeof(c->frag.parent));
	}
	if (!hr_local_fs(HR_RD(d, d_sb, s_magic)))
		w->cacheable = 0;	/* NFS, FUSE...: may move without a local syscall */
	fw_check_watch(w, d);
	up = hr_up(&dd, &mm, w->root_dentry, w->root_mnt, &parent);
	if (up == HR_UP_ROOT || up == HR_UP_DETACHED) {
		if (up == HR_UP_ROOT)
			w->at_root = 1;
		else
			w->flags |= FW_F_DETACHED;
		if (frags)
			fw_frag_top(c, w);	/* the event is on "/", or the top */
		return 1;
	}
	if (up == HR_UP_MOUNT) {
		w->dentry = dd;
		w->mnt = mm;
		/* A mount's root: no name of its own, its mountpoint's place. */
		if (frags) {
			fw_key_of(&c->frag.parent, HR_CAST(dd, struct dentry), HR_CAST(mm, struct mount), true);
			fw_frag_top(c, w);
		}
		return 0;
	}
	if (w->check) {
		w->depth++;
		if (up == HR_UP_OWN_ROOT)
			return 1;
		w->dentry = parent;
		return 0;
	}
	len = hr_kread(cur, struct dentry, d_name.len) & (FW_NAME_MAX - 1);
	name = (__u64)hr_kread(cur, struct dentry, d_name.name);
	if (up == HR_UP_OWN_ROOT) {
		if (fw_own_root_is_slash(w, name, len)) {
			if (frags)
				fw_frag_top(c, w);
			return 1;
		}
	} else if (frags) {
		fw_key_of(&c->frag.parent, HR_CAST(parent, struct dentry), HR_CAST(mm, struct mount), mm != 0);
	}
	w->depth++;
	if (frags && !w->inline_left) {
		/* A directory above the leaf: a fragment, not bytes in the event. */
		fw_frag_put(c, (const unsigned char *)name, len);
	} else {
		if (frags)
			fw_set_pkey(w, &c->frag.parent);
		pos = hr_put_dname(FW_WBUF(c, w->buf), w->pos, name, len);
		if (pos < 0)
			w->flags |= FW_F_TRUNCATED;	/* out of room: climbing on for the watch check only */
		else
			w->pos = pos;
	}
	if (up == HR_UP_OWN_ROOT)
		return 1;
	w->dentry = parent;
	return 0;
}

/* Sets up c->walk for a walk of d (in mount mnt) into path buffer b after
 * whatever is at [pos, FW_PATH_MAX); false: nothing to walk (flagged). */
static __always_inline bool fw_walk_init(struct fw_cpu *c, __u32 b, struct dentry *d, struct mount *mnt,
					 struct task_struct *t, __s32 pos, __u32 depth, bool check)
{
	struct fw_walk *w = &c->walk;
	struct mount *root = hr_real_mount(BPF_CORE_READ(t, fs, root.mnt));

	w->root_dentry = (__u64)BPF_CORE_READ(t, fs, root.dentry);
	w->dentry = (__u64)d;
	w->mnt = (__u64)mnt;
	w->root_mnt = (__u64)root;
	w->pos = pos;
	w->buf = b;
	w->depth = depth;
	w->flags = 0;
	w->watched = watch_all;
	w->check = check;
	w->inline_left = depth == 0;	/* fragments: else a recorded name went first */
	w->pkey_set = 0;
	w->at_root = 0;
	w->cacheable = 1;
	__builtin_memset(&w->pkey, 0, sizeof(w->pkey));
	if (!d) {
		w->flags = FW_F_UNRESOLVED;
		return false;
	}
	if (!check && !fw_hashed(d) && BPF_CORE_READ(d, d_parent) != d)
		w->flags |= FW_F_DELETED;
	return true;
}

/* The rest of a walk set up by fw_walk_init. */
static __always_inline __s32 fw_walk_run(struct fw_cpu *c)
{
	struct fw_walk *w = &c->walk;

	if (bpf_loop(FW_DEPTH_MAX, fw_walk_step, 0, 0) == FW_DEPTH_MAX && w->dentry)
		w->flags |= FW_F_TRUNCATED;
	return w->pos;
}

/*
 * Walks d (in mount mnt) up to the root into path buffer b, after whatever
 * is already at [pos, FW_PATH_MAX). Returns the start of the path; the flags
 * and whether a watched inode was passed stay in c->walk. `check`: only
 * whether a watched inode is passed (no path, no flags).
 */
static __always_inline __s32 fw_walk(struct fw_cpu *c, __u32 b, struct dentry *d, struct mount *mnt,
				     struct task_struct *t, __s32 pos, __u32 depth, bool check)
{
	if (!fw_walk_init(c, b, d, mnt, t, pos, depth, check))
		return pos;
	return fw_walk_run(c);
}

/* "/" + name at the end of buffer b: the first step of a walk from the parent. */
static __always_inline __s32 fw_put_name(struct fw_cpu *c, __u32 b, const char *name, __u32 len)
{
	__s32 pos;

	len &= FW_NAME_MAX - 1;
	pos = FW_PATH_MAX - len - 1;
	b &= 1;
	bpf_probe_read_kernel(FW_BUF(c, b) + ((pos + 1) & (FW_PATH_MAX - 1)), len, name);
	FW_BUF(c, b)[pos & (FW_PATH_MAX - 1)] = '/';
	return pos;
}

#endif
