// SPDX-License-Identifier: Apache-2.0
/*
 * bt: correctness tests for libharrier-bypass.so. Every case compares what the
 * wrapped functions return with the raw system call, in loops, and exits
 * non-zero on any difference. Built three ways (see Makefile):
 *   bt         run with LD_PRELOAD=libharrier-bypass.so
 *   bt-wrap    linked with -Wl,--wrap=getpid,... against the library
 *   bt-dlopen  dlopen()s the library itself (after starting threads)
 * Usage: bt CASE [ARG]; driven by tests/run.sh.
 * BT_EXPECT_BYPASS=1: also require that calls were answered from the map.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/bpf.h>
#include <linux/sched.h>
#include <asm/prctl.h>

#include "bypass.h"

extern char **environ;

static inline long raw6(long n, long a, long b, long c, long d, long e, long f)
{
	long r;
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	__asm__ __volatile__("syscall" : "=a"(r)
			     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
			     : "rcx", "r11", "memory");
	return r;
}
#define raw0(n) raw6((n), 0, 0, 0, 0, 0, 0)

/* The functions under test, through pointers so that all three builds share code. */
struct getters {
	pid_t (*getpid)(void), (*gettid)(void), (*getppid)(void);
	uid_t (*getuid)(void), (*geteuid)(void);
	gid_t (*getgid)(void), (*getegid)(void);
	int (*getrusage)(int, struct rusage *);
	void (*counts)(uint64_t *, uint64_t *);
	void (*reg)(uint64_t);
} G;

static const char *self_exe;
static int expect_bypass;
static int verbose;

static void setup_getters(void)
{
#ifdef DLOPEN
	return; /* done by the dlopen case */
#else
	G.getpid = getpid; G.gettid = gettid; G.getppid = getppid;
	G.getuid = getuid; G.geteuid = geteuid; G.getgid = getgid; G.getegid = getegid;
	G.getrusage = getrusage;
	G.counts = (void (*)(uint64_t *, uint64_t *))dlsym(RTLD_DEFAULT, "harrier_bypass_counts");
	G.reg = (void (*)(uint64_t))dlsym(RTLD_DEFAULT, "harrier_bypass_register");
#endif
}

static uint64_t bypassed(int f)
{
	uint64_t b[8] = {0}, fb[8] = {0};
	if (G.counts)
		G.counts(b, fb);
	return b[f];
}

#define FAIL(...) do { fprintf(stderr, "bt[%ld]: ", raw0(SYS_getpid)); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } while (0)

/* One comparison of every function with its raw call. Returns mismatches. */
static int check(const char *where)
{
	int bad = 0;
	/* The raw call before and after: a value may legitimately change during
	 * the call (a parent exiting makes getppid() change), and then either
	 * is right. A stale value matches neither. */
#define CMP(fn, nr) do {                                                          \
		long b0 = raw0(nr), a = (long)G.fn(), b = raw0(nr);               \
		if (a != b && a != b0) {                                          \
			FAIL("%s: %s() = %ld, raw %ld then %ld", where, #fn, a, b0, b); \
			bad++;                                                    \
		}                                                                 \
	} while (0)
	CMP(getpid, SYS_getpid);
	CMP(gettid, SYS_gettid);
	CMP(getppid, SYS_getppid);
	CMP(getuid, SYS_getuid);
	CMP(geteuid, SYS_geteuid);
	CMP(getgid, SYS_getgid);
	CMP(getegid, SYS_getegid);
	return bad;
}

/* HARRIER_TEST_SCALE > 1 (a kernel under emulation, scripts/vm-guest.sh):
 * loops run n / scale times, but at least min (or n if smaller). */
static int scaled(int n, int min)
{
	const char *s = getenv("HARRIER_TEST_SCALE");
	int k = s ? atoi(s) : 1;

	if (k <= 1)
		return n;
	if (n / k >= min)
		return n / k;
	return n < min ? n : min;
}

static int check_loop(const char *where, int n)
{
	for (int i = 0; i < n; i++)
		if (check(where))
			return 1;
	return 0;
}

