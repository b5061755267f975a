/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernels without fs/inode.c's ctime tracepoints (before 6.13): the vfs_*
 * functions that make the changes those tracepoints report fill the same
 * per-task record (inodes.h). fentry where the kernel has BPF trampolines,
 * else kprobes on the same functions; user space loads one set
 * (crates/harrier-fswatch/src/hooks.rs).
 *
 * Entry hooks only. At the call the inodes a syscall changes exist, with the
 * names and parents they have before the change (a rename's before d_move,
 * an unlink's victim still named), as the ctime hooks record them; the one
 * that does not, the inode of a new directory or symlink, is read from its
 * dentry at the syscall's exit (fw_record_new).
 *
 * Why these functions: every path to such a change goes through them
 * (syscalls, io_uring, nfsd, overlayfs, cachefiles), so the caches'
 * invalidation (inval.h) sees what it sees through the ctime hooks, which
 * security_path_* (syscalls only) would not; and the arguments used keep
 * their places from 6.1 to 6.18: only the idmap's type (6.3), vfs_mkdir's
 * return value (6.15) and renamedata's directories (inodes, then parent
 * dentries) changed, so a rename's directories are taken as its two
 * dentries' parents, which the caller holds locked.
 *
 * open(O_CREAT) creates through the file system's ->create or ->atomic_open,
 * not vfs_create: its exit reads the file's FMODE_CREATED instead.
 */
#ifndef HARRIER_FSWATCH_VFS_H
#define HARRIER_FSWATCH_VFS_H

#define FMODE_CREATED_ 0x100000	/* include/linux/fs.h: the same bit from 4.19 to 6.18 */

/* unlink, rmdir: the victim, still named, then its directory. */
static __always_inline void fw_vfs_remove(struct inode *dir, struct dentry *victim)
{
	struct inode *inode;

	victim = HR_CAST(victim, struct dentry);
	inode = HR_RD(victim, d_inode);
	if (inode)
		fw_changed(inode, victim);
	fw_changed(dir, 0);
}

/* mkdir, symlink: the directory now, the new entry's inode at the exit. */
static __always_inline void fw_vfs_create(struct inode *dir, struct dentry *dentry)
{
	struct fw_pending *p = fw_changed(dir, 0);

	/* The first: overlayfs's vfs_mkdir calls vfs_mkdir on its upper layer. */
	if (p && !p->new_dentry)
		p->new_dentry = (__u64)dentry;
}

/* link: the linked inode and the directory; the new name is the inode's
 * newest alias at the exit (plan.h). */
static __always_inline void fw_vfs_link(struct dentry *old, struct inode *dir)
{
	struct inode *inode;

	old = HR_CAST(old, struct dentry);
	inode = HR_RD(old, d_inode);
	if (inode)
		fw_changed(inode, old);
	fw_changed(dir, 0);
}

/* rename: both directories, the moved entry and the one it replaces (or
 * trades places with), as they are before the move. */
static __always_inline void fw_vfs_rename(struct renamedata *rd)
{
	struct dentry *from, *to;
	struct inode *inode;

	rd = HR_CAST(rd, struct renamedata);
	from = HR_CAST(HR_RD(rd, old_dentry), struct dentry);
	to = HR_CAST(HR_RD(rd, new_dentry), struct dentry);
	fw_changed(HR_RD(from, d_parent, d_inode), 0);
	fw_changed(HR_RD(to, d_parent, d_inode), 0);
	inode = HR_RD(from, d_inode);
	if (inode)
		fw_changed(inode, from);
	inode = HR_RD(to, d_inode);
	if (inode)
		fw_changed(inode, to);
}

/* chmod, chown, truncate, utimes by path (by fd they find their file at exit). */
static __always_inline void fw_vfs_setattr(struct dentry *d)
{
	struct inode *inode;

	d = HR_CAST(d, struct dentry);
	inode = HR_RD(d, d_inode);
	if (inode)
		fw_changed(inode, d);
}

/* At a mkdir's or symlink's exit: the new entry's inode, recorded like any
 * other; plan.h's fw_find_new then finds it as with the ctime hooks. */
static __always_inline void fw_record_new(struct fw_pending *p)
{
	struct inode *inode;
	struct dentry *d;

	if (hooks == FW_HOOKS_CTIME || !p || !p->new_dentry)
		return;
	d = HR_CAST(p->new_dentry, struct dentry);
	p->new_dentry = 0;
	inode = HR_RD(d, d_inode);
	if (inode)
		fw_record(p, inode, 0);
}

/* The programs: one fentry and one kprobe per function, the same body.
 * The first argument (user_namespace before 6.3, mnt_idmap since) is unused. */
#define FW_VFS_HOOK(fn, prog, body, ...)                                                                    \
	SEC("fentry/" #fn)                                                                                  \
	int BPF_PROG(fw_f_##prog, __VA_ARGS__)                                                              \
	{                                                                                                   \
		body;                                                                                       \
		return 0;                                                                                   \
	}                                                                                                   \
	SEC("kprobe/" #fn)                                                                                  \
	int BPF_KPROBE(fw_k_##prog, __VA_ARGS__)                                                            \
	{                                                                                                   \
		body;                                                                                       \
		return 0;                                                                                   \
	}

FW_VFS_HOOK(vfs_unlink, unlink, fw_vfs_remove(dir, d), void *idmap, struct inode *dir, struct dentry *d)
FW_VFS_HOOK(vfs_rmdir, rmdir, fw_vfs_remove(dir, d), void *idmap, struct inode *dir, struct dentry *d)
FW_VFS_HOOK(vfs_mkdir, mkdir, fw_vfs_create(dir, d), void *idmap, struct inode *dir, struct dentry *d)
FW_VFS_HOOK(vfs_symlink, symlink, fw_vfs_create(dir, d), void *idmap, struct inode *dir, struct dentry *d)
FW_VFS_HOOK(vfs_link, link, fw_vfs_link(old, dir), struct dentry *old, void *idmap, struct inode *dir)
FW_VFS_HOOK(vfs_rename, rename, fw_vfs_rename(rd), struct renamedata *rd)
FW_VFS_HOOK(notify_change, setattr, fw_vfs_setattr(d), void *idmap, struct dentry *d)

#endif
