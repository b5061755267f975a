/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * fswatch's maps and per-CPU state: the walk, the mount scan and the event
 * plan live in the per-CPU map (not the stack) so that bpf_loop callbacks
 * and global functions can share them.
 */
#ifndef HARRIER_FSWATCH_STATE_H
#define HARRIER_FSWATCH_STATE_H

#define FW_PATHBUF (FW_PATH_MAX + HR_DC_MAX)	/* room past FW_PATH_MAX for masked copies */
_Static_assert(FW_PATH_MAX == HR_PATH_MAX && HR_DC_MAX >= HR_DHEAD, "tree/walk.h's buffer layout");

/* Path buffer b of this CPU (struct fw_cpu), and the same as a walk sees it
 * (tree/walk.h): HR_DHEAD bytes before it, the head of the array for buffer
 * 0, the end of buffer 0's slack for buffer 1. */
#define FW_WBUF(c, b) ((c)->path + ((b) & 1) * FW_PATHBUF)
#define FW_BUF(c, b) (FW_WBUF(c, b) + HR_DHEAD)

/* Where a dentry walk is (fw_walk_step); in the per-CPU map, not the stack,
 * so bpf_loop verifies in one pass whatever the depth. */
struct fw_walk {
	__u64 dentry;
	__u64 mnt;	/* struct mount * */
	__u64 root_mnt;	/* the task's root (mount, dentry): the walk stops there; one */
	__u64 root_dentry;	/* ending at a top mount instead is detached */
	__s32 pos;	/* start of the path so far, counting down from FW_PATH_MAX */
	__u32 buf;	/* which path buffer */
	__u32 depth;	/* names climbed */
	__u32 flags;
	__u32 watched;
	__u32 check;	/* the watch check only: no names, stop at the first watched inode */
	__u32 inline_left;	/* fragments: the leaf's name still to go into the event */
	__u32 pkey_set;
	__u32 at_root;	/* the climb ended at the task's root */
	__u32 cacheable;	/* no dentry climbed can change behind the kernel's back */
	struct fw_fkey pkey;	/* fragments: the key of the leaf's directory */
};

/*
 * What one event is made of: filled by the exit handler (what to walk),
 * completed by fw_path (results), written by fw_emit. In the per-CPU map so
 * that fw_path and fw_emit can be global functions, verified once each.
 */
struct fw_plan {
	__u64 dentry[2];	/* walk from here (the parent, when a name is put first) */
	__u64 mnt[2];		/* the mount: a struct file's, or picked (once, by the first pass) */
	__u32 mnt_flags[2];	/* how the mount was picked (FW_F_MOUNT_GUESS...) */
	__u64 hint;		/* struct mount * the syscall's path started from (mount.h: fw_plan_hint) */
	__s8 hint_path;		/* for it, when wanted: the path and dirfd arguments (struct fw_sys) */
	__s8 hint_dirfd;
	__u8 hint_want;		/* an entry by path: the hint can be worked out if several mounts need it */
	__u8 hint_pad[5];
	__s32 name_slot[2];	/* a recorded name to put first, or -1 */
	__u32 extra[2];		/* flags to add */
	/* results */
	__u32 flags;
	__u32 dev;
	__u32 mnt_id;
	__u32 watched;
	__u64 ino;
	__s32 pos[2];		/* start of each path; -1: no such path */
	__u32 watched_b[2];	/* per path */
	struct fw_fkey pkey[2];	/* fragments: per path, its directory's key */
	/* ringbuf and single-fragment: how each path goes out (dirrefs.h) */
	__u32 how[2];		/* FW_HOW_* */
	__u32 dref[2][2];	/* FW_HOW_DREF: the reader's (slot, ver) */
	struct fw_teach teach[2];	/* FW_HOW_TEACH */
};

enum fw_how {
	FW_HOW_PLAIN = 0,	/* the mode's own form */
	FW_HOW_DREF = 1,	/* the directory by reference to the reader's cache, then the leaf */
	FW_HOW_TEACH = 2,	/* the whole path inline, which the reader may cache */
};

/* A scan of the mounts of one super block (fw_mount_for). */
#define FW_CANDS 4