/* check_loop, and with BT_EXPECT_BYPASS also that getpid was answered from the map. */
static int check_bypassed(const char *where, int n)
{
	uint64_t before = bypassed(0);
	if (check_loop(where, n))
		return 1;
	if (expect_bypass && bypassed(0) == before) {
		FAIL("%s: no call was bypassed", where);
		return 1;
	}
	return 0;
}

static int wait_ok(pid_t pid, const char *what)
{
	int st;
	if (pid < 0) {
		FAIL("%s: %s", what, strerror(errno));
		return 1;
	}
	if (waitpid(pid, &st, __WALL) != pid) {
		FAIL("%s: waitpid: %s", what, strerror(errno));
		return 1;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		FAIL("%s: child status %#x", what, st);
		return 1;
	}
	return 0;
}

/* ---- fork family ---- */
static int t_fork(void)
{
	if (check_bypassed("fork: parent before", 1000))
		return 1;
	pid_t p = fork();
	if (p == 0)
		_exit(check_bypassed("fork: child", 1000));
	return wait_ok(p, "fork") || check_bypassed("fork: parent after", 1000);
}

static void *fork_thread(void *arg)
{
	(void)arg;
	if (check_bypassed("fork-thread: thread", 1000))
		return (void *)1;
	pid_t p = fork();
	if (p == 0)
		_exit(check_bypassed("fork-thread: child", 1000));
	return (void *)(long)wait_ok(p, "fork-thread");
}

static int t_fork_thread(void)
{
	pthread_t t;
	void *r;
	check_loop("fork-thread: main", 100);
	pthread_create(&t, NULL, fork_thread, NULL);
	pthread_join(t, &r);
	return r != NULL || check_loop("fork-thread: main after", 1000);
}

static int t_raw_forks(void)
{
	check_bypassed("raw-forks: parent", 1000);
	pid_t p = _Fork();
	if (p == 0)
		_exit(check_bypassed("_Fork child", 1000));
	if (wait_ok(p, "_Fork"))
		return 1;
	p = syscall(SYS_fork);
	if (p == 0)
		_exit(check_bypassed("syscall(SYS_fork) child", 1000));
	if (wait_ok(p, "syscall(SYS_fork)"))
		return 1;
	p = raw0(SYS_fork); /* the instruction itself, no wrapper at all */
	if (p == 0)
		_exit(check_bypassed("raw fork child", 1000));
	if (wait_ok(p, "raw fork"))
		return 1;
	return check_bypassed("raw-forks: parent after", 1000);
}

static volatile int atfork_bad = -1;
static void atfork_child(void)
{
	atfork_bad = check_loop("atfork child handler", 100);
}

static int t_atfork(void)
{
	check_loop("atfork: parent", 100);
	pthread_atfork(NULL, NULL, atfork_child);
	pid_t p = fork();
	if (p == 0)
		_exit(atfork_bad != 0 || check_loop("atfork: child", 1000));
	return wait_ok(p, "atfork");
}

static int t_vfork(void)
{
	check_bypassed("vfork: parent", 1000);
	for (int i = 0; i < 50; i++) {
		pid_t p = vfork();
		if (p == 0) {
			/* Shares the parent's TLS: must not see the parent's slot. */
			long a = G.getpid(), b = raw0(SYS_getpid), c = G.gettid(), d = raw0(SYS_gettid);
			_exit(a != b || c != d);
		}
		if (wait_ok(p, "vfork"))
			return 1;
		if (check_loop("vfork: parent after", 100))
			return 1;
	}
	return check_bypassed("vfork: parent at the end", 1000);
}

static int t_posix_spawn(void)
{
	check_bypassed("posix_spawn: parent", 1000);
	for (int i = 0; i < 20; i++) {
		pid_t p;
		char *argv[] = { (char *)self_exe, "check", NULL };
		int e = posix_spawn(&p, self_exe, NULL, NULL, argv, environ);
		if (e) {
			FAIL("posix_spawn: %s", strerror(e));
			return 1;
		}
		if (wait_ok(p, "posix_spawn") || check_loop("posix_spawn: parent after", 100))
			return 1;
	}
	return check_bypassed("posix_spawn: parent at the end", 1000);
}

