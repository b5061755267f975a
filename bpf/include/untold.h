/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Descriptors user space was never told of. An open the kernel filter keeps
 * back leaves user space without its fd, so the close of that fd is of no use
 * there either: it is kept back too (kfilter.h, a close's `untold`), which
 * spares most closes their clock read, ring room and user-space work.
 *
 * Per process (tgid), one bit per fd below HR_UNTOLD_FDS: set when an open
 * that returned the fd is kept back, cleared by the close of the fd and by any
 * sent event that gives user space the fd (a kept open, socket, dup, or a
 * connect on it, which describes the socket). A set
 * bit therefore always names an fd user space has no entry for. Only the
 * processes user space follows have an entry: it writes an empty one once its
 * table of a process is made (fork, /proc), so that what /proc showed it is
 * never a set bit, and deletes it when the process is gone. Whatever cannot
 * be followed exactly empties the record (exec's close-on-exec, close_range,
 * pipe and socketpair's fds in user memory) or keeps the close (a thread with
 * an fd table of its own, fds past HR_UNTOLD_FDS): a close sent is never wrong.
 * A record another process of the same pid left (user space not yet past its
 * exit) is emptied by the new one's first use: it names its owner by start time.
 * The records are an array's slots by tgid (an inlined lookup, ~5 ns, where a
 * hash's cost ~45 here, and every open, close and socket makes one): a
 * process whose slot another followed process holds is not followed, and
 * all its closes are sent.
 * Layout mirrored in crates/harrier-capture/src/untold.rs.
 */
#ifndef HARRIER_UNTOLD_H
#define HARRIER_UNTOLD_H

#define HR_UNTOLD_WORDS 16
#define HR_EINPROGRESS 115
#define HR_UNTOLD_FDS (HR_UNTOLD_WORDS * 64)

struct hr_untold {
	__u32 tgid;		/* the process user space follows here (0: none) */
	__u32 pad;
	__u64 start;		/* its process's start time (0: the first to come) */
	__u64 files;		/* the fd table the bits are of */
	__u64 w[HR_UNTOLD_WORDS];
};

/* Slots: a power of two (user space sizes the array, 1 slot if the kernel
 * filter is off); a tgid's slot is tgid & untold_mask. */
const volatile __u32 untold_mask = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hr_untold);
} untold SEC(".maps");

/* The record of process tgid, if user space follows it. */
static __always_inline struct hr_untold *hr_untold_slot(__u32 tgid)
{
	__u32 i = tgid & untold_mask;
	struct hr_untold *u = bpf_map_lookup_elem(&untold, &i);

	return u && u->tgid == tgid ? u : 0;
}

/* x86_64 numbers of the syscalls whose return value is a new fd of the caller's. */
static __always_inline bool hr_returns_fd(__u32 nr)
{
	switch (nr) {
	case 2: case 85: case 257: case 437:		/* open creat openat openat2 */
	case 41: case 43: case 288:			/* socket accept accept4 */
	case 32: case 33: case 292: case 72:		/* dup dup2 dup3 fcntl (F_DUPFD) */
	case 319: case 284: case 290: case 282: case 289: /* memfd_create eventfd(2) signalfd(4) */
	case 283: case 253: case 294: case 213: case 291: /* timerfd_create inotify_init(1) epoll_create(1) */
		return true;
	}
	return false;
}

/* Syscalls that make or close fds the record cannot follow one by one. */
static __always_inline bool hr_fds_elsewhere(__u32 nr)
{
	return nr == 22 || nr == 293 || nr == 53 || nr == 436; /* pipe pipe2 socketpair close_range */
}

static __always_inline void hr_untold_clear(struct hr_untold *u)
{
	for (int i = 0; i < HR_UNTOLD_WORDS; i++)
		u->w[i] = 0;
}

/* The word of fd's bit. The mask stays in the code: with the bounds checks
 * before it, clang drops it, and 6.1's verifier, which keeps a range it
 * cannot reach there, then finds the offset unbounded. */
static __always_inline __u64 *hr_untold_word(struct hr_untold *u, __u64 fd)
{
	__u32 i = fd >> 6;

	barrier_var(i);
	return &u->w[i & (HR_UNTOLD_WORDS - 1)];
}

/* The record of task t's process, if user space follows it and t shares the
 * fd table its bits are of. */
