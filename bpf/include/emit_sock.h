/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a socket really is, from the kernel's objects (not the caller's
 * buffer): the peer a connect reached, the address a bind took. Part of
 * emit.h (included from it: it uses the event writer there).
 */
#ifndef HARRIER_EMIT_SOCK_H
#define HARRIER_EMIT_SOCK_H

#define HR_AF_UNIX 1
#define HR_AF_INET 2
#define HR_AF_INET6 10
#define HR_EINPROGRESS 115

/*
 * An address the kernel holds for the socket behind fd, written as a struct
 * sockaddr: the peer (connect, accept) or, with `local`, the socket's own
 * (bind, and the port connect picked). Only when `ok` (the call succeeded or
 * is in progress); a racing thread may change the caller's buffer, not this.
 */
static __always_inline void hr_put_sockaddr_of(struct hr_em *em, __s64 fd, bool ok, bool local)
{
	__u8 *slot = hr_var_begin(em);
	__u64 f, sock, sk;
	__u16 family;
	__u32 n = 0;

	if (!slot)
		return;
	if (!ok)
		goto out;
	f = hr_fd_file(em, fd);
	sock = f ? (__u64)hr_kread(f, struct file, private_data) : 0;
	sk = sock ? (__u64)hr_kread(sock, struct socket, sk) : 0;
	if (!sk)
		goto out;
	family = hr_kread(sk, struct sock, __sk_common.skc_family);
	__builtin_memset(slot + 2, 0, 28);
	*(__u16 *)(slot + 2) = family;
	if (family == HR_AF_INET || family == HR_AF_INET6) {
		/* skc_num (local port) is in host order, skc_dport in network order. */
		*(__u16 *)(slot + 4) = local ? bpf_htons(hr_kread(sk, struct sock, __sk_common.skc_num))
					     : hr_kread(sk, struct sock, __sk_common.skc_dport);
		if (family == HR_AF_INET) {
			*(__u32 *)(slot + 6) = local ? hr_kread(sk, struct sock, __sk_common.skc_rcv_saddr)
						     : hr_kread(sk, struct sock, __sk_common.skc_daddr);
			n = 16;
		} else {
			struct sock *s = (struct sock *)sk;

			if (local)
				bpf_core_read(slot + 10, 16, &s->__sk_common.skc_v6_rcv_saddr);
			else
				bpf_core_read(slot + 10, 16, &s->__sk_common.skc_v6_daddr);
			n = 28;
		}
	} else if (family == HR_AF_UNIX) {
		__u64 peer = local ? sk : (__u64)hr_kread(sk, struct unix_sock, peer);
		__u64 addr = peer ? (__u64)hr_kread(peer, struct unix_sock, addr) : 0;
		__u64 len = addr ? hr_kread(addr, struct unix_address, len) : 0;

		/* An unbound socket has no name: the family alone says unix. */
		hr_clamp(len, HR_SOCKADDR_MAX);
		if (len)
			bpf_probe_read_kernel(slot + 2, len, &((struct unix_address *)addr)->name);
		n = len ? len : 2;
	}
out:
	hr_var_end(em, slot, n);
}

/* What a connect really connected to. */
static __always_inline void hr_put_sockpeer(struct hr_em *em, __u64 fd)
{
	hr_put_sockaddr_of(em, fd, em->ret == 0 || em->ret == -HR_EINPROGRESS, 0);
}

#endif