/* ---- clone ---- */
static volatile int clone_stop;
static int clone_child(void *arg)
{
	(void)arg;
	int bad = check_loop("clone child", 2000);
	return bad;
}

static int clone_case(const char *name, int flags, int concurrent, unsigned long tls)
{
	size_t sz = 1 << 20;
	char *stack = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	pid_t p = clone(clone_child, stack + sz, flags | SIGCHLD, NULL, NULL, (void *)tls, NULL);
	int bad = 0;
	if (concurrent)
		bad |= check_loop(name, 2000); /* parent and child run at the same time */
	bad |= wait_ok(p, name);
	bad |= check_loop(name, 1000);
	munmap(stack, sz);
	if (bad)
		FAIL("clone case %s failed", name);
	return bad;
}

static int t_clone(void)
{
	unsigned long fs = 0;
	syscall(SYS_arch_prctl, ARCH_GET_FS, &fs);
	check_bypassed("clone: parent", 1000);
	/* Without CLONE_VM: a fork. The others run on the parent's TLS. */
	if (clone_case("clone()", 0, 1, 0) ||
	    clone_case("clone(CLONE_VM|CLONE_VFORK)", CLONE_VM | CLONE_VFORK, 0, 0) ||
	    clone_case("clone(CLONE_VM)", CLONE_VM, 1, 0) ||
	    clone_case("clone(CLONE_VM|CLONE_SETTLS same TLS)", CLONE_VM | CLONE_SETTLS, 1, fs))
		return 1;
	return 0;
}

/* clone3 through the raw instruction. The child runs fn on its own stack (or
 * the copied one without CLONE_VM) and exits with its result. */
static int clone3_fn(void)
{
	return check_loop("clone3 child", 1000);
}

static __attribute__((noinline)) long clone3_run(struct clone_args *ca, int (*fn)(void))
{
	long r;
	register long r10 __asm__("r10") = 0;
	__asm__ __volatile__(
		"syscall\n\t"
		"test %%rax, %%rax\n\t"
		"jnz 1f\n\t"
		"and $-16, %%rsp\n\t"
		"call *%[fn]\n\t"
		"mov %%eax, %%edi\n\t"
		"mov $60, %%eax\n\t" /* exit */
		"syscall\n\t"
		"1:\n\t"
		: "=a"(r)
		: "a"((long)SYS_clone3), "D"(ca), "S"(sizeof(*ca)), [fn] "r"(fn), "r"(r10)
		: "rcx", "r11", "rdx", "memory");
	return r;
}

static int t_clone3(void)
{
	size_t sz = 1 << 20;
	char *stack = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	struct { const char *name; unsigned long flags; int own_stack; } cases[] = {
		{ "clone3 fork-like", 0, 0 },
		{ "clone3 CLONE_VM|CLONE_VFORK", CLONE_VM | CLONE_VFORK, 1 },
		{ "clone3 CLONE_VM", CLONE_VM, 1 },
	};
	check_bypassed("clone3: parent", 1000);
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct clone_args ca = { .flags = cases[i].flags, .exit_signal = SIGCHLD };
		if (cases[i].own_stack) {
			ca.stack = (uintptr_t)stack;
			ca.stack_size = sz;
		}
		long p = clone3_run(&ca, clone3_fn);
		int bad = 0;
		if (!(cases[i].flags & CLONE_VFORK))
			bad |= check_loop(cases[i].name, 1000);
		bad |= wait_ok(p, cases[i].name) || check_loop(cases[i].name, 1000);
		if (bad)
			return 1;
	}
	munmap(stack, sz);
	return 0;
}

/* ---- threads ---- */
static pthread_barrier_t bar;
static volatile int n_bypassing, n_bad;