struct fw_mscan {
	__u64 m;
	__u64 head;	/* an old kernel's list head (mount.h), else 0 */
	__u64 ns;
	__u64 sroot;
	__u64 first;	/* the first in the task's namespace */
	__u64 whole;	/* the first there that shows the whole file system */
	__u64 count;
	__u64 mnts[FW_CANDS];	/* candidates and their roots */
	__u64 roots[FW_CANDS];
	__u64 d;	/* the ancestor climb */
	__u64 hint_root;	/* the hint's root, if the hint is a candidate */
	__s32 deepest;	/* first candidate root met climbing, or -1 */
	__u32 hint_seen;	/* the hint's root was met */
};

struct fw_cpu {
	struct fw_stats stats;
	struct fw_walk walk;
	struct fw_mscan mscan;
	struct fw_plan plan;
	__u8 path[HR_DHEAD + 2 * FW_PATHBUF];	/* two path buffers (one array: the skeleton's types need it) */
	__u64 frag_seq;	/* single-fragment: paths this CPU has put in its path ring */
	struct fw_fkey fkey;	/* fragments: the key being written, and its value */
	struct fw_frag frag;
	struct hr_dcval pval;	/* a path cache entry being written */
};

HR_CPU_STATE_MAP(struct fw_cpu);

/* A one-bit-per-hash summary of `watched` (fw_watch_bit): the ancestor climb
 * tests a bit with one load and looks the hash map up only on a hit, so a
 * climb outside the watched paths makes no map lookup at all. Set by user
 * space with each watched entry, and here by --follow. */
#define FW_WATCH_BITS 8192
__u64 watch_bits[FW_WATCH_BITS / 64];

static __always_inline __u32 fw_watch_bit(__u32 dev, __u64 ino)
{
	return ((ino ^ ((__u64)dev << 32)) * 0x9E3779B97F4A7C15ULL) >> 51;	/* 13 bits */
}

/* Per-CPU rings (struct hr_aring), entry i for CPU i; user space sizes them. */
HR_ARINGS_MAP;

/* single-fragment: per-CPU path rings (struct hr_aring, head only: nobody
 * waits for the reader), entry i for CPU i, as large as the event rings;
 * mmapped and sized by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(key_size, 4);
	__uint(value_size, HR_ARING_DATA + 65536);
	__uint(max_entries, 1);
} frags SEC(".maps");

/* fragments: directory (dev, mount id, inode) → (parent, name). User space
 * sets max_entries (1 in the other modes). LRU: an evicted directory makes
 * the paths through it unresolved, counted by the reader. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, FW_FRAGS_MAX);
	__type(key, struct fw_fkey);
	__type(value, struct fw_frag);
} fragments SEC(".maps");

/* Watched inodes: (kernel dev_t, inode number), never the inode alone. */
struct fw_key {
	__u32 dev;
	__u32 pad;
	__u64 ino;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct fw_key);
	__type(value, __u32);
} watched SEC(".maps");

/* An inode whose ctime changed during the syscall in flight. */
struct fw_slot {
	__u64 inode;
	__u64 parent_inode;	/* its first dentry's parent's inode, when it changed */
	__u64 ino;
	__u32 dev;
	__u16 name_len;
	__u8 is_dir;
	__u8 pad;
	char name[FW_NAME_MAX];	/* its first dentry's name, when it changed */
};

/* The syscall in flight, per task: opened by its first ctime change (or
 * vfs_* call), closed at its exit. */
struct fw_pending {
	__u32 nr;
	__u8 nslots;
	__u8 pad;
	__u16 pad2;
	/* vfs.h: the dentry vfs_mkdir or vfs_symlink was asked to create; its
	 * inode exists only after the call, so the exit records it. */
	__u64 new_dentry;
	struct fw_slot slots[FW_SLOTS];
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct fw_pending);
} pending SEC(".maps");

#define PF_IO_WORKER_ 0x00000010
#define PF_KTHREAD_ 0x00200000

static __always_inline bool fw_tgid_ok(struct task_struct *t)
{
	return !filter_tgid || t->tgid == filter_tgid;
}

static __always_inline struct fw_cpu *fw_cpu_get(void)
{
	return HR_CPU_STATE();
}

#endif
