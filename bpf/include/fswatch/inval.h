/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * When the verdict and path caches (cache.h) must be invalidated: the ctime
 * hooks see every inode a syscall changes; a directory changed by anything
 * but the syscalls known to leave the tree's shape alone bumps fw_gen, except
 * rename*, which only moves a directory if the moved (or exchanged, or
 * overwritten) entry is one. A rename is "busy" (fw_busy: the caches are
 * neither read nor written) from its first change until its exit; the exit
 * looks at what the recorded inodes' dentries became and bumps unless a
 * file, and only a file, moved. Entries are keyed by directories, whose
 * path, ancestry and identity a file rename leaves alone.
 */
#ifndef HARRIER_FSWATCH_INVAL_H
#define HARRIER_FSWATCH_INVAL_H

#define FW_INVAL_SLOTS 4	/* a rename changes at most 4 inodes: two parents, moved, overwritten */
#define RENAME_EXCHANGE_ 2
#define RENAME_WHITEOUT_ 4

/* An inode a rename changed, and its newest dentry as it was then (before
 * the kernel's d_move, which follows the file system's rename). */
struct fw_islot {
	__u64 inode;
	__u64 dentry;
	__u64 parent;
	__u64 hash_len;	/* the dentry's name: hash and length */
	__u32 is_dir;
	__u32 pad;
};

/* Per task: the rename or rmdir in flight, counted in fw_busy until its exit. */
struct fw_inval {
	__u32 nr;	/* the syscall, 0: none open */
	__u32 n;	/* inodes recorded */
	__u32 over;	/* more than FW_INVAL_SLOTS: the exit bumps */
	__u32 pad;
	struct fw_islot slots[FW_INVAL_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fw_inval);
} invals SEC(".maps");

static __always_inline bool fw_is_rename(long nr)
{
	return nr == 82 || nr == 264 || nr == 316;
}

/* rmdir, unlinkat (AT_REMOVEDIR decides at the hook): the generation goes at
 * the first change and at the exit. */
static __always_inline bool fw_is_rmdir(long nr)
{
	return nr == 84 || nr == 263;
}