static void *thread_check(void *arg)
{
	(void)arg;
	int bad = check_loop("thread", 2000);
	pthread_barrier_wait(&bar); /* all alive at once: the quota applies */
	uint64_t b = bypassed(0);
	G.getpid();
	if (bypassed(0) > b)
		__atomic_add_fetch(&n_bypassing, 1, __ATOMIC_SEQ_CST);
	pthread_barrier_wait(&bar); /* nobody exits (and flushes counters) before all counted */
	if (bad)
		__atomic_add_fetch(&n_bad, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* bt threads N [MIN_BYPASSING [MAX_BYPASSING]] */
static int t_threads(int n, int min_b, int max_b)
{
	pthread_t *t = calloc(n, sizeof(*t));
	pthread_barrier_init(&bar, NULL, n);
	for (int i = 0; i < n; i++)
		if (pthread_create(&t[i], NULL, thread_check, NULL)) {
			FAIL("pthread_create %d", i);
			return 1;
		}
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	printf("threads: %d threads, %d answered from the map, %d wrong\n", n, n_bypassing, n_bad);
	if (n_bad)
		return 1;
	if (n_bypassing < min_b || (max_b >= 0 && n_bypassing > max_b)) {
		FAIL("threads: %d bypassing, expected %d..%d", n_bypassing, min_b, max_b);
		return 1;
	}
	return check_loop("threads: main after", 1000);
}

/* ---- signals during registration ---- */
static volatile int sig_bad, sig_count;
static void on_sig(int s)
{
	(void)s;
	int e = errno;
	if (G.getpid() != raw0(SYS_getpid) || G.gettid() != raw0(SYS_gettid) ||
	    G.getuid() != raw0(SYS_getuid))
		sig_bad++;
	sig_count++;
	errno = e;
}

static volatile int sig_done;
static void *sig_target(void *arg)
{
	(void)arg;
	/* seteuid() to the same id makes every thread re-register on its next
	 * call, so most signals land in or near a registration. */
	for (int i = 0, n = scaled(3000, 300); i < n; i++) {
		seteuid(raw0(SYS_geteuid));
		if (check("signals: target"))
			sig_bad++;
	}
	sig_done = 1;
	return NULL;
}

static int t_signals(void)
{
	pthread_t t;
	signal(SIGUSR1, on_sig);
	pthread_create(&t, NULL, sig_target, NULL);
	/* One signal in flight at a time, and the CPU given up after each: a
	 * sender that kept signalling starved the target on a loaded machine
	 * (it ran only its handler, and the test its 120 s timeout). */
	while (!sig_done) {
		int seen = sig_count;

		pthread_kill(t, SIGUSR1);
		while (sig_count == seen && !sig_done)
			sched_yield();
		for (volatile int i = 0; i < 200; i++)
			;
		sched_yield();
	}
	pthread_join(t, NULL);
	printf("signals: %d handled, %d wrong\n", sig_count, sig_bad);
	return sig_bad != 0;
}

/* ---- exec ---- */
static void *exec_thread(void *arg)
{
	char *argv[] = { (char *)self_exe, "check", NULL };
	(void)arg;
	check_loop("exec-thread: thread", 100);
	execv(self_exe, argv);
	_exit(99);
}

static int t_exec(int from_thread)
{
	pid_t p = fork();
	if (p == 0) {
		check_loop("exec: before", 1000);
		if (from_thread) {
			pthread_t t;
			pthread_create(&t, NULL, exec_thread, NULL);
			pause();
		}
		char *argv[] = { (char *)self_exe, "check", NULL };
		execv(self_exe, argv);
		_exit(99);
	}
	return wait_ok(p, from_thread ? "exec from a thread" : "exec");
}

/* ---- credentials ---- */
static int cred_phase;
static void *cred_thread(void *arg)
{
	long bad = 0;
	(void)arg;
	for (int phase = 0; phase < 6; phase++) {
		bad |= check_loop("setuid-mt: thread", 500);
		pthread_barrier_wait(&bar); /* main changes creds */
		pthread_barrier_wait(&bar);
	}
	return (void *)bad;
}

/* setresuid() & co. in a process with 4 threads: after each change every
 * thread must see the new ids. */
static int t_setuid_mt(void)
{
	pthread_t t[4];
	void *r;
	int bad = 0;
	pthread_barrier_init(&bar, NULL, 5);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, cred_thread, NULL);
	for (cred_phase = 0; cred_phase < 6; cred_phase++) {
		bad |= check_loop("setuid-mt: main", 500);
		pthread_barrier_wait(&bar);
		int e = 0;
		switch (cred_phase) {
		case 0: e = setresgid(1000, 1001, 0) | setresuid(1000, 1001, 0); break; /* privileged */
		case 1: e = seteuid(0); break;           /* back via the saved uid */
		case 2: e = setuid(0); break;            /* privileged setuid: all three */
		case 3: e = setresuid(65534, 65534, 0); break;
		case 4: e = setresuid(-1, 0, -1); break; /* unprivileged caller (euid 65534) */
		case 5: e = (int)syscall(SYS_setresuid, 0, 0, 0); break; /* this thread only */
		}
		if (e) {
			FAIL("setuid-mt phase %d: %s", cred_phase, strerror(errno));
			bad = 1;
		}
		pthread_barrier_wait(&bar);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &r);
		bad |= r != NULL;
	}
	return bad || check_loop("setuid-mt: main at the end", 1000);
}

