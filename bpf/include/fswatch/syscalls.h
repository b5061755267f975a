/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which syscalls fswatch reports (x86_64 numbers), as what event kind, and
 * how each finds its kernel objects; their arguments from pt_regs.
 */
#ifndef HARRIER_FSWATCH_SYSCALLS_H
#define HARRIER_FSWATCH_SYSCALLS_H

/* How an event finds its objects. */
enum fw_class {
	FW_C_NONE = 0,
	FW_C_FD_RET,	/* the file behind the returned fd (open) */
	FW_C_FD_ARG,	/* the file behind fd argument 0 (write, fchmod) */
	FW_C_NEW,	/* a new entry: the changed inode whose dentry's parent also changed */
	FW_C_GONE,	/* a removed entry: the changed inode's old name in its changed parent */
	FW_C_MOVE,	/* rename: old name in the old parent, new dentry */
	FW_C_ATTR,	/* the one changed inode */
};

struct fw_sys {
	__u8 kind;	/* FW_EV_* */
	__u8 cls;	/* fw_class */
	__s8 path;	/* index of the (target) path argument, -1: none */
	__s8 dirfd;	/* index of its dirfd argument, -1: relative to the cwd */
};

#define AT_FDCWD_ -100

/* x86_64 syscall numbers. */
static __always_inline struct fw_sys fw_sys_of(long nr)
{
	struct fw_sys s = { 0, 0, -1, -1 };

	switch (nr) {
	case 2: /* open */
	case 85: /* creat */
		s = (struct fw_sys){ FW_EV_OPEN, FW_C_FD_RET, 0, -1 };
		break;
	case 257: /* openat */
	case 437: /* openat2 */
		s = (struct fw_sys){ FW_EV_OPEN, FW_C_FD_RET, 1, 0 };
		break;
	case 1: /* write */
	case 18: /* pwrite64 */
	case 20: /* writev */
	case 296: /* pwritev */
	case 328: /* pwritev2 */
		s = (struct fw_sys){ FW_EV_MODIFY, FW_C_FD_ARG, -1, -1 };
		break;
	case 91: /* fchmod */
	case 93: /* fchown */
	case 77: /* ftruncate */
		s = (struct fw_sys){ FW_EV_SETATTR, FW_C_FD_ARG, -1, -1 };
		break;
	case 83: /* mkdir */
		s = (struct fw_sys){ FW_EV_MKDIR, FW_C_NEW, 0, -1 };
		break;
	case 258: /* mkdirat */
		s = (struct fw_sys){ FW_EV_MKDIR, FW_C_NEW, 1, 0 };
		break;
	case 86: /* link */
	case 88: /* symlink */
		s = (struct fw_sys){ FW_EV_LINK, FW_C_NEW, 1, -1 };
		break;
	case 265: /* linkat */
		s = (struct fw_sys){ FW_EV_LINK, FW_C_NEW, 3, 2 };
		break;
	case 266: /* symlinkat */
		s = (struct fw_sys){ FW_EV_LINK, FW_C_NEW, 2, 1 };
		break;
	case 87: /* unlink */
		s = (struct fw_sys){ FW_EV_UNLINK, FW_C_GONE, 0, -1 };
		break;
	case 84: /* rmdir */
		s = (struct fw_sys){ FW_EV_RMDIR, FW_C_GONE, 0, -1 };
		break;
	case 263: /* unlinkat: rmdir with AT_REMOVEDIR, fixed up by the caller */
		s = (struct fw_sys){ FW_EV_UNLINK, FW_C_GONE, 1, 0 };
		break;
	case 82: /* rename */
		s = (struct fw_sys){ FW_EV_RENAME, FW_C_MOVE, 1, -1 };
		break;
	case 264: /* renameat */
	case 316: /* renameat2 */
		s = (struct fw_sys){ FW_EV_RENAME, FW_C_MOVE, 3, 2 };
		break;
	case 90: /* chmod */
	case 92: /* chown */
	case 94: /* lchown */
	case 76: /* truncate */
	case 132: /* utime */
	case 235: /* utimes */
		s = (struct fw_sys){ FW_EV_SETATTR, FW_C_ATTR, 0, -1 };
		break;
	case 268: /* fchmodat */
	case 452: /* fchmodat2 */
	case 260: /* fchownat */
	case 261: /* futimesat */
	case 280: /* utimensat: by fd when the path is NULL, fixed up at exit */
		s = (struct fw_sys){ FW_EV_SETATTR, FW_C_ATTR, 1, 0 };
		break;
	}
	/* unlinkat is an rmdir too: kept if either is selected (the exit
	 * decides which it is, then checks again). */
	if (s.kind && !(event_mask & (1u << s.kind)) &&
	    !(nr == 263 && (event_mask & (1u << FW_EV_RMDIR))))
		s.kind = 0;
	return s;
}

/* An argument index the verifier can bound. */
static __always_inline __u32 fw_idx(__s8 i)
{
	__u32 v = i < 0 ? 0 : i;

	return v > 5 ? 5 : v;
}

#endif
