// SPDX-License-Identifier: Apache-2.0
/*
 * libharrier-bypass.so: getpid(), gettid(), getppid(), getuid(), geteuid(),
 * getgid(), getegid() answered from a read-only BPF array that `harrier bypass
 * start` keeps current, without a system call. Plain C, libc only.
 *
 * Use: LD_PRELOAD, /etc/ld.so.preload, or link with -Wl,--wrap=getpid (etc.)
 * against this library. See README.md for the design.
 *
 * Rule: whenever a cached value could be wrong, call the real system call.
 *
 * Per call the fast path checks, all in user memory:
 *   - the thread has a slot (TLS pointer), its nonce is the slot's nonce and the
 *     slot's seqlock is even and unchanged around the read (BPF frees or refills
 *     slots at exit, exec and CLONE_VM clones that share the TLS);
 *   - the process generation in a MADV_WIPEONFORK page equals the thread's: after
 *     any fork (fork, _Fork, syscall(SYS_fork), clone without CLONE_VM, clone3)
 *     the child reads 0 there and re-registers; set*id()/unshare()/setns()
 *     bump it, so every thread re-registers after a credential change.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>
#include <linux/bpf.h>

#include "bypass.h"

#define EXPORT __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define barrier() __asm__ __volatile__("" ::: "memory")

enum { F_GETPID, F_GETTID, F_GETPPID, F_GETUID, F_GETEUID, F_GETGID, F_GETEGID,
       F_GETRUSAGE, NFUNC };
static const char *const fname[NFUNC] = { "getpid", "gettid", "getppid", "getuid",
	"geteuid", "getgid", "getegid", "getrusage" };

/* ---- raw system calls (never through a wrapper, including our syscall()) ---- */
static inline long raw6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ __volatile__("syscall"
			     : "=a"(r)
			     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			     : "rcx", "r11", "memory");
	return r;
}
#define raw0(n) raw6((n), 0, 0, 0, 0, 0, 0)
#define raw3(n, a, b, c) raw6((n), (long)(a), (long)(b), (long)(c), 0, 0, 0)

