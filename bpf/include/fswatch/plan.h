/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which recorded inodes are the new, removed or moved entry: matched by
 * parent, since one syscall changes both an entry and its directory.
 */
#ifndef HARRIER_FSWATCH_PLAN_H
#define HARRIER_FSWATCH_PLAN_H

/* The changed inode whose current dentry's parent also changed: the new entry. */
static __always_inline struct dentry *fw_find_new(struct fw_pending *p)
{
	__u32 n = p->nslots;

	for (int i = 0; i < FW_SLOTS; i++) {
		struct dentry *a;
		__u64 pi;

		if (i >= n)
			break;
		a = fw_alias((struct inode *)p->slots[i].inode);
		if (!a)
			continue;
		pi = (__u64)BPF_CORE_READ(a, d_parent, d_inode);
		for (int j = 0; j < FW_SLOTS; j++)
			if (j < n && j != i && p->slots[j].inode == pi)
				return a;
	}
	return 0;
}

/* The changed inode whose parent, when it changed, also changed: the entry
 * removed or (`moved`: still named at exit) moved. When one of a rename's
 * directories is the other's child (w/d/f to w/g, w/f to w/d/g), that
 * child looks the same: the entry is then the one whose parent is another
 * one at exit (d_move has run), if any. */
static __always_inline int fw_find_gone(struct fw_pending *p, bool moved, int *dir)
{
	__u32 n = p->nslots;
	int first = -1, first_dir = 0;

	for (int i = 0; i < FW_SLOTS; i++) {
		struct dentry *a = 0;
		__u64 pi;

		if (i >= n)
			break;
		pi = p->slots[i].parent_inode;
		if (!pi)
			continue;
		if (moved) {
			a = fw_alias((struct inode *)p->slots[i].inode);
			if (!a || !fw_hashed(a))
				continue;
		}
		for (int j = 0; j < FW_SLOTS; j++)
			if (j < n && j != i && p->slots[j].inode == pi) {
				if (!moved || (__u64)BPF_CORE_READ(a, d_parent, d_inode) != pi) {
					*dir = j;
					return i;
				}
				if (first < 0) {
					first = i;
					first_dir = j;
				}
			}
	}
	*dir = first_dir;
	return first;
}

#endif