/* ---- reparenting: getppid() must follow when the parent exits ---- */
static int t_orphan(void)
{
	/* As a subreaper we inherit the grandchild when its parent exits, and can
	 * collect its status. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* B exits once C has checked its parent: a fixed delay was too short
	 * under emulation, where C then saw the new parent "before". */
	int go[2];
	if (pipe(go)) {
		FAIL("orphan: pipe: %s", strerror(errno));
		return 1;
	}
	pid_t b = fork();
	if (b == 0) {
		pid_t c = fork();
		if (c == 0) {
			pid_t parent = raw0(SYS_getppid);
			int bad = check_bypassed("orphan: before", 1000);
			if (G.getppid() != parent) {
				FAIL("orphan: getppid() = %d before the parent exits, not %d", G.getppid(), parent);
				bad = 1;
			}
			if (write(go[1], "", 1) != 1)
				_exit(1);
			while (raw0(SYS_getppid) == parent) /* B exits meanwhile */
				if (check("orphan: while the parent exits"))
					_exit(1);
			bad |= check_loop("orphan: after reparenting", 1000);
			_exit(bad);
		}
		char x;
		_exit(read(go[0], &x, 1) == 1 ? 0 : 1);
	}
	close(go[0]);
	close(go[1]);
	if (wait_ok(b, "orphan: middle process"))
		return 1;
	int st;
	pid_t c = waitpid(-1, &st, 0);
	if (c < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		FAIL("orphan: grandchild status %#x", st);
		return 1;
	}
	return 0;
}

/* ---- namespaces ---- */
static int t_pidns(void)
{
	if (unshare(CLONE_NEWPID)) {
		FAIL("unshare(CLONE_NEWPID): %s", strerror(errno));
		return 1;
	}
	pid_t p = fork();
	if (p == 0) {
		int bad = check_bypassed("pidns child", 1000);
		if (G.getpid() != 1 || G.getppid() != 0) {
			FAIL("pidns child: getpid %d getppid %d", G.getpid(), G.getppid());
			bad = 1;
		}
		pid_t q = fork(); /* pid 2 in the new namespace, parent 1 */
		if (q == 0)
			_exit(check_bypassed("pidns grandchild", 1000) || G.getppid() != 1);
		bad |= wait_ok(q, "pidns grandchild");
		_exit(bad);
	}
	return wait_ok(p, "pidns") || check_loop("pidns: parent after", 1000);
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	int ok = fd >= 0 && write(fd, s, strlen(s)) == (ssize_t)strlen(s);
	if (fd >= 0)
		close(fd);
	if (!ok)
		FAIL("writing %s: %s", path, strerror(errno));
	return !ok;
}

