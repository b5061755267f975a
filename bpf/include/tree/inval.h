/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * When per-directory cache entries (dircache.h; fswatch's verdicts) stop
 * being valid. The ctime hooks see every inode a syscall changes; a
 * directory changed by anything but the syscalls known to leave the tree's
 * shape alone bumps hr_tree_gen, except rename*, which only moves a
 * directory if the moved (or exchanged, or overwritten) entry is one. A
 * rename is "busy" (hr_tree_busy: the caches are neither read nor written)
 * from its first change until its exit; the exit looks at what the recorded
 * inodes' dentries became and bumps unless a file, and only a file, moved.
 * Entries are keyed by directories, whose path, ancestry and identity a
 * file rename leaves alone. The object that includes this attaches the
 * hooks: hr_tree_changed from every ctime change, hr_tree_exit at the exits
 * of rename*, rmdir and unlinkat.
 */
#ifndef HARRIER_TREE_INVAL_H
#define HARRIER_TREE_INVAL_H

/* Bumped (atomically) by the invalidations above; user space never writes them. */
__u64 hr_tree_gen = 1;
__s64 hr_tree_busy = 0;

static __always_inline void hr_tree_bump(void)
{
	__sync_fetch_and_add(&hr_tree_gen, 1);
}

#define HR_INVAL_SLOTS 4	/* a rename changes at most 4 inodes: two parents, moved, overwritten */
#define RENAME_EXCHANGE_ 2
#define RENAME_WHITEOUT_ 4

/* An inode a rename changed, and its newest dentry as it was then (before
 * the kernel's d_move, which follows the file system's rename). */
struct hr_islot {
	__u64 inode;
	__u64 dentry;
	__u64 parent;
	__u64 hash_len;	/* the dentry's name: hash and length */
	__u32 is_dir;
	__u32 pad;
};

/* Per task: the rename or rmdir in flight, counted in hr_tree_busy until its exit. */
struct hr_inval {
	__u32 nr;	/* the syscall, 0: none open */
	__u32 n;	/* inodes recorded */
	__u32 over;	/* more than HR_INVAL_SLOTS: the exit bumps */
	__u32 pad;
	struct hr_islot slots[HR_INVAL_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct hr_inval);
} hr_invals SEC(".maps");

static __always_inline bool hr_tree_is_rename(long nr)
{
	return nr == 82 || nr == 264 || nr == 316;
}

/* rmdir, unlinkat (AT_REMOVEDIR decides at the hook): the generation goes at
 * the first change and at the exit. */
static __always_inline bool hr_tree_is_rmdir(long nr)
{
	return nr == 84 || nr == 263;
}

/* Opens the record of the syscall in flight (and counts it busy) at its first change. */
static __always_inline struct hr_inval *hr_inval_open(struct task_struct *t, long nr)
{
	struct hr_inval *inv = bpf_task_storage_get(&hr_invals, t, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);

	if (inv && inv->nr != nr) {
		inv->nr = nr;
		inv->n = 0;
		inv->over = 0;
		/* busy before any bump: a walk that sees a later generation
		 * also sees busy and stores nothing (cache.h reads them the
		 * other way round). */
		__sync_fetch_and_add(&hr_tree_busy, 1);
	}
	return inv;
}

/* A rename changed this inode: remember its dentry as it is now. */
static __always_inline void hr_inval_record(struct hr_inval *inv, struct inode *inode, bool dir)
{
	struct hlist_node *first;
	struct hr_islot *s;
	struct dentry *a;
	__u32 n = inv->n;

	for (int i = 0; i < HR_INVAL_SLOTS; i++)
		if (i < n && inv->slots[i].inode == (__u64)inode)
			return;	/* the first change saw it before d_move */
	if (n >= HR_INVAL_SLOTS) {
		inv->over = 1;
		return;
	}
	s = &inv->slots[n & (HR_INVAL_SLOTS - 1)];
	s->inode = (__u64)inode;
	s->is_dir = dir;
	s->dentry = 0;
	s->parent = 0;
	s->hash_len = 0;
	first = HR_RD(inode, i_dentry.first);
	if (first) {
		a = HR_CAST((void *)first - bpf_core_field_offset(struct dentry, d_u), struct dentry);
		s->dentry = (__u64)a;
		s->parent = (__u64)HR_RD(a, d_parent);
		s->hash_len = HR_RD(a, d_name.hash_len);
	}
	inv->n = n + 1;
}

/* The syscalls that change directories' ctimes but never move or free one
 * (x86_64 numbers; anything else changing a directory invalidates). */
static __always_inline bool hr_tree_shape_safe(long nr, struct pt_regs *regs)
{
	switch (nr) {
	case 2: case 85: case 257: case 437:		/* open, creat, openat, openat2 */
	case 83: case 258: case 133: case 259:		/* mkdir(at), mknod(at) */
	case 86: case 265: case 88: case 266:		/* link(at), symlink(at) */
	case 87:					/* unlink */
	case 90: case 91: case 268: case 452:		/* chmod family */
	case 92: case 93: case 94: case 260:		/* chown family */
	case 132: case 235: case 261: case 280:		/* utime family */
	case 188: case 189: case 190: case 197: case 198: case 199: case 463: case 466: /* xattrs */
	case 49:					/* bind (a unix socket's node) */
		return true;
	/* Not ioctl: btrfs deletes subvolumes with one. */
	case 263:					/* unlinkat: not with AT_REMOVEDIR */
		return !(hr_reg_arg(regs, 2) & HR_AT_REMOVEDIR);
	}
	return false;
}

/*
 * A ctime hook saw inode change in task t (regs: its saved registers, NULL
 * for kernel threads and io_uring workers, nr: its syscall). Directories
 * changed outside the syscalls that cannot move or free one bump the
 * generation; a rename's inodes are recorded and judged at its exit.
 */
static __always_inline void hr_tree_changed(struct task_struct *t, struct inode *inode, struct pt_regs *regs,
					  long nr)
{
	struct hr_inval *inv;
	bool dir;

	inode = HR_CAST(inode, struct inode);
	dir = (HR_RD(inode, i_mode) & HR_S_IFMT) == HR_S_IFDIR;

	if (!regs) {
		/* No syscall of its own (nfsd, devtmpfs, io_uring): no exit to wait for. */
		if (dir)
			hr_tree_bump();
		return;
	}
	if (hr_tree_is_rename(nr)) {
		inv = hr_inval_open(t, nr);
		if (inv)
			hr_inval_record(inv, inode, dir);
		else
			hr_tree_bump();	/* no record: cannot judge at exit */
		return;
	}
	if (!dir || hr_tree_shape_safe(nr, regs))
		return;
	if (hr_tree_is_rmdir(nr))
		hr_inval_open(t, nr);	/* busy until its exit, which bumps again */
	hr_tree_bump();
}

#define HR_TREE_NO_SYSCALL (0x00200000 | 0x00000010)	/* PF_KTHREAD, PF_IO_WORKER */

/* hr_tree_changed for the current task, from a ctime hook. */
static __always_inline void hr_tree_changed_now(struct inode *inode)
{
	struct task_struct *t = bpf_get_current_task_btf();
	struct pt_regs *regs = 0;
	long nr = -1;

	/* Kernel threads and io_uring workers make no syscall of their own. */
	if (!(t->flags & HR_TREE_NO_SYSCALL))
		regs = (struct pt_regs *)bpf_task_pt_regs(t);
	if (regs)
		nr = regs->orig_ax;
	hr_tree_changed(t, inode, regs, nr);
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
static __always_inline bool hr_rename_kept_dirs(struct task_struct *t, struct hr_inval *inv, long nr)
{
	bool file_moved = false;
	struct pt_regs *regs;
	__u32 n = inv->n;

	if (inv->over)
		return false;
	if (nr == 316) {
		regs = (struct pt_regs *)bpf_task_pt_regs(t);
		if (!regs || (hr_reg_arg(regs, 4) & (RENAME_EXCHANGE_ | RENAME_WHITEOUT_)))
			return false;
	}
	for (int i = 0; i < HR_INVAL_SLOTS; i++) {
		struct hr_islot *s = &inv->slots[i];
		struct hlist_node *first;
		struct inode *inode;
		struct dentry *a;
		bool same, moved;

		if (i >= n)
			break;
		inode = HR_CAST(s->inode, struct inode);
		a = 0;
		first = HR_RD(inode, i_dentry.first);
		if (first)
			a = HR_CAST((void *)first - bpf_core_field_offset(struct dentry, d_u), struct dentry);
		/* The same dentry, still hashed: its place and name now. */
		same = a && (__u64)a == s->dentry && HR_RD(a, d_hash.pprev);
		moved = same && ((__u64)HR_RD(a, d_parent) != s->parent || HR_RD(a, d_name.hash_len) != s->hash_len);
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
static __always_inline void hr_tree_exit(struct task_struct *t, long nr)
{
	struct hr_inval *inv;

	if (!hr_tree_is_rename(nr) && !hr_tree_is_rmdir(nr))
		return;
	inv = bpf_task_storage_get(&hr_invals, t, 0, 0);
	if (!inv || inv->nr != nr)
		return;
	inv->nr = 0;
	if (!hr_tree_is_rename(nr) || !hr_rename_kept_dirs(t, inv, nr))
		hr_tree_bump();
	__sync_fetch_and_add(&hr_tree_busy, -1);
}

#endif
