// SPDX-License-Identifier: Apache-2.0
/*
 * bench: timings for scripts/bench-bypass.sh. Prints one number (ns per call
 * or per operation, or seconds for the classic test) on stdout.
 *   bench getpid N        N getpid() calls, then the last result is checked
 *                         against the raw syscall; prints seconds
 *   bench fn NAME N       ns per call of one wrapped function
 *   bench syscall N       ns per raw getppid syscall (machine-wide cost)
 *   bench register N      ns of the first getpid() of a new thread minus the
 *                         second one (the registration), median of N threads
 *   bench fork N          ns per fork + _exit + waitpid (median of N)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline long raw0(long n)
{
	long r;
	__asm__ __volatile__("syscall" : "=a"(r) : "a"(n) : "rcx", "r11", "memory");
	return r;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp);
	return v[n / 2];
}

static volatile long sink;

#define LOOP(call) do { for (long i = 0; i < n; i++) sink = (long)(call); } while (0)

static double reg_cost[4096];
static void *reg_thread(void *arg)
{
	double t0 = now();
	sink = getpid();
	double t1 = now();
	sink = getpid();
	double t2 = now();
	*(double *)arg = ((t1 - t0) - (t2 - t1)) * 1e9;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: bench getpid|fn NAME|syscall|register|fork N\n");
		return 2;
	}
	const char *what = argv[1];
	long n = atol(argv[argc - 1]);
	double t0, t1;

	if (!strcmp(what, "getpid")) {
		pid_t p = 0;
		t0 = now();
		for (long i = 0; i < n; i++)
			p = getpid();
		t1 = now();
		if (p != raw0(SYS_getpid)) {
			fprintf(stderr, "bench: getpid() returned %d, raw %ld\n", p, raw0(SYS_getpid));
			return 1;
		}
		printf("%.3f\n", t1 - t0);
		return 0;
	}
	if (!strcmp(what, "fn")) {
		const char *f = argv[2];
		struct rusage ru;
		sink = getpid(); /* register outside the timing */
		t0 = now();
		if (!strcmp(f, "getpid")) LOOP(getpid());
		else if (!strcmp(f, "gettid")) LOOP(gettid());
		else if (!strcmp(f, "getppid")) LOOP(getppid());
		else if (!strcmp(f, "getuid")) LOOP(getuid());
		else if (!strcmp(f, "geteuid")) LOOP(geteuid());
		else if (!strcmp(f, "getgid")) LOOP(getgid());
		else if (!strcmp(f, "getegid")) LOOP(getegid());
		else if (!strcmp(f, "getrusage")) LOOP(getrusage(RUSAGE_SELF, &ru));
		else return 2;
		t1 = now();
		printf("%.1f\n", (t1 - t0) * 1e9 / n);
		return 0;
	}
	if (!strcmp(what, "syscall")) {
		t0 = now();
		LOOP(raw0(SYS_getppid));
		t1 = now();
		printf("%.1f\n", (t1 - t0) * 1e9 / n);
		return 0;
	}
	if (!strcmp(what, "register")) {
		if (n > 4096)
			n = 4096;
		for (long i = 0; i < n; i++) {
			pthread_t t;
			pthread_create(&t, NULL, reg_thread, &reg_cost[i]);
			pthread_join(t, NULL);
		}
		printf("%.0f\n", median(reg_cost, n));
		return 0;
	}
	if (!strcmp(what, "fork")) {
		static double v[4096];
		if (n > 4096)
			n = 4096;
		for (long i = 0; i < n; i++) {
			t0 = now();
			pid_t p = fork();
			if (p == 0)
				_exit(0);
			waitpid(p, NULL, 0);
			v[i] = (now() - t0) * 1e9;
		}
		printf("%.0f\n", median(v, n));
		return 0;
	}
	return 2;
}