static int t_userns(void)
{
	pid_t p = fork();
	if (p == 0) {
		int bad = check_loop("userns: before", 1000);
		char m[64];
		uid_t u = raw0(SYS_geteuid);
		gid_t g = raw0(SYS_getegid);
		if (unshare(CLONE_NEWUSER)) {
			FAIL("unshare(CLONE_NEWUSER): %s", strerror(errno));
			_exit(1);
		}
		bad |= check_loop("userns: unmapped", 1000); /* overflow ids */
		snprintf(m, sizeof(m), "1000 %u 1\n", u);
		bad |= write_file("/proc/self/uid_map", m);
		bad |= write_file("/proc/self/setgroups", "deny");
		snprintf(m, sizeof(m), "1000 %u 1\n", g);
		bad |= write_file("/proc/self/gid_map", m);
		bad |= check_loop("userns: mapped", 1000);
		pid_t q = fork();
		if (q == 0)
			_exit(check_bypassed("userns: child", 1000) || G.getuid() != 1000 || G.getegid() != 1000);
		bad |= wait_ok(q, "userns child");
		_exit(bad);
	}
	return wait_ok(p, "userns");
}

/* ---- dlopen after threads exist ---- */
static volatile int dl_ready;
static void *dl_thread(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&dl_ready, __ATOMIC_ACQUIRE))
		usleep(1000);
	/* Five threads reach the new library at once and one of them maps the
	 * slots while the others fall back; emulated (the 6.1 guest), one
	 * round of 2000 calls ended before this thread's first bypass. A few
	 * rounds, paused: a thread that is never bypassed still fails. */
	for (int round = 1; round <= 10; round++) {
		uint64_t before = bypassed(0);
		if (check_loop("dlopen: thread", 2000))
			return (void *)1L;
		if (!expect_bypass || bypassed(0) != before) {
			if (round > 1)
				fprintf(stderr, "bt: dlopen: a thread's first bypass came in round %d\n", round);
			return NULL;
		}
		usleep(10000);
	}
	FAIL("dlopen: thread: no call was bypassed in 10 rounds");
	return (void *)1L;
}

static __attribute__((unused)) int t_dlopen(const char *lib)
{
	pthread_t t[4];
	void *r;
	int bad = 0;
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, dl_thread, NULL);
	usleep(20000);
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		FAIL("dlopen: %s", dlerror());
		return 1;
	}
#define SYM(x) G.x = dlsym(h, #x)
	SYM(getpid); SYM(gettid); SYM(getppid); SYM(getuid); SYM(geteuid); SYM(getgid);
	SYM(getegid); SYM(getrusage);
	G.counts = dlsym(h, "harrier_bypass_counts");
	__atomic_store_n(&dl_ready, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &r);
		bad |= r != NULL;
	}
	return bad || check_bypassed("dlopen: main", 1000);
}

/* ---- service restart while running: loop until the file $2 exists ---- */
static int t_restart(const char *flag)
{
	uint64_t last = 0;
	int bad = 0;
	for (;;) {
		bad |= check_loop("restart", 2000);
		if (bad)
			return 1;
		if (access(flag, F_OK) == 0)
			break;
		usleep(1000);
	}
	/* After the restart this process must move to the new map: within 30 s
	 * (its retries back off, and an emulated CPU is slow), never wrong. */
	last = bypassed(0);
	for (int i = 0; i < 3000 && !bad; i++) {
		bad |= check_loop("restart: at the end", 1000);
		if (!expect_bypass || bypassed(0) != last)
			break;
		usleep(10000);
	}
	if (expect_bypass && bypassed(0) == last) {
		FAIL("restart: not answering from the new map");
		return 1;
	}
	return bad;
}

/* ---- security (run as an unprivileged user) ---- */
static int bpf_sys(int cmd, union bpf_attr *a)
{
	return (int)syscall(SYS_bpf, cmd, a, sizeof(*a));
}

