/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Absolute paths from the kernel's dentry tree: a walk from (dentry, mount)
 * up to the task's root, crossing mounts, writing the names backwards into a
 * per-CPU buffer. What a syscall really opened, whatever its path argument
 * said.
 *
 * Kernel objects are read as tree/tree.h's hr_kread says: plain loads where
 * the kernel has bpf_rdonly_cast (they took an open's exit handler from ~800
 * to ~520 ns), probe reads before. The walk stops early at a directory the
 * path cache holds (tree/dircache.h, hr_dwalk_cached in emit_path.h).
 */
#ifndef HARRIER_DPATH_H
#define HARRIER_DPATH_H

#include "tree/tree.h"

/* Flags a walk leaves in struct hr_dwalk (what the path is). */
#define HR_DW_DISCONNECTED 1	/* a file system's own root, not a mount's: memfd:, anon files */
#define HR_DW_DETACHED 2	/* ended at a mount tree's top, not at the task's root */
#define HR_DW_TRUNCATED 4	/* longer than the buffer: the leading part is missing */
#define HR_DW_DONE 8		/* the walk is over */
#define HR_DW_ROOT 16		/* it ended at the task's root */
#define HR_DW_UNSURE 32		/* with `check`: it climbed a deleted directory or a file system
				 * that can move directories behind the kernel's back (not cacheable) */

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
	__u32 pad;
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

/* The walk's buffer (HR_PATHBUF, harrier.h) starts with HR_DHEAD bytes
 * before the path's HR_PATH_MAX: room for hr_dname_words' window below the
 * path built so far. */

/*
 * A name of up to 64 bytes copied with eight plain loads and stores instead
 * of a helper call (~20 ns each here): the 64 bytes that end where the name
 * ends, stored so they end at path offset `end`. The bytes read before the
 * name belong to the object that holds it (a dentry's inline name, an
 * external_name's header) or are 0 (a plain load that faults reads 0); they
 * land below the path built so far, where the next name goes. new_utsname
 * serves as a kernel type that is a plain byte array (sysname[65]): the
 * verifier lets a load fall anywhere inside an array of ints.
 */
static __always_inline void hr_dname_words(__u8 *buf, __u64 end, __u64 name_end)
{
	const __u64 *src = (const __u64 *)bpf_core_cast((void *)(name_end - 64), struct new_utsname)->sysname;
	__u64 *dst;

	hr_clamp(end, HR_PATH_MAX);
	dst = (__u64 *)(buf + end); /* path offset end - 64 */
	dst[0] = src[0];
	dst[1] = src[1];
	dst[2] = src[2];
	dst[3] = src[3];
	dst[4] = src[4];
	dst[5] = src[5];
	dst[6] = src[6];
	dst[7] = src[7];
}

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
 * One step up, into buf (HR_DHEAD + HR_PATH_MAX bytes and more, the path
 * filled from the end of its HR_PATH_MAX): a name, or
 * a hop from a mount's root to its mountpoint. 0: go on; 1: done.
 */
static __always_inline long hr_dstep(struct hr_dwalk *w, __u8 *buf)
{
	__u64 d = w->dentry, m = w->mnt, parent;
	const unsigned char *name;
	__u32 len;
	__s32 pos;

	if (!d)
		return 1;
	if (d == w->root_dentry && m == w->root_mnt) {
		w->flags |= HR_DW_ROOT;
		return 1;
	}
	if (d == (__u64)hr_kread(m, struct mount, mnt.mnt_root)) {
		__u64 up = (__u64)hr_kread(m, struct mount, mnt_parent);

		if (up == m) {
			w->flags |= HR_DW_DETACHED;
			return 1;
		}
		w->dentry = (__u64)hr_kread(m, struct mount, mnt_mountpoint);
		w->mnt = up;
		return 0;
	}
	parent = (__u64)hr_kread(d, struct dentry, d_parent);
	/* A disconnected dentry (a memfd's "memfd:name"): its name is all
	 * there is; written below, then stop. Alone it is written as Falco's
	 * driver writes it, without a leading '/' (/proc's links add one). */
	if (parent == d) {
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
	name = hr_kread(d, struct dentry, d_name.name);
	if (!len && !parent && w->pos == HR_PATH_MAX && hr_dpipe_name(w, buf, d))
		return 1;
	pos = w->pos - (__s32)len - 1;
	if (pos < 0) {
		w->flags |= HR_DW_TRUNCATED;
		return 1;
	}
	if (hr_has_cast() && len <= 64)
		hr_dname_words(buf, w->pos, (__u64)name + len);
	else
		bpf_probe_read_kernel(buf + HR_DHEAD + ((pos + 1) & (HR_PATH_MAX - 1)), len, name);
	buf[HR_DHEAD + (pos & (HR_PATH_MAX - 1))] = '/';
	w->pos = pos + ((w->flags & HR_DW_DISCONNECTED) && w->pos == HR_PATH_MAX);
	w->dentry = parent;
	return parent ? 0 : 1;
}

#endif
