// SPDX-License-Identifier: Apache-2.0
/*
 * bt's harness, shared by its case files: the raw calls, the functions under
 * test (G), the comparisons and the cases' entry points (see bt.c).
 */
#ifndef BT_H
#define BT_H

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
};
extern struct getters G;


extern const char *self_exe;
extern int expect_bypass, verbose;

#define FAIL(...) do { fprintf(stderr, "bt[%ld]: ", raw0(SYS_getpid)); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } while (0)

uint64_t bypassed(int f);
int check(const char *where);
int scaled(int n, int min);
int check_loop(const char *where, int n);
int check_bypassed(const char *where, int n);
int wait_ok(pid_t pid, const char *what);

/* Cases: bt-procs.c (process life cycle) */
int t_fork(void);
int t_fork_thread(void);
int t_raw_forks(void);
int t_atfork(void);
int t_vfork(void);
int t_posix_spawn(void);
int t_clone(void);
int t_clone3(void);
int t_threads(int n, int min_b, int max_b);
int t_signals(void);
int t_exec(int from_thread);
/* bt-ids.c (ids, namespaces, the library and its service) */
int t_setuid_mt(void);
int t_orphan(void);
int t_pidns(void);
int t_userns(void);
int t_dlopen(const char *lib);
int t_restart(const char *flag);
int t_security(void);
int t_hold(void);
int t_rusage(void);

#endif
