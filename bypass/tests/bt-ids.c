// SPDX-License-Identifier: Apache-2.0
/* bt's cases: ids and credentials, reparenting, namespaces, dlopen, the service restarting, security, getrusage (bt.c runs them by name). */
#include "bt.h"

/* ---- credentials ---- */
static pthread_barrier_t cred_bar;
static int cred_phase;
static void *cred_thread(void *arg)
{
	long bad = 0;
	(void)arg;
	for (int phase = 0; phase < 6; phase++) {
		bad |= check_loop("setuid-mt: thread", 500);
		pthread_barrier_wait(&cred_bar); /* main changes creds */
		pthread_barrier_wait(&cred_bar);
	}
	return (void *)bad;
}

/* setresuid() & co. in a process with 4 threads: after each change every
 * thread must see the new ids. */
int t_setuid_mt(void)
{
	pthread_t t[4];
	void *r;
	int bad = 0;
	pthread_barrier_init(&cred_bar, NULL, 5);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, cred_thread, NULL);
	for (cred_phase = 0; cred_phase < 6; cred_phase++) {
		bad |= check_loop("setuid-mt: main", 500);
		pthread_barrier_wait(&cred_bar);
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
		pthread_barrier_wait(&cred_bar);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], &r);
		bad |= r != NULL;
	}
	return bad || check_loop("setuid-mt: main at the end", 1000);
}

/* ---- reparenting: getppid() must follow when the parent exits ---- */
int t_orphan(void)
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
int t_pidns(void)
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

int t_userns(void)
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

int t_dlopen(const char *lib)
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
int t_restart(const char *flag)
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

int t_security(void)
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
int t_hold(void)
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

int t_rusage(void)
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
