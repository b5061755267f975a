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
 * The cases are in bt-procs.c and bt-ids.c; here are the harness and main.
 */
#include "bt.h"

struct getters G;
const char *self_exe;
int expect_bypass, verbose;

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

uint64_t bypassed(int f)
{
	uint64_t b[8] = {0}, fb[8] = {0};
	if (G.counts)
		G.counts(b, fb);
	return b[f];
}

/* One comparison of every function with its raw call. Returns mismatches. */
int check(const char *where)
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
int scaled(int n, int min)
{
	const char *s = getenv("HARRIER_TEST_SCALE");
	int k = s ? atoi(s) : 1;

	if (k <= 1)
		return n;
	if (n / k >= min)
		return n / k;
	return n < min ? n : min;
}

int check_loop(const char *where, int n)
{
	for (int i = 0; i < n; i++)
		if (check(where))
			return 1;
	return 0;
}

/* check_loop, and with BT_EXPECT_BYPASS also that getpid was answered from the map. */
int check_bypassed(const char *where, int n)
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

int wait_ok(pid_t pid, const char *what)
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