static __always_inline struct hr_untold *hr_untold_of(struct task_struct *t)
{
	struct hr_untold *u = hr_untold_slot(t->tgid);
	__u64 start = t->group_leader->start_time, files = (__u64)t->files;

	if (!u)
		return 0;
	if (u->start != start) {
		/* Its first use since written or emptied, or a process that
		 * took the pid of one user space has not yet seen exit. */
		if (u->start)
			hr_untold_clear(u);
		u->start = start;
		u->files = files;
	} else if (u->files != files) {
		return 0;
	}
	return u;
}

/* Clears bit m of *w; whether it was set. A clear bit is only read (most
 * sent fds and closes find theirs clear; the locked `and` costs more). A bit
 * another thread sets after that read is a later fd's of the same number,
 * kept back after this one's close: it must stay set. */
static __always_inline bool hr_untold_unset(__u64 *w, __u64 m)
{
	if (!(*(volatile __u64 *)w & m))
		return false;
	return __sync_fetch_and_and(w, ~m) & m;
}

static __always_inline void hr_untold_empty(struct task_struct *t)
{
	struct hr_untold *u = hr_untold_slot(t->tgid);

	if (!u)
		return;
	u->start = 0;
	hr_untold_clear(u);
}

/* An event of syscall nr with return value ret was kept back. fcntl returns
 * an fd only for F_DUPFD(_CLOEXEC); its other commands return 0, flags or an
 * owner, which must never mark an fd (its close would be kept back). */
static __always_inline void hr_untold_kept_back(struct task_struct *t, __u32 nr, __s64 ret)
{
	struct hr_untold *u;

	if (!kf_enabled || !hr_returns_fd(nr) || nr == 72 || ret < 0 || ret >= HR_UNTOLD_FDS)
		return;
	if ((u = hr_untold_of(t)))
		__sync_fetch_and_or(hr_untold_word(u, ret), 1ULL << (ret & 63));
}

/* An event of syscall nr with return value ret was sent: user space now has
 * the fd it returned (or fds this record cannot follow). */
static __always_inline void hr_untold_sent(struct task_struct *t, __u32 nr, __s64 ret)
{
	struct hr_untold *u;

	if (!kf_enabled || (ret < 0 && nr != 42))
		return;
	if (hr_fds_elsewhere(nr)) {
		hr_untold_empty(t);
		return;
	}
	/* A connect, failed or not, describes its socket (events.tbl's
	 * socktype): user space makes the entry of a socket() kept back, so its
	 * close must be sent. */
	if (nr == 42) {
		__u64 fd = hr_regs_of(t)->di;

		if (fd < HR_UNTOLD_FDS && (u = hr_untold_of(t)))
			hr_untold_unset(hr_untold_word(u, fd), 1ULL << (fd & 63));
		return;
	}
	if (!hr_returns_fd(nr) || ret >= HR_UNTOLD_FDS)
		return;
	if ((u = hr_untold_of(t)))
		hr_untold_unset(hr_untold_word(u, ret), 1ULL << (ret & 63));
}

/* Whether user space was never told of fd (its bit is set). */
static __always_inline bool hr_untold_is(struct task_struct *t, __s64 fd)
{
	struct hr_untold *u;

	if (fd < 0 || fd >= HR_UNTOLD_FDS || !(u = hr_untold_of(t)))
		return false;
	return (*(volatile __u64 *)hr_untold_word(u, fd) >> (fd & 63)) & 1;
}

/* fd was closed: true if user space was never told of it (its bit, now clear).
 * The close released the number before its exit: another thread may hold it
 * again already, made by an open or socket() kept back since, whose bit this
 * is. Then the bit stays, and the close is sent (never wrong: it ends the
 * entry user space may have of the fd closed). */
static __always_inline bool hr_untold_closed(struct task_struct *t, __u64 fd)
{
	struct hr_untold *u;
	__u64 *w, m = 1ULL << (fd & 63);

	if (fd >= HR_UNTOLD_FDS || !(u = hr_untold_of(t)))
		return false;
	w = hr_untold_word(u, fd);
	if (!(*(volatile __u64 *)w & m) || hr_fd_file_of(t, fd))
		return false;
	return hr_untold_unset(w, m);
}

#endif