static int t_security(void)
{
	union bpf_attr a;
	int bad = 0;
	memset(&a, 0, sizeof(a));
	a.pathname = (uintptr_t)HB_SLOTS_PIN;
	int fd = bpf_sys(BPF_OBJ_GET, &a);
	if (fd < 0) {
		FAIL("security: BPF_OBJ_GET %s: %s", HB_SLOTS_PIN, strerror(errno));
		return 1;
	}
	const union hb_entry *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		FAIL("security: mmap PROT_READ: %s", strerror(errno));
		return 1;
	}
	if (mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) != MAP_FAILED) {
		FAIL("security: mmap PROT_WRITE succeeded");
		bad = 1;
	}
	if (mprotect((void *)m, 4096, PROT_READ | PROT_WRITE) == 0) {
		FAIL("security: mprotect PROT_WRITE succeeded");
		bad = 1;
	}
	union hb_entry val;
	uint32_t key = 1;
	memset(&val, 0, sizeof(val));
	val.s.pid = 1;
	memset(&a, 0, sizeof(a));
	a.map_fd = fd;
	a.key = (uintptr_t)&key;
	a.value = (uintptr_t)&val;
	if (bpf_sys(BPF_MAP_UPDATE_ELEM, &a) == 0) {
		FAIL("security: BPF_MAP_UPDATE_ELEM succeeded");
		bad = 1;
	}
	/* Forge: register with the nonce of another process's slot. */
	const union hb_entry *all = mmap(NULL, ((m[0].h.nslots + 1) * 64 + 4095) & ~4095, PROT_READ, MAP_SHARED, fd, 0);
	int forged = 0;
	for (uint32_t i = 1; i <= m[0].h.nslots && G.reg; i++) {
		struct hb_slot s = all[i].s;
		if (!s.nonce || s.pid == raw0(SYS_getpid))
			continue;
		G.reg(s.nonce);
		int same = 0;
		for (uint32_t j = 0; j < HB_WINDOW; j++)
			same += all[1 + (s.nonce % m[0].h.nslots + j) % m[0].h.nslots].s.nonce == s.nonce;
		if (same != 1 || all[i].s.pid != s.pid || all[i].s.uid != s.uid) {
			FAIL("security: a forged registration changed slot %u (%d copies)", i, same);
			bad = 1;
		}
		forged++;
		break;
	}
	printf("security: mmap/mprotect/update refused%s\n",
	       forged ? ", forged nonce refused" : " (no other slot to forge)");
	if (!forged && getenv("BT_NEED_VICTIM")) {
		FAIL("security: no other process's slot found");
		bad = 1;
	}
	return bad || check_bypassed("security: own values", 1000);
}

/* bt hold: register and wait (a victim for the forging test). */
static int t_hold(void)
{
	check_loop("hold", 10);
	printf("ready\n");
	fflush(stdout);
	while (access("/proc/self", F_OK) == 0) {
		if (check("hold"))
			return 1;
		usleep(10000);
		if (getppid() == 1)
			break;
	}
	return 0;
}

/* ---- getrusage ---- */
static double tv(struct timeval t)
{
	return t.tv_sec + t.tv_usec / 1e6;
}

/* raw1 <= wrapped <= raw2 on every field (all are monotonic). */
static int ru_bracket(int who, const char *name)
{
	struct rusage r1, w, r2;
	raw6(SYS_getrusage, who, (long)&r1, 0, 0, 0, 0);
	if (G.getrusage(who, &w))
		return 1;
	raw6(SYS_getrusage, who, (long)&r2, 0, 0, 0, 0);
#define LE(f) (r1.f <= w.f && w.f <= r2.f)
	int ok = tv(r1.ru_utime) <= tv(w.ru_utime) && tv(w.ru_utime) <= tv(r2.ru_utime) &&
		 tv(r1.ru_stime) <= tv(w.ru_stime) && tv(w.ru_stime) <= tv(r2.ru_stime) &&
		 LE(ru_maxrss) && LE(ru_minflt) && LE(ru_majflt) && LE(ru_nvcsw) && LE(ru_nivcsw) &&
		 LE(ru_inblock) && LE(ru_oublock);
	if (!ok)
		FAIL("getrusage(%s) not between two raw calls", name);
	return !ok;
}

