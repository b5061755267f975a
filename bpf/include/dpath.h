/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Absolute paths from the kernel's dentry tree: a walk from (dentry, mount)
 * up to the task's root, crossing mounts, writing the names backwards into a
 * per-CPU buffer, with the step fswatch's walks take too (tree/walk.h). What
 * a syscall really opened, whatever its path argument said.
 *
 * Kernel objects are read as tree/tree.h's hr_kread says: plain loads where
 * the kernel has bpf_rdonly_cast (they took an open's exit handler from ~800
 * to ~520 ns), probe reads before. The walk stops early at a directory the
 * path cache holds (tree/dircache.h, hr_dwalk_cached in emit_path.h).
 */
#ifndef HARRIER_DPATH_H
#define HARRIER_DPATH_H

#include "tree/walk.h"

/* Flags a walk leaves in struct hr_dwalk (what the path is). */
#define HR_DW_DISCONNECTED 1	/* a file system's own root, not a mount's: memfd:, anon files */
#define HR_DW_DETACHED 2	/* ended at a mount tree's top, not at the task's root */
#define HR_DW_TRUNCATED 4	/* longer than the buffer: the leading part is missing */
#define HR_DW_DONE 8		/* the walk is over */
#define HR_DW_ROOT 16		/* it ended at the task's root */
#define HR_DW_UNSURE 32		/* with `check`: it climbed a deleted directory or a file system
				 * that can move directories behind the kernel's back (not cacheable) */
#define HR_DW_KF_CLEAR 64	/* with `kf_ask`: not walked, the file's directory is one no
				 * kernel filter path can match below (kfdirs.h) */

/* Where a walk is. In a per-CPU map value, not on the stack: the verifier
 * then does not track it across bpf_loop iterations, and the loop verifies in
 * one pass whatever its depth. */
struct hr_dwalk {
	__u64 dentry;
	__u64 mnt;		/* struct mount * */
	__u64 root_dentry;	/* the task's root: the walk stops there */
	__u64 root_mnt;
	__s32 pos;		/* start of the path built so far, counting down from HR_PATH_MAX */
	__u32 flags;
	__u64 task;		/* the current task, from the caller (saves a helper call) */
	__u32 check;		/* flag what may not be cached (HR_DW_UNSURE): a walk to store */
	__u32 kf_ask;		/* the event is kept or not by its path alone: stop at a
				 * directory no filter path can match below (HR_DW_KF_CLEAR) */
};

/* Sets w up for a walk of (d, vfsmnt) as task t sees it; false: nothing to walk. */
static __always_inline bool hr_dwalk_init(struct hr_dwalk *w, void *d, void *vfsmnt, struct task_struct *t)
{
	w->dentry = (__u64)d;
	w->mnt = (__u64)hr_real_mount(vfsmnt);
	w->root_dentry = (__u64)t->fs->root.dentry;
	w->root_mnt = (__u64)hr_real_mount(t->fs->root.mnt);
	w->pos = HR_PATH_MAX;
	w->flags = 0;
	w->check = 0;
	return d && vfsmnt;
}

/* The walk's buffer is HR_PATHBUF (harrier.h): tree/walk.h's layout. */

#define HR_PIPEFS_MAGIC 0x50495045

static const char hr_pipe_fmt[] = "pipe:[%lu]";

/*
 * A pipe's dentry has no name (the kernel makes "pipe:[inode]" up for
 * /proc's links): written that way, as the whole path. False for any other
 * nameless dentry. Opening /proc/self/fd/N of a pipe (make's and cargo's
 * jobservers) gives an open whose file is one.
 */
static __always_inline bool hr_dpipe_name(struct hr_dwalk *w, __u8 *buf, __u64 d)
{
	__u64 sb = (__u64)hr_kread(d, struct dentry, d_sb);
	__u64 inode = (__u64)hr_kread(d, struct dentry, d_inode);
	__u64 ino;
	char s[32];
	long n;

	if (!sb || !inode || hr_kread(sb, struct super_block, s_magic) != HR_PIPEFS_MAGIC)
		return false;
	ino = hr_kread(inode, struct inode, i_ino);
	n = bpf_snprintf(s, sizeof(s), hr_pipe_fmt, &ino, sizeof(ino)) - 1;
	if (n <= 0 || n >= (long)sizeof(s) || w->pos - n < 0)
		return false;
	w->pos -= n;
	bpf_probe_read_kernel(buf + HR_DHEAD + (w->pos & (HR_PATH_MAX - 1)), n & 31, s);
	return true;
}

/*
 * One step up (tree/walk.h's), into buf (HR_PATHBUF bytes): a name, or a hop
 * from a mount's root to its mountpoint. 0: go on; 1: done.
 */
static __always_inline long hr_dstep(struct hr_dwalk *w, __u8 *buf)
{
	__u64 d = w->dentry, m = w->mnt, parent = 0, name;
	enum hr_up up;
	__u32 len;
	__s32 pos;

	if (!d)
		return 1;
	up = hr_up(&d, &m, w->root_dentry, w->root_mnt, &parent);
	if (up == HR_UP_ROOT || up == HR_UP_DETACHED) {
		w->flags |= up == HR_UP_ROOT ? HR_DW_ROOT : HR_DW_DETACHED;
		return 1;
	}
	if (up == HR_UP_MOUNT) {
		w->dentry = d;
		w->mnt = m;
		return 0;
	}
	/* A disconnected dentry (a memfd's "memfd:name"): its name is all
	 * there is; written below, then stop. Alone it is written as Falco's
	 * driver writes it, without a leading '/' (/proc's links add one). */
	if (up == HR_UP_OWN_ROOT) {
		w->flags |= HR_DW_DISCONNECTED;
		parent = 0;
	}
	/* Unhashed but not a root: removed; a file system's root is never hashed. */
	if (w->check) {
		__u64 sb = (__u64)hr_kread(d, struct dentry, d_sb);

		if (!hr_kread(d, struct dentry, d_hash.pprev) || !hr_local_fs(hr_kread(sb, struct super_block, s_magic)))
			w->flags |= HR_DW_UNSURE;
	}
	len = hr_kread(d, struct dentry, d_name.len) & 255;
	name = (__u64)hr_kread(d, struct dentry, d_name.name);
	if (!len && !parent && w->pos == HR_PATH_MAX && hr_dpipe_name(w, buf, d))
		return 1;
	pos = hr_put_dname(buf, w->pos, name, len);
	if (pos < 0) {
		w->flags |= HR_DW_TRUNCATED;
		return 1;
	}
	w->pos = pos + ((w->flags & HR_DW_DISCONNECTED) && w->pos == HR_PATH_MAX);
	w->dentry = parent;
	return parent ? 0 : 1;
}

#endif
