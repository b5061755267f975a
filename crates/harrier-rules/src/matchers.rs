//! Allocation-free string helpers the evaluator uses: glob, path prefixes, case-insensitive
//! search, base64 decoding in place, integer formatting, and a fast hash for literal sets.

use std::hash::{BuildHasherDefault, Hasher};

/// Falco's glob: `*` any run of bytes (slashes included), `?` one byte, `[...]` a class
/// (`[!...]` or `[^...]` negated, ranges `a-z`), `\x` a literal x.
pub fn glob(pat: &[u8], s: &[u8], icase: bool) -> bool {
    let eq = |a: u8, b: u8| if icase { a.eq_ignore_ascii_case(&b) } else { a == b };
    let (mut p, mut i) = (0usize, 0usize);
    // Backtracking point: the last `*` and where the string stood.
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    star = Some((p, i));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class(pat, p, s[i], icase) {
                        if matched {
                            p = next;
                            i += 1;
                            continue;
                        }
                    } else if eq(b'[', s[i]) {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pat.len() => {
                    if eq(pat[p + 1], s[i]) {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if eq(c, s[i]) {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, si)) => {
                p = sp + 1;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// Matches `c` against the class starting at `pat[p] == '['`: (matched, index after `]`),
/// or None if the class is not closed (then `[` is literal).
fn class(pat: &[u8], p: usize, c: u8, icase: bool) -> Option<(bool, usize)> {
    let mut j = p + 1;
    let neg = matches!(pat.get(j), Some(b'!' | b'^'));
    if neg {
        j += 1;
    }
    let mut matched = false;
    let mut first = true;
    let norm = |x: u8| if icase { x.to_ascii_lowercase() } else { x };
    while j < pat.len() {
        let a = pat[j];
        if a == b']' && !first {
            return Some((matched != neg, j + 1));
        }
        first = false;
        if j + 2 < pat.len() && pat[j + 1] == b'-' && pat[j + 2] != b']' {
            let (lo, hi) = (norm(a), norm(pat[j + 2]));
            if lo <= norm(c) && norm(c) <= hi {
                matched = true;
            }
            j += 3;
        } else {
            if norm(a) == norm(c) {
                matched = true;
            }
            j += 1;
        }
    }
    None
}

/// Falco's pmatch: `s` is the prefix path itself or lies below it.
pub fn path_prefix(prefix: &[u8], s: &[u8]) -> bool {
    let p = prefix.strip_suffix(b"/").unwrap_or(prefix);
    if p.is_empty() {
        return s.first() == Some(&b'/');
    }
    s.starts_with(p) && (s.len() == p.len() || s[p.len()] == b'/')
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

pub fn icontains(hay: &[u8], needle: &[u8]) -> bool {
    let Some(&first) = needle.first() else { return true };
    if hay.len() < needle.len() {
        return false;
    }
    // Candidate starts: either case of the first byte, found with memchr2.
    let (lo, up) = (first.to_ascii_lowercase(), first.to_ascii_uppercase());
    let last = hay.len() - needle.len();
    memchr::memchr2_iter(lo, up, &hay[..=last]).any(|i| hay[i..i + needle.len()].eq_ignore_ascii_case(needle))
}

/// Writes `n` in decimal into `buf`, returning the digits.
pub fn fmt_u64(n: u64, buf: &mut [u8; 24]) -> &[u8] {
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

pub fn fmt_i64(n: i64, buf: &mut [u8; 24]) -> &[u8] {
    if n >= 0 {
        return fmt_u64(n as u64, buf);
    }
    let len = fmt_u64(n.unsigned_abs(), buf).len();
    let start = buf.len() - len - 1;
    buf[start] = b'-';
    &buf[start..]
}

/// Decodes standard base64 in place; None if it is not valid base64.
pub fn b64_decode_in_place(buf: &mut [u8]) -> Option<usize> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => (c - b'A') as u32,
            b'a'..=b'z' => (c - b'a' + 26) as u32,
            b'0'..=b'9' => (c - b'0' + 52) as u32,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        })
    };
    let mut len = buf.len();
    while len > 0 && buf[len - 1] == b'=' {
        len -= 1;
    }
    let (mut acc, mut bits, mut out) = (0u32, 0u32, 0usize);
    for i in 0..len {
        acc = (acc << 6) | val(buf[i])?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            // out < i always: 3 bytes out per 4 in, so writing behind the reader is safe.
            buf[out] = (acc >> bits) as u8;
            out += 1;
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// Hex text to bytes (bcontains/bstartswith operands).
pub fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let s: Vec<u8> = s.bytes().filter(|c| !c.is_ascii_whitespace()).collect();
    if s.len() & 1 == 1 {
        return None;
    }
    s.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).ok()?, 16).ok()).collect()
}

/// FxHash: the hash for literal sets (short strings, no adversarial keys: they come from rules).
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(c.try_into().unwrap())).wrapping_mul(K);
        }
        for &b in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ b as u64).wrapping_mul(K);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write(&[i]);
    }
    fn write_usize(&mut self, i: usize) {
        self.write(&i.to_le_bytes());
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub type FxBuild = BuildHasherDefault<FxHasher>;
pub type FxSet<T> = std::collections::HashSet<T, FxBuild>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_cases() {
        for (p, s, want) in [
            ("*", "", true),
            ("/etc/*", "/etc/shadow", true),
            ("/etc/*", "/etc/a/b", true),
            ("*.sh", "/tmp/x.sh", true),
            ("*.sh", "/tmp/x.shx", false),
            ("a?c", "abc", true),
            ("a?c", "ac", false),
            ("[a-c]x", "bx", true),
            ("[!a-c]x", "bx", false),
            ("[ab", "[ab", true),
            ("a*b*c", "aXXbYYc", true),
            ("a*b*c", "aXXbYY", false),
            ("\\*", "*", true),
        ] {
            assert_eq!(glob(p.as_bytes(), s.as_bytes(), false), want, "glob {p:?} {s:?}");
        }
        assert!(glob(b"/ETC/*", b"/etc/x", true));
    }

    #[test]
    fn pmatch_cases() {
        assert!(path_prefix(b"/var/run", b"/var/run"));
        assert!(path_prefix(b"/var/run", b"/var/run/docker.sock"));
        assert!(path_prefix(b"/var/run/", b"/var/run/docker.sock"));
        assert!(!path_prefix(b"/var/run", b"/var/running"));
    }

    #[test]
    fn b64_and_numbers() {
        let mut b = *b"aGVsbG8=";
        let n = b64_decode_in_place(&mut b).unwrap();
        assert_eq!(&b[..n], b"hello");
        let mut buf = [0; 24];
        assert_eq!(fmt_i64(-42, &mut buf), b"-42");
        assert_eq!(fmt_u64(0, &mut buf), b"0");
        assert_eq!(parse_hex("CAFE babe"), Some(vec![0xca, 0xfe, 0xba, 0xbe]));
    }
}