/* Opens the record of the syscall in flight (and counts it busy) at its first change. */
static __always_inline struct fw_inval *fw_inval_open(struct task_struct *t, long nr)
{
	struct fw_inval *inv = bpf_task_storage_get(&invals, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (inv && inv->nr != nr) {
		inv->nr = nr;
		inv->n = 0;
		inv->over = 0;
		/* busy before any bump: a walk that sees a later generation
		 * also sees busy and stores nothing (cache.h reads them the
		 * other way round). */
		__sync_fetch_and_add(&fw_busy, 1);
	}
	return inv;
}

/* A rename changed this inode: remember its dentry as it is now. */
static __always_inline void fw_inval_record(struct fw_inval *inv, struct inode *inode, bool dir)
{
	struct hlist_node *first;
	struct fw_islot *s;
	struct dentry *a;
	__u32 n = inv->n;

	for (int i = 0; i < FW_INVAL_SLOTS; i++)
		if (i < n && inv->slots[i].inode == (__u64)inode)
			return;	/* the first change saw it before d_move */
	if (n >= FW_INVAL_SLOTS) {
		inv->over = 1;
		return;
	}
	s = &inv->slots[n & (FW_INVAL_SLOTS - 1)];
	s->inode = (__u64)inode;
	s->is_dir = dir;
	s->dentry = 0;
	s->parent = 0;
	s->hash_len = 0;
	first = FW_RD(inode, i_dentry.first);
	if (first) {
		a = FW_CAST((void *)first - bpf_core_field_offset(struct dentry, d_u), struct dentry);
		s->dentry = (__u64)a;
		s->parent = (__u64)FW_RD(a, d_parent);
		s->hash_len = FW_RD(a, d_name.hash_len);
	}
	inv->n = n + 1;
}

/*
 * A ctime hook saw inode change in task t (regs: its saved registers, NULL
 * for kernel threads and io_uring workers, nr: its syscall). Directories
 * changed outside the syscalls that cannot move or free one bump the
 * generation; a rename's inodes are recorded and judged at its exit.
 */
static __always_inline void fw_vc_changed(struct task_struct *t, struct inode *inode, struct pt_regs *regs,
					  long nr)
{
	struct fw_inval *inv;
	bool dir;

	inode = FW_CAST(inode, struct inode);
	dir = (FW_RD(inode, i_mode) & S_IFMT_) == S_IFDIR_;

	if (!regs) {
		/* No syscall of its own (nfsd, devtmpfs, io_uring): no exit to wait for. */
		if (dir)
			fw_gen_bump();
		return;
	}
	if (fw_is_rename(nr)) {
		inv = fw_inval_open(t, nr);
		if (inv)
			fw_inval_record(inv, inode, dir);
		else
			fw_gen_bump();	/* no record: cannot judge at exit */
		return;
	}
	if (!dir || fw_shape_safe(nr, regs))
		return;
	if (fw_is_rmdir(nr))
		fw_inval_open(t, nr);	/* busy until its exit, which bumps again */
	fw_gen_bump();
}

/*
 * Whether a rename moved a file and nothing else: no recorded directory's
 * dentry moved, was replaced or unhashed, and a recorded non-directory's own
 * dentry was moved (positive evidence that the moved entry is a file: a
 * plain rename only overwrites an entry of the moved one's type, so no
 * directory was removed either). RENAME_EXCHANGE (a file may trade places
 * with a directory) and RENAME_WHITEOUT (overlayfs's; a new inode), a slot
 * overflow, a failed or partial rename: not proven, the caller bumps.
 */
static __always_inline bool fw_rename_kept_dirs(struct task_struct *t, struct fw_inval *inv, long nr)
{
	bool file_moved = false;
	struct pt_regs *regs;
	__u32 n = inv->n;

	if (inv->over)
		return false;
	if (nr == 316) {
		regs = (struct pt_regs *)bpf_task_pt_regs(t);
		if (!regs || (fw_arg(regs, 4) & (RENAME_EXCHANGE_ | RENAME_WHITEOUT_)))
			return false;
	}
	for (int i = 0; i < FW_INVAL_SLOTS; i++) {
		struct fw_islot *s = &inv->slots[i];
		struct hlist_node *first;
		struct inode *inode;
		struct dentry *a;
		bool same, moved;

		if (i >= n)
			break;
		inode = FW_CAST(s->inode, struct inode);
		a = 0;
		first = FW_RD(inode, i_dentry.first);
		if (first)
			a = FW_CAST((void *)first - bpf_core_field_offset(struct dentry, d_u), struct dentry);
		/* The same dentry, still hashed: its place and name now. */
		same = a && (__u64)a == s->dentry && FW_RD(a, d_hash.pprev);
		moved = same && ((__u64)FW_RD(a, d_parent) != s->parent || FW_RD(a, d_name.hash_len) != s->hash_len);
		if (s->is_dir) {
			if (!same || moved)
				return false;
		} else if (moved) {
			file_moved = true;
		}
	}
	return file_moved;
}

/* At a rename's or rmdir's exit (the change is done): bump if a directory
 * moved or went, then let the caches be used again. */
static __always_inline void fw_vc_exit(struct task_struct *t, long nr)
{
	struct fw_inval *inv;

	if (!fw_is_rename(nr) && !fw_is_rmdir(nr))
		return;
	inv = bpf_task_storage_get(&invals, t, 0, 0);
	if (!inv || inv->nr != nr)
		return;
	inv->nr = 0;
	if (!fw_is_rename(nr) || !fw_rename_kept_dirs(t, inv, nr))
		fw_gen_bump();
	__sync_fetch_and_add(&fw_busy, -1);
}

#endif
