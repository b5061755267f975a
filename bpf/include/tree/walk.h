/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One step of a walk up the dentry tree, the same for every path Harrier
 * builds (capture's and the rules' in dpath.h, fswatch's in fswatch/walk.h):
 * where the step from (dentry, mount) leads, and the name it writes in front
 * of the path built so far. Each walker adds only what is its own (capture:
 * pipes, what may be cached; fswatch: the watch check, fragments).
 */
#ifndef HARRIER_TREE_WALK_H
#define HARRIER_TREE_WALK_H

#include "tree.h"

/* Where one step from a dentry leads. */
enum hr_up {
	HR_UP_ROOT,		/* the task's root: the walk is over */
	HR_UP_DETACHED,		/* the top of a mount tree that is not the task's: over */
	HR_UP_MOUNT,		/* a mount's root: now at its mountpoint, in the parent mount */
	HR_UP_NAME,		/* a name, then on to its parent */
	HR_UP_OWN_ROOT,		/* its own parent: a file system's root no mount shows here
				 * (memfd:, an fd from open_by_handle), or the wrong mount */
};

/*
 * The step from (*d, *m) with the task's root at (root_d, root_m): on
 * HR_UP_MOUNT, *d and *m become the mountpoint and the parent mount; on a
 * name, *parent is the dentry above. m may be 0 (a hook that has no mount):
 * no mount is then crossed.
 */
static __always_inline enum hr_up hr_up(__u64 *d, __u64 *m, __u64 root_d, __u64 root_m, __u64 *parent)
{
	__u64 dd = *d, mm = *m, up;

	if (dd == root_d && mm == root_m)
		return HR_UP_ROOT;
	if (mm && dd == (__u64)hr_kread(mm, struct mount, mnt.mnt_root)) {
		up = (__u64)hr_kread(mm, struct mount, mnt_parent);
		if (up == mm)
			return HR_UP_DETACHED;
		*d = (__u64)hr_kread(mm, struct mount, mnt_mountpoint);
		*m = up;
		return HR_UP_MOUNT;
	}
	up = (__u64)hr_kread(dd, struct dentry, d_parent);
	*parent = up;
	return up == dd ? HR_UP_OWN_ROOT : HR_UP_NAME;
}

/*
 * A walk's buffer: HR_DHEAD bytes (harrier.h) before the path's
 * HR_PATH_MAX, the path filled from its end. The head is room for
 * hr_dname_words' window below the path built so far.
 *
 * A name of up to 64 bytes is copied with plain loads and stores instead of
 * a helper call (~20 ns each here): the last two, four or eight words of the
 * 64 bytes that end where the name ends (as many as its length needs),
 * stored so they end at path offset `end`. The bytes read
 * before the name belong to the object that holds it (a dentry's inline
 * name, an external_name's header) or are 0 (a plain load that faults reads
 * 0); they land below the path built so far, where the next name goes.
 * new_utsname serves as a kernel type that is a plain byte array
 * (sysname[65]): the verifier lets a load fall anywhere inside an array.
 */
static __always_inline void hr_dname_words(__u8 *buf, __u64 end, __u64 name_end, __u32 len)
{
	const __u64 *src = (const __u64 *)bpf_core_cast((void *)(name_end - 64), struct new_utsname)->sysname;
	__u64 *dst;

	hr_clamp(end, HR_PATH_MAX);
	dst = (__u64 *)(buf + end); /* path offset end - 64 */
	dst[7] = src[7];
	dst[6] = src[6];
	if (len <= 16)
		return;
	dst[5] = src[5];
	dst[4] = src[4];
	if (len <= 32)
		return;
	dst[3] = src[3];
	dst[2] = src[2];
	dst[1] = src[1];
	dst[0] = src[0];
}

/* "/" + the len bytes at kernel address name, in front of the path that
 * starts at pos in buf. The new start, or -1: no room (nothing written). */
static __always_inline __s32 hr_put_dname(__u8 *buf, __s32 pos, __u64 name, __u32 len)
{
	__s32 at;

	len &= 255;
	at = pos - (__s32)len - 1;
	if (at < 0)
		return -1;
	if (hr_has_cast() && len <= 64)
		hr_dname_words(buf, pos, name + len, len);
	else
		bpf_probe_read_kernel(buf + HR_DHEAD + ((at + 1) & (HR_PATH_MAX - 1)), len, (void *)name);
	buf[HR_DHEAD + (at & (HR_PATH_MAX - 1))] = '/';
	return at;
}

#endif
