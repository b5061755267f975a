// SPDX-License-Identifier: Apache-2.0
/* bt's cases: the process life cycle: fork, clone, threads, signals, exec (bt.c runs them by name). */
#include "bt.h"

/* ---- fork family ---- */
int t_fork(void)
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

int t_fork_thread(void)
{
	pthread_t t;
	void *r;
	check_loop("fork-thread: main", 100);
	pthread_create(&t, NULL, fork_thread, NULL);
	pthread_join(t, &r);
	return r != NULL || check_loop("fork-thread: main after", 1000);
}

int t_raw_forks(void)
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

int t_atfork(void)
{
	check_loop("atfork: parent", 100);
	pthread_atfork(NULL, NULL, atfork_child);
	pid_t p = fork();
	if (p == 0)
		_exit(atfork_bad != 0 || check_loop("atfork: child", 1000));
	return wait_ok(p, "atfork");
}

int t_vfork(void)
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

int t_posix_spawn(void)
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

int t_clone(void)
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

int t_clone3(void)
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
int t_threads(int n, int min_b, int max_b)
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

int t_signals(void)
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

int t_exec(int from_thread)
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
