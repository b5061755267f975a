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

static __always_inline struct mount *fw_real_mount(struct vfsmount *m)
{
	return m ? (struct mount *)((void *)m - bpf_core_field_offset(struct mount, mnt)) : 0;
}

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
 * field would cost more than the rest of a step. */
static __always_inline void fw_check_watch(struct fw_walk *w, struct dentry *d)
{
	if (w->watched || (!recursive && w->depth > 1))
		return;
	if (fw_is_watched(d->d_sb->s_dev, d->d_inode->i_ino))
		w->watched = 1;
}

/* One step up: a name, or a hop from a mount's root to its mountpoint. */
static long fw_walk_step(__u32 i, void *ctx)
{
	struct fw_cpu *c = fw_cpu_get();
	struct dentry *d, *parent;
	struct mount *mnt;
	struct fw_walk *w;
	struct qstr q;
	__u32 len, b;
	__s32 pos;

	if (!c)
		return 1;
	w = &c->walk;
	if (!w->dentry || (w->check && (w->watched || (!recursive && w->depth > 1))))
		return 1;
	d = bpf_core_cast((void *)w->dentry, struct dentry);
	mnt = bpf_core_cast((void *)w->mnt, struct mount);
	if (w->dentry == w->root_dentry && w->mnt == w->root_mnt) {
		fw_check_watch(w, d);
		return 1;
	}
	if (w->mnt && w->dentry == (__u64)mnt->mnt.mnt_root) {
		__u64 up = (__u64)mnt->mnt_parent;

		fw_check_watch(w, d);
		if (up == w->mnt) {
			w->flags |= FW_F_DETACHED;
			return 1;
		}
		w->dentry = (__u64)mnt->mnt_mountpoint;
		w->mnt = up;
		return 0;
	}
	fw_check_watch(w, d);
	parent = d->d_parent;
	if (w->check) {
		w->depth++;
		if ((__u64)parent == w->dentry)
			return 1;
		w->dentry = (__u64)parent;
		return 0;
	}
	if (bpf_probe_read_kernel(&q, sizeof(q), &d->d_name))
		return 1;
	len = q.len & (FW_NAME_MAX - 1);
	if ((__u64)parent == w->dentry) {
		/* A file system's root that is not the mount's: a disconnected
		 * dentry (memfd:, an fd from open_by_handle) or the wrong mount. */
		char pfx[6] = {};

		w->flags |= FW_F_DISCONNECTED;
		bpf_probe_read_kernel(pfx, sizeof(pfx), q.name);
		if (len >= 6 && pfx[0] == 'm' && pfx[1] == 'e' && pfx[2] == 'm' && pfx[3] == 'f' &&
		    pfx[4] == 'd' && pfx[5] == ':')
			w->flags |= FW_F_MEMFD;
		if (len == 1 && pfx[0] == '/')
			return 1;
	}
	w->depth++;
	pos = w->pos - (__s32)len - 1;
	if (pos < 0) {
		/* Out of room: keep climbing for the watch check only. */
		w->flags |= FW_F_TRUNCATED;
	} else {
		b = w->buf & 1;
		bpf_probe_read_kernel(FW_BUF(c, b) + ((pos + 1) & (FW_PATH_MAX - 1)), len, q.name);
		FW_BUF(c, b)[pos & (FW_PATH_MAX - 1)] = '/';
		w->pos = pos;
	}
	if ((__u64)parent == w->dentry)
		return 1;
	w->dentry = (__u64)parent;
	return 0;
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
	struct fw_walk *w = &c->walk;
	struct mount *root = fw_real_mount(BPF_CORE_READ(t, fs, root.mnt));

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
	if (!d) {
		w->flags = FW_F_UNRESOLVED;
		return pos;
	}
	if (!check && !fw_hashed(d) && BPF_CORE_READ(d, d_parent) != d)
		w->flags |= FW_F_DELETED;
	if (bpf_loop(FW_DEPTH_MAX, fw_walk_step, 0, 0) == FW_DEPTH_MAX && w->dentry)
		w->flags |= FW_F_TRUNCATED;
	return w->pos;
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