static void *burn(void *arg)
{
	(void)arg;
	for (volatile long i = 0; i < 20000000; i++)
		;
	return NULL;
}

static int t_rusage(void)
{
	int bad = 0;
	pthread_t t;
	struct rusage before, after;
	G.getrusage(RUSAGE_SELF, &before);
	pthread_create(&t, NULL, burn, NULL); /* an exited thread still counts */
	pthread_join(t, NULL);
	G.getrusage(RUSAGE_SELF, &after);
	if (tv(after.ru_utime) + tv(after.ru_stime) <= tv(before.ru_utime) + tv(before.ru_stime)) {
		FAIL("getrusage(RUSAGE_SELF) misses an exited thread's time");
		bad = 1;
	}
	pid_t p = fork();
	if (p == 0) {
		burn(NULL);
		_exit(0);
	}
	bad |= wait_ok(p, "rusage child");
	for (int i = 0; i < 2000 && !bad; i++)
		bad |= ru_bracket(RUSAGE_SELF, "RUSAGE_SELF") | ru_bracket(RUSAGE_THREAD, "RUSAGE_THREAD") |
		       ru_bracket(RUSAGE_CHILDREN, "RUSAGE_CHILDREN");
	struct rusage c;
	G.getrusage(RUSAGE_CHILDREN, &c);
	if (tv(c.ru_utime) == 0) {
		FAIL("getrusage(RUSAGE_CHILDREN) misses the reaped child");
		bad = 1;
	}
	return bad;
}

int main(int argc, char **argv)
{
	const char *c = argc > 1 ? argv[1] : "check";
	self_exe = "/proc/self/exe";
	static char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = 0;
		self_exe = exe;
	}
	expect_bypass = getenv("BT_EXPECT_BYPASS") && atoi(getenv("BT_EXPECT_BYPASS"));
	verbose = getenv("BT_VERBOSE") != NULL;
	setup_getters();
#ifdef DLOPEN
	if (!strcmp(c, "dlopen"))
		return t_dlopen(argc > 2 ? argv[2] : "libharrier-bypass.so");
	fprintf(stderr, "bt-dlopen: only the dlopen case\n");
	return 2;
#endif
	if (!strcmp(c, "check") || !strcmp(c, "basic"))
		return check_bypassed(c, scaled(argc > 2 ? atoi(argv[2]) : 100000, 1000));
	if (!strcmp(c, "fork")) return t_fork();
	if (!strcmp(c, "fork-thread")) return t_fork_thread();
	if (!strcmp(c, "raw-forks")) return t_raw_forks();
	if (!strcmp(c, "atfork")) return t_atfork();
	if (!strcmp(c, "vfork")) return t_vfork();
	if (!strcmp(c, "posix_spawn")) return t_posix_spawn();
	if (!strcmp(c, "clone")) return t_clone();
	if (!strcmp(c, "clone3")) return t_clone3();
	if (!strcmp(c, "threads"))
		return t_threads(argc > 2 ? atoi(argv[2]) : 64, argc > 3 ? atoi(argv[3]) : 0,
				 argc > 4 ? atoi(argv[4]) : -1);
	if (!strcmp(c, "signals")) return t_signals();
	if (!strcmp(c, "exec")) return t_exec(0);
	if (!strcmp(c, "exec-thread")) return t_exec(1);
	if (!strcmp(c, "setuid-mt")) return t_setuid_mt();
	if (!strcmp(c, "pidns")) return t_pidns();
	if (!strcmp(c, "orphan")) return t_orphan();
	if (!strcmp(c, "userns")) return t_userns();
	if (!strcmp(c, "restart")) return t_restart(argc > 2 ? argv[2] : "/nonexistent");
	if (!strcmp(c, "security")) return t_security();
	if (!strcmp(c, "hold")) return t_hold();
	if (!strcmp(c, "rusage")) return t_rusage();
	fprintf(stderr, "bt: unknown case %s\n", c);
	return 2;
}