static long set_errno(long r)
{
	if ((unsigned long)r > -4096UL) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

/* ---- state ---- */
struct tstate {
	const volatile struct hb_slot *slot; /* NULL: not registered */
	uint64_t nonce;
	uint64_t gen;      /* process generation at registration */
	uint32_t busy;     /* in refresh(): a signal handler must not re-enter */
	uint32_t backoff;  /* slow calls to skip before the next registration try */
	uint32_t fails;
	uint32_t counted;  /* pthread key set (counters flushed at thread exit) */
	uint64_t bypassed[NFUNC];
	uint64_t fallback[NFUNC];
};
/* initial-exec: one %fs-relative load, no __tls_get_addr. glibc keeps spare
 * static TLS for libraries dlopen()ed later, and this block is small. */
static __thread struct tstate T __attribute__((tls_model("initial-exec")));

/* Process page, MADV_WIPEONFORK: reads 0 in a child after any fork. */
struct pstate {
	uint64_t gen;
	uint64_t registered; /* the process registered a thread at least once */
};
static struct pstate *volatile P;
static const volatile union hb_entry *volatile M; /* the mapped array */
static volatile uint32_t Nslots;
static uint64_t gen_counter;     /* monotonic, inherited across fork */
static int map_busy, page_busy, key_busy;
static uint32_t map_backoff, map_fails;
static pthread_key_t tkey;
static volatile int tkey_ok;
static uint64_t tot_bypassed[NFUNC], tot_fallback[NFUNC];

/* The uprobe target: BPF fills a slot for the calling thread (never any other).
 * It must stay a real, exported, non-inlined function. */
EXPORT __attribute__((noinline)) void harrier_bypass_register(uint64_t nonce)
{
	__asm__ __volatile__("" : : "r"(nonce) : "memory");
}

EXPORT __attribute__((noinline)) void harrier_bypass_report(uint64_t bypassed, uint64_t fallbacks)
{
	__asm__ __volatile__("" : : "r"(bypassed), "r"(fallbacks) : "memory");
}

/* ---- the map ---- */
static int bpf_obj_get(const char *path)
{
	union bpf_attr a;
	memset(&a, 0, sizeof(a));
	a.pathname = (uint64_t)(uintptr_t)path;
	return (int)raw3(__NR_bpf, BPF_OBJ_GET, &a, sizeof(a));
}

/* Maps the pinned, frozen array read-only. Returns 1 if a usable map that is
 * not disabled is now in M. An old mapping is never unmapped (other threads may
 * be reading it); at most one per `start` is kept. */
static int open_map(void)
{
	int fd, ok = 0;
	long pg = 4096, len;
	const volatile union hb_entry *m;

	if (__atomic_exchange_n(&map_busy, 1, __ATOMIC_ACQUIRE))
		return 0;
	if (map_backoff) {
		map_backoff--;
		goto out;
	}
	fd = bpf_obj_get(HB_SLOTS_PIN);
	if (fd < 0)
		goto fail;
	m = (const void *)raw6(__NR_mmap, 0, pg, PROT_READ, MAP_SHARED, fd, 0);
	if ((unsigned long)m > -4096UL) {
		raw3(__NR_close, fd, 0, 0);
		goto fail;
	}
	uint32_t n = m[0].h.nslots;
	int good = m[0].h.magic == HB_MAGIC && m[0].h.version == HB_VERSION && n > 0 &&
		   !m[0].h.disabled && m[0].h.window == HB_WINDOW;
	raw3(__NR_munmap, m, pg, 0);
	if (!good) {
		raw3(__NR_close, fd, 0, 0);
		goto fail;
	}
	len = ((long)(n + 1) * HB_ENTRY_SIZE + pg - 1) & ~(pg - 1);
	m = (const void *)raw6(__NR_mmap, 0, len, PROT_READ, MAP_SHARED, fd, 0);
	raw3(__NR_close, fd, 0, 0);
	if ((unsigned long)m > -4096UL)
		goto fail;
	Nslots = n;
	__atomic_store_n(&M, m, __ATOMIC_RELEASE);
	map_fails = 0;
	ok = 1;
	goto out;
fail:
	/* Not started (or stopped): try again after 1, 2, 4 ... 4096 slow calls. */
	if (map_fails < 12)
		map_fails++;
	map_backoff = 1u << map_fails;
out:
	__atomic_store_n(&map_busy, 0, __ATOMIC_RELEASE);
	return ok;
}

static void flush_counters(struct tstate *t)
{
	for (int i = 0; i < NFUNC; i++) {
		__atomic_add_fetch(&tot_bypassed[i], t->bypassed[i], __ATOMIC_RELAXED);
		__atomic_add_fetch(&tot_fallback[i], t->fallback[i], __ATOMIC_RELAXED);
		t->bypassed[i] = t->fallback[i] = 0;
	}
}

static void thread_gone(void *p)
{
	(void)p;
	flush_counters(&T);
}

static void bump_gen(void)
{
	struct pstate *p = P;
	if (p)
		__atomic_store_n(&p->gen, __atomic_add_fetch(&gen_counter, 1, __ATOMIC_SEQ_CST),
				 __ATOMIC_SEQ_CST);
}

/* Process state: the wipe-on-fork page and its generation (re-made in a child). */
static int proc_ready(void)
{
	struct pstate *p = P;
	if (unlikely(!p)) {
		if (__atomic_exchange_n(&page_busy, 1, __ATOMIC_ACQUIRE))
			return 0;
		if (!P) {
			void *a = (void *)raw6(__NR_mmap, 0, 4096, PROT_READ | PROT_WRITE,
					       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
			if ((unsigned long)a > -4096UL) {
				__atomic_store_n(&page_busy, 0, __ATOMIC_RELEASE);
				return 0;
			}
			if (raw3(__NR_madvise, a, 4096, MADV_WIPEONFORK) != 0) {
				/* Without it forks could not be detected: no bypass at all. */
				__atomic_store_n(&page_busy, 0, __ATOMIC_RELEASE);
				return 0;
			}
			__atomic_store_n(&P, (struct pstate *)a, __ATOMIC_RELEASE);
		}
		__atomic_store_n(&page_busy, 0, __ATOMIC_RELEASE);
		p = P;
	}
	if (unlikely(__atomic_load_n(&p->gen, __ATOMIC_ACQUIRE) == 0)) {
		/* First use, or we are a fork child: every inherited T.gen is smaller. */
		uint64_t z = 0, g = __atomic_add_fetch(&gen_counter, 1, __ATOMIC_SEQ_CST);
		__atomic_compare_exchange_n(&p->gen, &z, g, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	}
	if (unlikely(!M) && !open_map())
		return 0;
	return 1;
}

static uint64_t new_nonce(void)
{
	uint64_t n = 0;
	if (raw3(__NR_getrandom, &n, sizeof(n), 1 /* GRND_NONBLOCK */) != sizeof(n)) {
		uint32_t lo, hi;
		__asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
		n = ((uint64_t)hi << 32 | lo) * 0x9e3779b97f4a7c15ULL ^ (uintptr_t)&T;
	}
	return n ? n : 1;
}

/* Asks BPF for a slot for this thread and finds it: exactly one slot in the
 * nonce's window must carry our nonce. */
static int do_register(void)
{
	const volatile union hb_entry *m = M;
	uint32_t n = Nslots, matches = 0;
	const volatile struct hb_slot *found = NULL;
	uint64_t nonce;

	if (m[0].h.disabled) {
		/* Service stopped; maybe restarted with a new map. */
		if (!open_map())
			return 0;
		m = M;
		n = Nslots;
	}
	nonce = new_nonce();
	T.slot = NULL; /* a signal handler arriving now falls back */
	barrier();
	T.nonce = nonce;
	T.gen = __atomic_load_n(&P->gen, __ATOMIC_SEQ_CST);
	barrier();
	harrier_bypass_register(nonce);
	barrier();
	for (uint32_t i = 0; i < HB_WINDOW; i++) {
		const volatile struct hb_slot *s = &m[1 + (nonce % n + i) % n].s;
		if (s->nonce == nonce) {
			matches++;
			found = s;
		}
	}
	if (matches != 1)
		return 0;
	P->registered = 1;
	barrier();
	T.slot = found;
	return 1;
}

/* Slow path: (re-)register this thread, rate-limited after failures. */
static __attribute__((noinline)) int refresh(void)
{
	int ok = 0;
	if (T.busy)
		return 0;
	T.busy = 1;
	barrier();
	if (!T.counted && tkey_ok) {
		T.counted = 1;
		pthread_setspecific(tkey, &T);
	} else if (!tkey_ok && !__atomic_exchange_n(&key_busy, 1, __ATOMIC_ACQUIRE)) {
		if (pthread_key_create(&tkey, thread_gone) == 0)
			tkey_ok = 1;
	}
	if (!proc_ready())
		goto out;
	if (T.backoff) {
		T.backoff--;
		goto out;
	}
	ok = do_register();
	if (ok) {
		T.fails = 0;
	} else {
		/* Quota reached, shared TLS, service stopped...: 2, 4 ... 65536 calls. */
		if (T.fails < 16)
			T.fails++;
		T.backoff = 1u << T.fails;
	}
out:
	barrier();
	T.busy = 0;
	return ok;
}

/* The fast path. `field` is a constant in each caller, so this folds down to
 * a handful of loads from L1. */
static inline __attribute__((always_inline)) int cached(int f, long *out)
{
	const volatile struct hb_slot *s = T.slot;
	if (likely(s != NULL)) {
		uint32_t seq = s->seq;
		if (likely(!(seq & 1) && s->nonce == T.nonce && T.gen == P->gen)) {
			long v;
			switch (f) {
			case F_GETPID: v = s->pid; break;
			case F_GETTID: v = s->tid; break;
			case F_GETPPID:
				if (!(s->flags & HB_F_PPID) || s->ppid_epoch != M[0].h.ppid_epoch)
					return 0;
				v = s->ppid;
				break;
			default:
				if (!(s->flags & HB_F_IDS))
					return 0;
				v = f == F_GETUID ? s->uid : f == F_GETEUID ? s->euid :
				    f == F_GETGID ? s->gid : s->egid;
			}
			if (likely(s->seq == seq)) {
				*out = v;
				T.bypassed[f]++;
				return 1;
			}
		}
	}
	return 0;
}

static __attribute__((noinline)) long slow(int f, long nr)
{
	long v;
	/* Only an absent or stale registration is worth a new one; a valid slot
	 * without this field (ppid of an exiting parent, unmapped ids) falls back. */
	const volatile struct hb_slot *s = T.slot;
	int have = s && s->nonce == T.nonce && P && T.gen == P->gen && !(s->seq & 1);
	/* A parent exited somewhere: our ppid may be stale; ask for a fresh one. */
	if (have && f == F_GETPPID && (s->flags & HB_F_PPID) && s->ppid_epoch != M[0].h.ppid_epoch)
		have = 0;
	if (!have && refresh() && cached(f, &v))
		return v;
	T.fallback[f]++;
	return raw0(nr);
}

#define GETTER(type, name, F, NR)                                      \
	EXPORT type name(void)                                         \
	{                                                              \
		long v;                                                \
		if (likely(cached(F, &v)))                             \
			return (type)v;                                \
		return (type)slow(F, NR);                              \
	}                                                              \
	EXPORT type __wrap_##name(void) __attribute__((alias(#name)));

GETTER(pid_t, getpid, F_GETPID, __NR_getpid)
GETTER(pid_t, gettid, F_GETTID, __NR_gettid)
GETTER(pid_t, getppid, F_GETPPID, __NR_getppid)
GETTER(uid_t, getuid, F_GETUID, __NR_getuid)
GETTER(uid_t, geteuid, F_GETEUID, __NR_geteuid)
GETTER(gid_t, getgid, F_GETGID, __NR_getgid)
GETTER(gid_t, getegid, F_GETEGID, __NR_getegid)

/* getrusage: the kernel's values change with every tick and no hook here runs
 * cheaply enough to keep them current, so staleness cannot be bounded: always
 * the real call (counted as a fallback; values are the kernel's, monotonic). */
EXPORT int getrusage(int who, struct rusage *ru)
{
	T.fallback[F_GETRUSAGE]++;
	return (int)set_errno(raw3(__NR_getrusage, who, ru, 0));
}
EXPORT int __wrap_getrusage(int, struct rusage *) __attribute__((alias("getrusage")));

/* ---- credential and namespace changes: invalidate, then call the real one ---- */
static void *next_sym(void **cache, const char *name)
{
	void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
	if (!f) {
		f = dlsym(RTLD_NEXT, name);
		__atomic_store_n(cache, f, __ATOMIC_RELEASE);
	}
	return f;
}

/* Bump before (threads stop trusting their slots while glibc changes every
 * thread's creds) and after (a thread that re-registered in between cached the
 * old creds). */
#define CRED_WRAP(name, params, args)                                   \
	EXPORT int name params                                          \
	{                                                               \
		static void *real;                                      \
		int (*fn) params = (int (*) params)next_sym(&real, #name); \
		int r, e;                                               \
		if (!fn) {                                              \
			errno = ENOSYS;                                 \
			return -1;                                      \
		}                                                       \
		bump_gen();                                             \
		r = fn args;                                            \
		e = errno;                                              \
		bump_gen();                                             \
		errno = e;                                              \
		return r;                                               \
	}                                                               \
	EXPORT int __wrap_##name params __attribute__((alias(#name)));

CRED_WRAP(setuid, (uid_t a), (a))
CRED_WRAP(setgid, (gid_t a), (a))
CRED_WRAP(seteuid, (uid_t a), (a))
CRED_WRAP(setegid, (gid_t a), (a))
CRED_WRAP(setreuid, (uid_t a, uid_t b), (a, b))
CRED_WRAP(setregid, (gid_t a, gid_t b), (a, b))
CRED_WRAP(setresuid, (uid_t a, uid_t b, uid_t c), (a, b, c))
CRED_WRAP(setresgid, (gid_t a, gid_t b, gid_t c), (a, b, c))
CRED_WRAP(unshare, (int a), (a))
CRED_WRAP(setns, (int a, int b), (a, b))

static int cred_nr(long nr)
{
	switch (nr) {
	case __NR_setuid: case __NR_setgid: case __NR_setreuid: case __NR_setregid:
	case __NR_setresuid: case __NR_setresgid: case __NR_unshare: case __NR_setns:
		return 1;
	}
	return 0;
}

/* syscall(SYS_setuid, ...) would bypass the wrappers above. */
EXPORT long syscall(long nr, ...)
{
	va_list ap;
	long a[6], r;
	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	if (unlikely(cred_nr(nr)))
		bump_gen();
	r = raw6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	if (unlikely(cred_nr(nr)))
		bump_gen();
	return set_errno(r);
}

/* ---- counters ---- */

/* Totals of this process so far (exited threads + the calling thread). For tests. */
EXPORT void harrier_bypass_counts(uint64_t bypassed[8], uint64_t fallback[8])
{
	for (int i = 0; i < NFUNC; i++) {
		bypassed[i] = __atomic_load_n(&tot_bypassed[i], __ATOMIC_RELAXED) + T.bypassed[i];
		fallback[i] = __atomic_load_n(&tot_fallback[i], __ATOMIC_RELAXED) + T.fallback[i];
	}
}

__attribute__((destructor)) static void at_exit(void)
{
	uint64_t b[NFUNC], f[NFUNC], sb = 0, sf = 0;
	const char *log = getenv("HARRIER_BYPASS_LOG");

	harrier_bypass_counts(b, f);
	for (int i = 0; i < NFUNC; i++) {
		sb += b[i];
		sf += f[i];
	}
	if (P && P->registered)
		harrier_bypass_report(sb, sf);
	if (!log || (strcmp(log, "info") && strcmp(log, "debug")))
		return;
	char buf[1024];
	int len = snprintf(buf, sizeof(buf), "harrier-bypass[%ld]: %s\n", raw0(__NR_getpid),
			   M ? "map attached" : "map not available");
	for (int i = 0; i < NFUNC && len < (int)sizeof(buf); i++)
		if (b[i] || f[i])
			len += snprintf(buf + len, sizeof(buf) - len,
					"harrier-bypass: %-9s bypassed %llu fallback %llu\n", fname[i],
					(unsigned long long)b[i], (unsigned long long)f[i]);
	if (len > (int)sizeof(buf))
		len = sizeof(buf);
	raw3(__NR_write, 2, buf, len);
}
